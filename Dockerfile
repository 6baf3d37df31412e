# podwright's one image: the operator (the default command), the admission webhook
# (`podwright webhook ...`) and the FUSE proxy (`podwright fuse-proxy server|ping|install-shim`),
# all from the `podwright` entry point, which is also on PATH as the manifests' commands expect.
#
# `make image` builds it with buildah, after making the base image from Debian's packages
# (scripts/build-base-image.sh) under the pinned name below; where Docker Hub is reachable,
# `docker build .` pulls the same name instead.
#
# Build arguments: BASE_IMAGE (Debian 12, slim; where a registry is reachable, pin it by digest:
# --build-arg BASE_IMAGE=docker.io/library/debian@sha256:...), PIP_VERSION, SETUPTOOLS_VERSION,
# WHEEL_VERSION (the build's own tools), VERSION and REVISION (labels only).
# Optional build secret `pip-cert`: a CA bundle for pip, where a TLS-inspecting proxy stands
# between the build and PyPI (`make image` passes the host's bundle).

ARG BASE_IMAGE=docker.io/library/debian:12-slim

# ---- dependencies: podwright's dependencies in a virtualenv that has no pip of its own
# ---- (/opt/podwright), read from pyproject.toml alone: a stage that a change of the sources keeps
FROM ${BASE_IMAGE} AS dependencies

ARG PIP_VERSION=26.3
ARG SETUPTOOLS_VERSION=84.2.1
ARG WHEEL_VERSION=0.48.0
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PIP_DEFAULT_TIMEOUT=120

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*

# The build's tools, pinned, in a virtualenv of their own (/opt/build).
RUN --mount=type=secret,id=pip-cert \
    if [ -s /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi \
    && python3 -m venv /opt/build \
    && /opt/build/bin/pip install --quiet "pip==${PIP_VERSION}" \
    && /opt/build/bin/pip install --quiet \
        "setuptools==${SETUPTOOLS_VERSION}" "wheel==${WHEEL_VERSION}" \
    && python3 -m venv --without-pip /opt/podwright

# Wheels only: the build has no compiler, and needs none.
COPY pyproject.toml /src/pyproject.toml
RUN --mount=type=secret,id=pip-cert \
    if [ -s /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi \
    && python3 -c 'import tomllib; print(*tomllib.load(open("/src/pyproject.toml", "rb"))["project"]["dependencies"], sep="\n")' \
        > /tmp/requirements.txt \
    && /opt/build/bin/pip --python /opt/podwright/bin/python install --quiet \
        --only-binary=:all: --requirement /tmp/requirements.txt

# ---- builder: a wheel of podwright from the sources, installed into that virtualenv; its own
# ---- files (package, metadata, entry point) also gathered under /opt/own for a layer of their own
FROM dependencies AS builder

COPY README.md /src/README.md
COPY src /src/src
# --no-index: every dependency must be there already.
RUN /opt/build/bin/pip wheel --quiet --no-deps --no-build-isolation --wheel-dir /tmp/wheels /src \
    && /opt/build/bin/pip --python /opt/podwright/bin/python install --quiet --no-index \
        /tmp/wheels/podwright-*.whl \
    && /opt/build/bin/pip --python /opt/podwright/bin/python check \
    && /opt/podwright/bin/podwright --version \
    && /opt/podwright/bin/python -c 'import importlib.metadata as m, os; print(*sorted({os.path.relpath(f.locate(), "/") for f in m.distribution("podwright").files}), sep="\n")' \
        > /tmp/own-files \
    && mkdir /opt/own \
    && tar -C / -cf - --files-from=/tmp/own-files | tar -C /opt/own -xf -

# ---- the image: Debian's python3, the virtualenv, a user that is not root (65532)
FROM ${BASE_IMAGE}

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old \
        /var/log/apt /var/log/dpkg.log /var/log/alternatives.log \
    && groupadd --gid 65532 -K GID_MAX=65532 podwright \
    && useradd --uid 65532 --gid 65532 -K UID_MAX=65532 --no-log-init --create-home \
        --home-dir /home/podwright --shell /usr/sbin/nologin podwright

# The dependencies, then podwright itself: a change of the sources makes a small layer.
COPY --from=dependencies /opt/podwright /opt/podwright
COPY --from=builder /opt/own/ /

ENV PATH=/opt/podwright/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
WORKDIR /home/podwright
ENTRYPOINT ["/opt/podwright/bin/podwright"]
CMD ["operator"]

# Last, so that a new revision rebuilds no layer.
ARG BASE_IMAGE
ARG VERSION=unknown
ARG REVISION=unknown
LABEL org.opencontainers.image.title="podwright" \
      org.opencontainers.image.description="podwright's operator, admission webhook and FUSE proxy: AI workloads on Kubernetes" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
