"""Checks every manifest a test produces: the OpenAPI schema, and the API server's own rules.

The schema (from the ``kubernetes-validate`` package, strict: unknown fields are errors) is
checked for the oldest and the newest Kubernetes version the package ships. The schema cannot
express cross-field rules that the API server enforces on create, so the ones podwright's grants
can break are checked here too, as the server states them (pkg/apis/core/validation).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterable, Iterator
from typing import Any

import jsonschema
from kubernetes_validate.utils import all_versions, schema_contents
from referencing import Registry, Resource

from podwright.core.pod_template import APPARMOR_ANNOTATION_PREFIX
from tests.k8s_emulator.crds import THIRD_PARTY_CRDS, crd_for

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


NATIVE_SIDECARS_SINCE = "1.29.0"
"""Init containers with ``restartPolicy: Always`` (native sidecars) exist from this version on."""


def _closed(schema: Any) -> Any:
    """``schema`` with every object that lists its properties closed to unknown fields."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: _closed(value) for key, value in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        closed["additionalProperties"] = False
    return closed


@functools.cache
def _crd_validators() -> dict[tuple[str, str], jsonschema.Validator]:
    """A validator per custom kind podwright renders, from its upstream CRD in
    ``../shared/schemas`` (the same files the emulator serves the kinds from)."""
    validators = {}
    for api_version, kind in THIRD_PARTY_CRDS:
        crd = crd_for(api_version, kind)
        group = crd["spec"]["group"]
        for version in crd["spec"]["versions"]:
            schema = _closed(version["schema"]["openAPIV3Schema"])
            validators[(f"{group}/{version['name']}", kind)] = jsonschema.Draft7Validator(schema)
    return validators


def crd_schema_errors(manifest: dict[str, Any]) -> list[str]:
    """Every violation of the custom resource's CRD schema (closed to unknown fields)."""
    validator = _crd_validators().get((manifest["apiVersion"], manifest["kind"]))
    assert validator is not None, f"no CRD schema for {manifest['apiVersion']} {manifest['kind']}"
    return [
        f"{'.'.join(map(str, error.path))}: {error.message}"
        for error in validator.iter_errors(manifest)
    ]


def required_value_errors(manifest: dict[str, Any]) -> list[str]:
    """Values the API server requires on create that the OpenAPI schema leaves optional, in
    every pod a manifest describes: a container's image (``validateContainerCommon`` in
    kubernetes pkg/apis/core/validation/validation.go: ``field.Required(path.Child("image"))``,
    for pods and pod templates alike). Tests of grants build pods without images on purpose, so
    this is apart from :func:`api_server_errors`; a manifest printed for ``kubectl apply`` must
    pass both (:func:`assert_accepted_as_printed`)."""
    errors = []
    for where, pod in pod_templates(manifest):
        for field in ("initContainers", "containers", "ephemeralContainers"):
            for index, container in enumerate(pod["spec"].get(field, [])):
                if not container.get("image"):
                    errors.append(f"{where}: spec.{field}[{index}].image: Required value")
    return errors


KNATIVE_POD_SPEC_FIELDS = ("containerConcurrency", "timeoutSeconds", "responseStartTimeoutSeconds")
"""Fields a Knative revision template adds to the pod spec."""


def pod_templates(manifest: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each pod a manifest describes, as a v1 Pod, with where it sits."""
    kind, spec = manifest["kind"], manifest.get("spec", {})
    if kind == "Pod":
        yield "Pod", manifest
        return
    templates: list[tuple[str, dict[str, Any]]] = []
    if kind in TEMPLATE_KINDS:
        templates.append(("spec.template", spec["template"]))
    elif manifest["apiVersion"] == "serving.knative.dev/v1":
        template = copy.deepcopy(spec["template"])
        for field in KNATIVE_POD_SPEC_FIELDS:
            template["spec"].pop(field, None)
        templates.append(("spec.template", template))
    else:
        for field, replicas in spec.items():
            if field.endswith("ReplicaSpecs"):
                for replica_type, replica in replicas.items():
                    templates.append((f"spec.{field}.{replica_type}.template", replica["template"]))
    for where, template in templates:
        yield where, {"apiVersion": "v1", "kind": "Pod", "metadata": {}, **template}


CORE_API_VERSIONS = frozenset({"v1", "batch/v1", "apps/v1"})
TEMPLATE_KINDS = frozenset({"Job", "DaemonSet", "Deployment", "StatefulSet", "ReplicaSet"})
"""Built-in kinds whose pod template is ``spec.template``."""


def manifest_errors(manifest: dict[str, Any]) -> list[str]:
    """Everything the API server (and a CRD's schema) would refuse in ``manifest``."""
    if manifest["apiVersion"] in CORE_API_VERSIONS:
        errors = schema_errors(manifest, NATIVE_SIDECARS_SINCE)
    else:
        errors = crd_schema_errors(manifest)
    for where, pod in pod_templates(manifest):
        pod_errors = api_server_errors(pod)
        if manifest["kind"] != "Pod":
            pod_errors += schema_errors(pod, NATIVE_SIDECARS_SINCE)
        errors += [f"{where}: {error}" for error in pod_errors]
    return errors


def assert_valid_manifests(manifests: Iterable[dict[str, Any]]) -> None:
    """Fail unless every manifest would be accepted, naming each problem."""
    errors = [
        f"{manifest['kind']} {manifest['metadata'].get('name')}: {error}"
        for manifest in manifests
        for error in manifest_errors(manifest)
    ]
    assert not errors, "\n".join(errors)


def assert_accepted_as_printed(manifests: Iterable[dict[str, Any]]) -> None:
    """Fail unless a real API server would create every manifest exactly as given: the schemas
    of every Kubernetes version checked, the cross-field rules, and the required values."""
    errors = [
        f"{manifest['kind']} {manifest['metadata'].get('name')}: {error}"
        for manifest in manifests
        for error in (
            (schema_errors(manifest) if manifest["apiVersion"] in CORE_API_VERSIONS else [])
            + manifest_errors(manifest)
            + required_value_errors(manifest)
        )
    ]
    assert not errors, "\n".join(errors)
