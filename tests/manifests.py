"""Checks every manifest a test produces: the OpenAPI schema, and the API server's own rules.

The schema (from the ``kubernetes-validate`` package, strict: unknown fields are errors) is
checked for the oldest and the newest Kubernetes version the package ships. The schema cannot
express cross-field rules that the API server enforces on create, so the ones podwright's grants
can break are checked here too, as the server states them (pkg/apis/core/validation).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import jsonschema
from kubernetes_validate.utils import all_versions, schema_contents
from referencing import Registry, Resource

from podwright.core.pod_template import APPARMOR_ANNOTATION_PREFIX

SCHEMA_VERSIONS = (all_versions()[0], all_versions()[-1])


@functools.cache
def _validator(version: str, kind: str, api_version: str) -> jsonschema.Validator:
    # kubernetes_validate.validate() reads and parses the schemas on every call (~20 ms); the
    # property tests validate hundreds of manifests, so keep one compiled validator per kind.
    directory = f"kubernetes-json-schema/v{version}-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = schema_contents(f"{directory}/{kind.lower()}-{group_version}.json", version)
    definitions = schema_contents(f"{directory}/_definitions.json", version)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _versions_since(oldest: str | None) -> list[str]:
    def key(version: str) -> tuple[int, ...]:
        return tuple(int(part) for part in version.split("."))

    return [v for v in SCHEMA_VERSIONS if oldest is None or key(v) >= key(oldest)] or [
        SCHEMA_VERSIONS[-1]
    ]


def schema_errors(manifest: dict[str, Any], oldest: str | None = None) -> list[str]:
    """Every schema violation of ``manifest`` in ``SCHEMA_VERSIONS`` (from ``oldest`` on)."""
    errors = []
    for version in _versions_since(oldest):
        validator = _validator(version, manifest["kind"], manifest["apiVersion"])
        errors.extend(
            f"v{version}: {'.'.join(map(str, error.path))}: {error.message}"
            for error in validator.iter_errors(manifest)
        )
    return errors


def _containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(field, [])


def api_server_errors(pod: dict[str, Any]) -> list[str]:
    """Cross-field rules the API server enforces on a Pod create, that grants could break."""
    spec, annotations = pod["spec"], pod["metadata"].get("annotations", {})
    errors: list[str] = []
    names = [container["name"] for container in _containers(spec)]
    if len(names) != len(set(names)):
        errors.append(f"duplicate container names: {names}")
    volumes = [volume["name"] for volume in spec.get("volumes", [])]
    if len(volumes) != len(set(volumes)):
        errors.append(f"duplicate volume names: {volumes}")
    for container in _containers(spec):
        name = container["name"]
        mounts = container.get("volumeMounts", [])
        for mount in mounts:
            if mount["name"] not in volumes:
                errors.append(f"{name}: volumeMount {mount['name']!r} names no volume")
        paths = [mount["mountPath"] for mount in mounts]
        if len(paths) != len(set(paths)):
            errors.append(f"{name}: duplicate mountPath: {paths}")
        context = container.get("securityContext", {})
        if context.get("allowPrivilegeEscalation") is False:
            if context.get("privileged") is True:
                errors.append(f"{name}: allowPrivilegeEscalation false with privileged true")
            if "CAP_SYS_ADMIN" in context.get("capabilities", {}).get("add", []):
                errors.append(f"{name}: allowPrivilegeEscalation false with CAP_SYS_ADMIN")
        resources = container.get("resources", {})
        requests, limits = resources.get("requests", {}), resources.get("limits", {})
        for resource in set(requests) | set(limits):
            if "/" not in resource or resource.startswith("kubernetes.io/"):
                continue  # only extended resources must not be overcommitted
            if resource not in limits:
                errors.append(f"{name}: extended resource {resource} requested without limit")
            elif resource in requests and requests[resource] != limits[resource]:
                errors.append(f"{name}: extended resource {resource} request != limit")
        field = context.get("appArmorProfile")
        annotation = annotations.get(APPARMOR_ANNOTATION_PREFIX + name)
        if field is not None and annotation is not None:
            as_annotation = {"Unconfined": "unconfined", "RuntimeDefault": "runtime/default"}
            expected = as_annotation.get(
                field["type"], f"localhost/{field.get('localhostProfile')}"
            )
            if annotation != expected:
                errors.append(f"{name}: AppArmor annotation {annotation!r} != field {field}")
    for key, value in annotations.items():
        if key.startswith(APPARMOR_ANNOTATION_PREFIX):
            if key.removeprefix(APPARMOR_ANNOTATION_PREFIX) not in names:
                errors.append(f"AppArmor annotation {key} names no container")
            if value not in ("unconfined", "runtime/default") and not value.startswith(
                "localhost/"
            ):
                errors.append(f"AppArmor annotation {key} has invalid profile {value!r}")
    return errors


APPARMOR_FIELD_SINCE = "1.30.0"
"""``securityContext.appArmorProfile`` exists from this version on."""


def assert_valid_pod(pod: dict[str, Any], oldest: str | None = None) -> None:
    """Fail unless ``pod`` would pass schema validation and the API server's checks.

    ``oldest``: a pod whose input uses a newer field is checked from that version on.
    """
    errors = schema_errors(pod, oldest) + api_server_errors(pod)
    assert not errors, "\n".join(errors)
