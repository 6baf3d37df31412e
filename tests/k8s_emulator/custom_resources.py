"""CustomResourceDefinitions, and the update strategies that differ between kinds.

A CRD created through the API makes its kind served (``CustomResourceRegistry``): each served
version, its scope, and its status subresource when ``subresources.status`` is given. Its create
answers with the status the create writes (``created_definition_status``): ``conditions`` JSON
null, ``acceptedNames`` empty; then comes what the apiextensions controllers write
(``pkg/controller/status/naming_controller.go`` and ``pkg/controller/establish/
establishing_controller.go``): ``acceptedNames`` and the conditions ``NamesAccepted`` and
``Established``, as a change of its own, at once here (a real server writes them a moment later:
readers take null conditions as none, and tests wait for Established). Deleting a CRD stops serving it and deletes its objects (the
``customresourcecleanup`` finalizer's work in ``pkg/controller/finalizer/crd_finalizer.go``, done at
once). Not modelled: name conflicts between CRDs, conversion webhooks, the CRD's own validation
beyond the essentials and structural schemas (``check_definition``).

Writes follow each kind's strategy:

* a custom object (apiextensions ``pkg/registry/customresource/strategy.go``): on create, its
  ``status`` is dropped when the status subresource is on; on update through the main resource,
  ``status`` keeps its old value; any change outside ``metadata`` (and ``status``) bumps
  ``metadata.generation``; the result is pruned, defaulted and validated by the version's schema
  (``openapi_schema``);
* a custom object's ``/status`` (``status_strategy.go``, ``statusStrategy.PrepareForUpdate``): the
  old object with the new ``status`` (and ``managedFields``): every other change, metadata
  included, is ignored;
* a pod's ``/status`` (``podStatusStrategy.PrepareForUpdate`` in
  ``pkg/registry/core/pod/strategy.go``): the spec and the ownerReferences keep their old values,
  other metadata changes (labels, annotations — kubelets write them) are kept, and an empty
  ``status.qosClass`` keeps the old one;
* another built-in kind's ``/status`` (``jobStatusStrategy`` in ``pkg/registry/batch/job/
  strategy.go``, ``serviceStatusStrategy`` in ``pkg/registry/core/service/strategy.go``,
  ``persistentvolumeclaimStatusStrategy`` in ``pkg/registry/core/persistentvolumeclaim/
  strategy.go``): the spec keeps its old value, metadata changes are kept.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.json_values import json_copy
from tests.k8s_emulator.openapi_schema import (
    FieldError,
    apply_defaults,
    prune,
    structural_errors,
    validate,
)
from tests.k8s_emulator.resource_types import ResourceType

Obj = dict[str, Any]

CRD = ResourceType(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
    singular="customresourcedefinition",
    short_names=("crd", "crds"),
    categories=("api-extensions",),
)


@dataclass(frozen=True)
class ServedVersion:
    """One served version of a custom resource, and the schema its objects are held to."""

    resource: ResourceType
    schema: dict[str, Any]
    printer_columns: tuple[dict[str, Any], ...] = ()
    """The version's ``additionalPrinterColumns`` (``kubectl get``'s columns: ``tables.py``)."""


def invalid(resource: ResourceType, name: str, errors: list[FieldError]) -> ApiError:
    """The 422 the API server answers for field errors (``errors.NewInvalid`` in apimachinery
    ``pkg/api/errors/errors.go``): one error is the message's tail, several a bracketed list
    (``utilerrors.NewAggregate``, repeated messages once), each also a ``details.causes`` entry."""
    messages = list(dict.fromkeys(str(error) for error in errors))
    listed = messages[0] if len(messages) == 1 else f"[{', '.join(messages)}]"
    return ApiError(
        422,
        "Invalid",
        f'{resource.group_kind} "{name}" is invalid: {listed}',
        details={
            "name": name,
            "group": resource.group,
            "kind": resource.kind,
            "causes": [error.cause() for error in errors],
        },
    )


def check_definition(crd: Obj) -> None:
    """The essentials of a CRD's validation (``ValidateCustomResourceDefinition`` in
    apiextensions ``pkg/apis/apiextensions/validation/validation.go``): its name is
    ``<plural>.<group>``, exactly one version is the storage version, and every version has a
    structural schema (required in ``apiextensions.k8s.io/v1``).

    The server validates the CRD's internal form, which holds a schema that every version shares
    once, as ``spec.validation`` (``Convert_v1_CustomResourceDefinitionSpec_To_apiextensions_
    CustomResourceDefinitionSpec`` in ``pkg/apis/apiextensions/v1/conversion.go``): a schema is
    checked at ``spec.validation.openAPIV3Schema`` when all versions have the same one (a CRD of
    one version always), else at each version's ``spec.versions[i].schema.openAPIV3Schema``
    (``validateCustomResourceDefinitionSpec`` and ``validateCustomResourceDefinitionVersion``).
    A schema missing is named at its version either way."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    name = crd["metadata"]["name"]
    errors = []
    wanted = f"{names.get('plural', '')}.{spec.get('group', '')}"
    if name != wanted:
        errors.append(
            FieldError(
                "FieldValueInvalid",
                "metadata.name",
                f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
            )
        )
    versions = spec.get("versions") or []
    if sum(1 for version in versions if version.get("storage")) != 1:
        errors.append(
            FieldError(
                "FieldValueInvalid",
                "spec.versions",
                f"Invalid value: {versions!r}: must have exactly one version marked as storage "
                "version",
            )
        )
    schemas = [(version.get("schema") or {}).get("openAPIV3Schema") for version in versions]
    for index, schema in enumerate(schemas):
        if not schema:
            errors.append(
                FieldError(
                    "FieldValueRequired",
                    f"spec.versions[{index}].schema.openAPIV3Schema",
                    "Required value: schemas are required",
                )
            )
    shared = [version.get("schema") for version in versions]
    if shared and all(schema == shared[0] for schema in shared):
        if schemas[0]:
            errors.extend(structural_errors(schemas[0], "spec.validation.openAPIV3Schema"))
    else:
        for index, schema in enumerate(schemas):
            if schema:
                path = f"spec.versions[{index}].schema.openAPIV3Schema"
                errors.extend(structural_errors(schema, path))
    if errors:
        raise invalid(CRD, name, errors)


