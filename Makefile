# Every target sets itself up: a virtualenv in .venv with podwright and its tools installed.
# `make run` runs the main job; `make check` is the whole test suite (lint, types, contracts, tests).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run check test lint format typecheck contracts bench clean debian-packages image

# Debian packages the FUSE proxy's real tests and benchmark use: fusermount3 (the baseline),
# squashfuse and fuse-zip (real FUSE file systems, libfuse3 and libfuse2), mksquashfs. And those
# `make image` and its test use: mmdebstrap (the base image), podman (import), buildah (build, run).
# And the browser tests' (marked browser): chromium, which Playwright drives (no browser download).
DEBIAN_PACKAGES := fuse3 squashfuse squashfs-tools fuse-zip mmdebstrap podman buildah chromium
DEBIAN_COMMANDS := fusermount3 squashfuse mksquashfs fuse-zip mmdebstrap podman buildah chromium

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "podwright needs Python >= 3.11; set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/podwright run --workload examples/workload-local.yaml \
		--policy examples/policies/local-dev.yaml --backend local --home .podwright

check: lint typecheck contracts test

debian-packages:
	@missing=""; for command in $(DEBIAN_COMMANDS); do \
		command -v $$command >/dev/null 2>&1 || missing="$$missing $$command"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo=sudo; \
		else echo "missing:$$missing; install $(DEBIAN_PACKAGES) (the real FUSE, image and browser tests skip without them, and fail under CI=true)"; exit 0; fi; \
		echo "installing $(DEBIAN_PACKAGES) for:$$missing"; \
		$$sudo apt-get install -y -qq --no-install-recommends $(DEBIAN_PACKAGES) >/dev/null 2>&1 || \
		{ $$sudo apt-get update -qq && $$sudo apt-get install -y -qq --no-install-recommends $(DEBIAN_PACKAGES); }; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format: $(STAMP)
	$(BIN)/ruff check --fix src tests benchmarks
	$(BIN)/ruff format src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

# The tests on PYTEST_WORKERS processes (pytest-xdist); tests that must not overlap share an
# xdist_group (tests/conftest.py), which one worker runs one after the other. Three workers keep
# two cores busy: many tests spend their time waiting on a subprocess, a server or a watch
# (under CI=true on two cores: 7 minutes with three workers, 9½ with two).
PYTEST_WORKERS ?= 3
# A session that hangs (a test that pytest-timeout cannot interrupt, a worker that cannot exit) is
# interrupted after TEST_SESSION_LIMIT, so that pytest prints what it has (faulthandler_timeout in
# pyproject.toml has dumped the stuck test's threads by then) instead of CI's own limit killing it
# silently.
TEST_SESSION_LIMIT ?= 30m

test: $(STAMP) debian-packages
	timeout --signal=INT --kill-after=2m $(TEST_SESSION_LIMIT) \
		$(BIN)/pytest --numprocesses=$(PYTEST_WORKERS) --dist=loadgroup

bench: $(STAMP)
	$(BIN)/python benchmarks/policy_bench.py
	$(BIN)/python benchmarks/render_bench.py
	$(BIN)/python benchmarks/lifecycle_bench.py
	$(BIN)/python benchmarks/executor_bench.py
	$(BIN)/python benchmarks/operator_bench.py
	$(BIN)/python benchmarks/fuse_proxy_bench.py
	$(BIN)/python benchmarks/startup_bench.py
	$(BIN)/python benchmarks/webhook_server_bench.py
	$(BIN)/python benchmarks/webhook_bench.py
	$(BIN)/python benchmarks/console_bench.py

# The container image (Dockerfile), built with buildah as root: the base image it names is made
# from Debian's packages when missing (no image registry is reachable), the build gets the host's
# CA bundle as the secret pip-cert, and a working container runs two checks; no container is left,
# even when the build or a check fails.
# Storage is containers' default (overlay); set STORAGE_DRIVER=vfs where overlay does not work.
IMAGE_VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' src/podwright/_version.py)
IMAGE ?= podwright:$(IMAGE_VERSION)
IMAGE_CA_BUNDLE ?= $(or $(PIP_CERT),/etc/ssl/certs/ca-certificates.crt)

image: debian-packages
	scripts/build-base-image.sh
	buildah bud --isolation chroot --layers --force-rm --pull=never \
		$$([ -s "$(IMAGE_CA_BUNDLE)" ] && echo --secret id=pip-cert,src=$(IMAGE_CA_BUNDLE)) \
		--build-arg VERSION=$(IMAGE_VERSION) \
		--build-arg REVISION=$$(git rev-parse --short HEAD 2>/dev/null || echo unknown) \
		--tag $(IMAGE) .
	@set -e; container=$$(buildah from --pull-never --quiet $(IMAGE)); \
	trap 'buildah rm $$container >/dev/null' EXIT; trap 'exit 130' INT TERM; \
	echo "$(IMAGE): podwright --version"; \
	buildah run --isolation chroot $$container -- podwright --version; \
	echo "$(IMAGE): podwright operator --help"; \
	buildah run --isolation chroot $$container -- podwright operator --help

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis .import_linter_cache