def defaulted_definition(crd: Obj) -> Obj:
    """The CRD with the defaults ``apiextensions.k8s.io/v1`` sets (``SetDefaults_*`` in
    ``pkg/apis/apiextensions/v1/defaults.go``): the singular name and the list kind, and the
    ``None`` conversion."""
    crd = copy.deepcopy(crd)
    spec = crd.setdefault("spec", {})
    names = spec.setdefault("names", {})
    if names.get("kind"):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", f"{names['kind']}List")
    spec.setdefault("conversion", {"strategy": "None"})
    return crd


def created_definition_status(crd: Obj) -> Obj:
    """A new CRD's status as its create writes it, before any controller: emptied but for its
    storage version in ``storedVersions`` (``strategy.PrepareForCreate`` in apiextensions
    ``pkg/registry/customresourcedefinition/strategy.go``). Encoded, ``conditions`` is null and
    ``acceptedNames`` holds an empty ``plural`` and ``kind``: those fields have no ``omitempty``
    (``CustomResourceDefinitionStatus`` and ``CustomResourceDefinitionNames`` in
    ``pkg/apis/apiextensions/v1/types.go``)."""
    storage = [version["name"] for version in crd["spec"]["versions"] if version.get("storage")]
    return {
        "conditions": None,
        "acceptedNames": {"plural": "", "kind": ""},
        "storedVersions": storage[:1],
    }


def definition_status(crd: Obj, now: str, previous: Obj | None) -> Obj:
    """What the naming and establishing controllers write into a CRD's status."""
    spec = crd["spec"]
    accepted = {
        key: value
        for key, value in spec["names"].items()
        if key in ("plural", "singular", "shortNames", "kind", "listKind", "categories")
    }
    before = {
        condition["type"]: condition
        for condition in ((previous or {}).get("status") or {}).get("conditions") or []
    }

    def condition(kind: str, reason: str, message: str) -> Obj:
        since = before.get(kind, {}).get("lastTransitionTime", now)
        return {
            "type": kind,
            "status": "True",
            "lastTransitionTime": since,
            "reason": reason,
            "message": message,
        }

    storage = [version["name"] for version in spec["versions"] if version.get("storage")]
    stored = ((previous or {}).get("status") or {}).get("storedVersions") or []
    return {
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition(
                "Established", "InitialNamesAccepted", "the initial names have been accepted"
            ),
        ],
        "acceptedNames": accepted,
        "storedVersions": list(dict.fromkeys([*stored, *storage])),
    }


class CustomResourceRegistry:
    """The custom resources a store serves, by group, version and plural.

    A change builds a new map and puts it in place in one step, so a lookup (every request
    makes one) needs no lock and never sees a CRD's kind half replaced."""

    def __init__(self) -> None:
        self._served: dict[tuple[str, str, str], ServedVersion] = {}

    def serve(self, crd: Obj) -> None:
        """Serve the CRD's served versions (replacing what an older revision of it served)."""
        served = self._without(crd)
        spec = crd["spec"]
        names = spec["names"]
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            resource = ResourceType(
                spec["group"],
                version["name"],
                names["plural"],
                names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                status_subresource="status" in (version.get("subresources") or {}),
                singular=names.get("singular", names["kind"].lower()),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                custom=True,
            )
            schema = version["schema"]["openAPIV3Schema"]
            served[(resource.group, resource.version, resource.plural)] = ServedVersion(
                resource, schema, tuple(version.get("additionalPrinterColumns") or ())
            )
        self._served = served

    def stop(self, crd: Obj) -> ResourceType | None:
        """Stop serving the CRD's kind; the resource whose objects are to go, if it was served."""
        served = self._without(crd)
        gone = [version.resource for key, version in self._served.items() if key not in served]
        self._served = served
        return gone[0] if gone else None

    def _without(self, crd: Obj) -> dict[tuple[str, str, str], ServedVersion]:
        """What is served but the CRD's kind."""
        spec = crd.get("spec") or {}
        group, plural = spec.get("group"), (spec.get("names") or {}).get("plural")
        return {
            key: version
            for key, version in self._served.items()
            if not (key[0] == group and key[2] == plural)
        }

    def lookup(self, group: str, version: str, plural: str) -> ServedVersion | None:
        return self._served.get((group, version, plural))

    def __iter__(self) -> Iterator[ServedVersion]:
        return iter(list(self._served.values()))


def shape_custom_object(served: ServedVersion, obj: Obj) -> Obj:
    """``obj`` pruned and defaulted by its version's schema, as the API server shapes it again
    after mutating admission (decoding a request did so first: ``field_validation.decoded``
    prunes, ``ApiStore._decoded`` defaults)."""
    shaped: Obj = apply_defaults(prune(obj, served.schema), served.schema)
    return shaped


def admit_custom_object(served: ServedVersion, obj: Obj) -> Obj:
    """``obj`` pruned and defaulted by its version's schema, or a 422 naming every field error."""
    shaped = shape_custom_object(served, obj)
    errors = validate(shaped, served.schema)
    if errors:
        raise invalid(served.resource, obj["metadata"].get("name", ""), errors)
    return shaped


def status_update(resource: ResourceType, current: Obj, given: Obj) -> Obj:
    """What a write to ``/status`` keeps of ``given``, by kind (see the module's docstring)."""
    if resource.custom:
        # ``current`` is the stored object, never changed in place, and ``given`` the request's
        # own: the result shares their parts; only its metadata, which the store then writes,
        # is new.
        updated = dict(current)
        updated["metadata"] = dict(current["metadata"])
        managed = (given.get("metadata") or {}).get("managedFields")
        if managed is not None:
            updated["metadata"]["managedFields"] = managed
        if "status" in given:
            updated["status"] = given["status"]
        else:
            updated.pop("status", None)
        return updated
    updated = json_copy(given)
    _keep(updated, current, "spec")
    if resource.kind == "Pod" and resource.group == "":
        _keep(updated.setdefault("metadata", {}), current["metadata"], "ownerReferences")
        status = updated.setdefault("status", {})
        if not status.get("qosClass") and (current.get("status") or {}).get("qosClass"):
            status["qosClass"] = current["status"]["qosClass"]
    return updated


def main_update_keeps_status(resource: ResourceType, current: Obj, updated: Obj) -> None:
    """A write to the main resource of a kind with a status subresource leaves ``status`` as it
    was (absent stays absent for a custom object)."""
    if resource.custom:
        _keep(updated, current, "status")
    else:
        updated["status"] = json_copy(current.get("status", {}))


def generation_changes(resource: ResourceType, current: Obj, updated: Obj) -> bool:
    """Whether an update bumps ``metadata.generation``: for a custom object any change outside
    ``metadata``; for a built-in kind (pods aside) a change of its spec."""
    if resource.custom:
        return _outside_metadata(current) != _outside_metadata(updated)
    return resource.kind != "Pod" and updated.get("spec") != current.get("spec")


def _outside_metadata(obj: Obj) -> Obj:
    return {key: value for key, value in obj.items() if key != "metadata"}


def _keep(target: Obj, source: Obj, key: str) -> None:
    if key in source:
        target[key] = json_copy(source[key])
    else:
        target.pop(key, None)
