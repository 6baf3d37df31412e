"""Custom resources as an API server serves them, asserted against the emulator and, marked
``cluster``, a real one: a CRD created through the API serves its kind (discovery included), its
objects are pruned, defaulted and validated by the schema with the server's 422, the status
subresource keeps only ``status``, server-side apply creates then merges, ``dryRun=All`` stores
nothing, and a CRD deleted takes its kind and objects with it.

Each test defines its own CRD, of a group unique to the run (``<random>.test.podwright.dev``),
deleted afterwards, also on failure (``installed_crd``).
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from podwright.adapters.kubernetes.resources import RESOURCES, RestResource
from podwright.engine.kubernetes_port import (
    ConflictError,
    InvalidError,
    NotFoundError,
    ObjectRef,
    PatchType,
)
from tests.k8s_emulator import Fault
from tests.kube.support import (
    CRD_PATH,
    ApiServer,
    established_crd,
    eventually,
    installed_crd,
)

WIDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                "port": {"x-kubernetes-int-or-string": True},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


@dataclass
class Widgets:
    """The test's custom kind: ``Widget`` in a group of its own, served by ``api``."""

    api: ApiServer
    group: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/v1"

    @property
    def collection(self) -> str:
        return f"/apis/{self.api_version}/namespaces/{self.api.namespace}/widgets"

    def ref(self, name: str) -> ObjectRef:
        return ObjectRef(self.api_version, "Widget", self.api.namespace, name)

    def body(self, name: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": "Widget",
            "metadata": {"name": name, "namespace": self.api.namespace, "labels": {"app": "w"}},
            "spec": spec,
        }


def widget_crd(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": WIDGET_SCHEMA},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def _new_widgets(api: ApiServer, monkeypatch: pytest.MonkeyPatch) -> Widgets:
    """The Widget kind of a group of its own, podwright's client told of it."""
    kind = Widgets(api, f"w{uuid.uuid4().hex[:8]}.test.podwright.dev")
    resource = RestResource(kind.api_version, "Widget", "widgets")
    monkeypatch.setitem(RESOURCES, (resource.api_version, resource.kind), resource)
    return kind


def _first_list(widgets: Widgets) -> list[dict[str, Any]]:
    """The first LIST of a fresh CRD's kind through podwright's client. Established, the kind
    is served, but its handler may still be installing (a 404 for a moment: tried again), and
    its watch cache still starting: a 429 ``storage is (re)initializing`` with Retry-After, which
    the client retries (tests/kube/test_throttled_requests.py)."""
    api = widgets.api
    items, _version = eventually(
        lambda: api.client.list_objects(widgets.api_version, "Widget", namespace=api.namespace)
    )
    return items


@pytest.fixture
def widgets(api: ApiServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Widgets]:
    """The Widget CRD installed (podwright's client told of its kind), deleted afterwards."""
    kind = _new_widgets(api, monkeypatch)
    with installed_crd(api, widget_crd(kind.group)):
        _first_list(kind)
        yield kind


def test_the_first_list_of_a_fresh_crd_waits_out_storage_initializing(
    api: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after a CRD is Established, a real server answered its first LIST ``429 storage is
    (re)initializing`` with ``Retry-After``: the new kind's watch cache was still starting
    (``Cacher``, k8s.io/apiserver/pkg/storage/cacher/cacher.go; the wait from
    ``calculateRetryAfterForUnreadyCache``, at least 1 s). Whether or not a server answers so,
    the first list through podwright's client gets the kind's objects. The emulator has no watch
    cache: its first answer is injected."""
    widgets = _new_widgets(api, monkeypatch)
    fault = None
    if api.emulator is not None:
        fault = api.emulator.inject(
            Fault(
                429,
                method="GET",
                path=f"{widgets.collection}$",
                retry_after=1,
                message="storage is (re)initializing",
            )
        )
    with installed_crd(api, widget_crd(widgets.group)):
        assert _first_list(widgets) == []
    assert fault is None or fault.times == 0


def test_a_new_crd_has_null_conditions_until_its_controllers_establish_it(api: ApiServer) -> None:
    """A CRD's create answers with the status the create writes, before any controller
    (``strategy.PrepareForCreate`` in apiextensions ``pkg/registry/customresourcedefinition/
    strategy.go``): its storage version in ``storedVersions``, and, since neither field has
    ``omitempty`` (``CustomResourceDefinitionStatus`` in ``pkg/apis/apiextensions/v1/
    types.go``), ``conditions`` null and ``acceptedNames`` with an empty plural and kind. The
    naming and establishing controllers write the names and the conditions afterwards."""
    group = f"w{uuid.uuid4().hex[:8]}.test.podwright.dev"
    name = f"widgets.{group}"
    code, created = api.request("POST", CRD_PATH, widget_crd(group))
    try:
        assert code == 201, created
        status = created["status"]
        assert "conditions" in status
        assert status["conditions"] is None
        assert status["acceptedNames"] == {"plural": "", "kind": ""}
        assert status["storedVersions"] == ["v1"]
        established = eventually(lambda: established_crd(api, name))
        assert established["status"]["acceptedNames"]["kind"] == "Widget"
        assert established["status"]["storedVersions"] == ["v1"]
    finally:
        api.request("DELETE", f"{CRD_PATH}/{name}")


def test_a_crd_is_established_and_its_kind_served_and_discoverable(
    api: ApiServer, widgets: Widgets
) -> None:
    """The naming and establishing controllers (apiextensions pkg/controller/status and
    pkg/controller/establish) set ``acceptedNames`` and the ``NamesAccepted`` and
    ``Established`` conditions; discovery lists the kind and its status subresource
    (``/apis/<group>/<version>``, an APIResourceList)."""
    _code, crd = api.request(
        "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{widgets.group}"
    )
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["NamesAccepted"] == conditions["Established"] == "True"
    assert crd["status"]["acceptedNames"]["kind"] == "Widget"
    code, listing = api.request("GET", f"/apis/{widgets.api_version}")
    assert code == 200
    assert listing["kind"] == "APIResourceList"
    assert listing["groupVersion"] == widgets.api_version
    by_name = {entry["name"]: entry for entry in listing["resources"]}
    assert by_name["widgets"]["kind"] == "Widget"
    assert by_name["widgets"]["namespaced"] is True
    assert by_name["widgets"]["singularName"] == "widget"
    assert {"create", "get", "list", "watch", "patch", "update", "delete"} <= set(
        by_name["widgets"]["verbs"]
    )
    assert by_name["widgets/status"]["kind"] == "Widget"
    _code, groups = api.request("GET", "/apis")
    assert widgets.group in {group["name"] for group in groups["groups"]}


def test_custom_objects_are_created_read_listed_and_watched(
    api: ApiServer, widgets: Widgets
) -> None:
    _items, version = api.client.list_objects(
        widgets.api_version, "Widget", namespace=api.namespace, label_selector="app=w"
    )
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def watch() -> None:
        for event in api.client.watch(
            widgets.api_version,
            "Widget",
            resource_version=version,
            namespace=api.namespace,
            label_selector="app=w",
            timeout_seconds=15,
        ):
            if event["type"] != "BOOKMARK":
                seen.append((event["type"], event["object"]["metadata"]["name"]))
            if len(seen) == 2:
                done.set()
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    created = api.client.create(widgets.body("a", size=2))
    assert created["metadata"]["generation"] == 1
    assert api.client.get(widgets.ref("a"))["spec"]["size"] == 2
    items, _ = api.client.list_objects(
        widgets.api_version, "Widget", namespace=api.namespace, label_selector="app=w"
    )
    assert [item["metadata"]["name"] for item in items] == ["a"]
    api.client.delete(widgets.ref("a"))
    assert done.wait(20), seen
    assert seen == [("ADDED", "a"), ("DELETED", "a")]
    thread.join(5)


def test_schema_errors_are_one_422_naming_every_field(api: ApiServer, widgets: Widgets) -> None:
    """Every error of the schema at once (apiextensions ``kubeOpenAPIResultToFieldErrors`` in
    pkg/apiserver/validation/validation.go, kube-openapi's messages in
    pkg/validation/errors/schema.go): a wrong type is ``FieldValueTypeInvalid`` naming the JSON
    type found, a missing required field ``FieldValueRequired``, a value outside the enum
    ``FieldValueNotSupported``; the message is ``<Kind>.<group> "<name>" is invalid: [...]``
    (apimachinery ``errors.NewInvalid``). The order of several errors is not asserted: the
    validator walks the schema's properties as a Go map."""
    body = widgets.body("bad", color="green", port=True)
    with pytest.raises(InvalidError) as caught:
        api.client.create(body)
    error = caught.value
    assert error.status == 422
    expected = {
        ("FieldValueRequired", "spec.size", "Required value"),
        (
            "FieldValueNotSupported",
            "spec.color",
            'Unsupported value: "green": supported values: "red", "blue"',
        ),
        (
            "FieldValueTypeInvalid",
            "spec.port",
            'Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"',
        ),
    }
    causes = {(c["reason"], c["field"], c["message"]) for c in error.details["causes"]}
    assert causes == expected
    assert error.message.startswith(f'Widget.{widgets.group} "bad" is invalid: [')
    for _reason, field, message in expected:
        assert f"{field}: {message}" in error.message
    with pytest.raises(InvalidError) as one:
        api.client.create(widgets.body("small", size=0))
    assert one.value.message == (
        f'Widget.{widgets.group} "small" is invalid: spec.size: Invalid value: 0: spec.size in '
        "body should be greater than or equal to 1"
    )


def test_defaults_are_applied_and_unknown_fields_pruned(api: ApiServer, widgets: Widgets) -> None:
    """Structural schemas: a field the schema does not name is dropped silently (pruning), except
    under ``x-kubernetes-preserve-unknown-fields``; an absent field with a ``default`` gets it
    (apiextensions pkg/apiserver/schema/pruning and schema/defaulting)."""
    body = widgets.body("w", size=1, port="http", extra={"anything": {"goes": 1}})
    body["spec"]["unknown"] = "dropped"
    body["unknownTopLevel"] = "dropped"
    created = api.client.create(body)
    assert created["spec"] == {
        "size": 1,
        "color": "red",
        "port": "http",
        "extra": {"anything": {"goes": 1}},
    }
    assert "unknownTopLevel" not in created
    assert api.client.get(widgets.ref("w"))["spec"] == created["spec"]


def test_a_custom_objects_status_is_written_through_status_only(
    api: ApiServer, widgets: Widgets
) -> None:
    """With the status subresource, a create drops ``status`` and a write to the main resource
    keeps the old one (customResourceStrategy in apiextensions pkg/registry/customresource/
    strategy.go); a write to ``/status`` keeps only ``status``: labels and spec changes are
    ignored (statusStrategy.PrepareForUpdate in status_strategy.go), unlike a pod's."""
    body = widgets.body("s", size=1)
    body["status"] = {"phase": "Given"}
    created = api.client.create(body)
    assert "status" not in created
    ref = widgets.ref("s")
    api.client.patch(ref, {"status": {"phase": "Main"}}, PatchType.MERGE)
    assert "status" not in api.client.get(ref)
    api.client.patch_status(
        ref,
        {
            "metadata": {"labels": {"ignored": "yes"}},
            "spec": {"size": 9},
            "status": {"phase": "Ok"},
        },
        PatchType.MERGE,
    )
    current = api.client.get(ref)
    assert current["status"] == {"phase": "Ok"}
    assert "ignored" not in current["metadata"]["labels"]
    assert current["spec"]["size"] == 1
    assert current["metadata"]["generation"] == 1


def test_a_status_update_keeps_the_objects_metadata_and_its_managed_fields(
    api: ApiServer, widgets: Widgets
) -> None:
    """A ``PUT`` of ``/status`` (client-go's UpdateStatus) from a copy of the object without
    ``metadata.managedFields`` and without an annotation changes the status only, and is refused
    (409) on a stale resourceVersion: the status strategy resets everything but ``status`` to the
    stored object (statusStrategy.PrepareForUpdate), and a request with no managedFields leaves
    them as they were (apimachinery's fieldmanager: "if the object has no managed fields, they
    are kept from the live object"). The operator's task store relies on all three."""
    path = f"{widgets.collection}/kept"
    apply = {"content_type": "application/apply-patch+yaml", "query": {"fieldManager": "tests"}}
    body = widgets.body("kept", size=1)
    body["metadata"]["annotations"] = {"big": "kept"}
    code, applied = api.request("PATCH", path, body, **apply)
    assert code == 201, applied
    trimmed = {
        **applied,
        "metadata": {
            key: value
            for key, value in applied["metadata"].items()
            if key not in ("managedFields", "annotations")
        },
        "status": {"phase": "Ok"},
    }
    updated = api.client.replace_status(widgets.ref("kept"), trimmed)
    assert updated["status"] == {"phase": "Ok"}
    assert updated["metadata"]["annotations"] == {"big": "kept"}
    managers = {(f["manager"], f["operation"]) for f in updated["metadata"]["managedFields"]}
    assert ("tests", "Apply") in managers
    with pytest.raises(ConflictError):
        api.client.replace_status(widgets.ref("kept"), {**trimmed, "status": {"phase": "Late"}})


def test_server_side_apply_creates_then_merges(api: ApiServer, widgets: Widgets) -> None:
    """``PATCH`` with ``application/apply-patch+yaml`` and a ``fieldManager`` creates the object
    when it is absent (201), then applies over it (200), recording the manager in
    ``metadata.managedFields`` (Server-Side Apply, kubernetes.io/docs/reference/using-api/
    server-side-apply)."""
    path = f"{widgets.collection}/applied"
    apply = {"content_type": "application/apply-patch+yaml", "query": {"fieldManager": "tests"}}
    code, created = api.request("PATCH", path, widgets.body("applied", size=1), **apply)
    assert code == 201, created
    assert created["spec"] == {"size": 1, "color": "red"}
    code, updated = api.request("PATCH", path, widgets.body("applied", size=3), **apply)
    assert code == 200, updated
    assert updated["spec"]["size"] == 3
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    managers = {(f["manager"], f["operation"]) for f in updated["metadata"]["managedFields"]}
    assert ("tests", "Apply") in managers


def test_dry_run_answers_as_a_write_and_stores_nothing(api: ApiServer, widgets: Widgets) -> None:
    """``dryRun=All`` runs the request to the end (defaults, validation) and answers as the
    write would, but stores nothing (apiserver pkg/registry/generic/registry/dryrun.go)."""
    dry = {"query": {"dryRun": "All"}}
    code, answer = api.request("POST", widgets.collection, widgets.body("dry", size=1), **dry)
    assert code == 201, answer
    assert answer["spec"]["color"] == "red"
    with pytest.raises(NotFoundError):
        api.client.get(widgets.ref("dry"))
    code, refused = api.request("POST", widgets.collection, widgets.body("dry"), **dry)
    assert code == 422
    assert refused["details"]["causes"][0]["field"] == "spec.size"
    stored = api.client.create(widgets.body("kept", size=1))
    path = f"{widgets.collection}/kept"
    code, patched = api.request(
        "PATCH",
        path,
        {"spec": {"size": 5}},
        content_type="application/merge-patch+json",
        **dry,
    )
    assert (code, patched["spec"]["size"]) == (200, 5)
    code, _deleted = api.request("DELETE", path, **dry)
    assert code == 200
    after = api.client.get(widgets.ref("kept"))
    assert after["spec"]["size"] == 1
    assert after["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


def test_a_deleted_crd_takes_its_kind_and_objects_with_it(api: ApiServer) -> None:
    """Deleting a CRD deletes its objects (the customresourcecleanup finalizer,
    apiextensions pkg/controller/finalizer/crd_finalizer.go), then the kind is no longer served:
    404, as for any kind the server does not know."""
    group = f"w{uuid.uuid4().hex[:8]}.test.podwright.dev"
    widgets = Widgets(api, group)
    with installed_crd(api, widget_crd(group)):
        code, _answer = eventually(
            lambda: _answered(
                201, api.request("POST", widgets.collection, widgets.body("w", size=1))
            )
        )
        assert code == 201
    eventually(lambda: api.request("GET", widgets.collection)[0] == 404, timeout=60)
    code, _answer = api.request("POST", widgets.collection, widgets.body("w", size=1))
    assert code == 404
    with installed_crd(api, widget_crd(group)):  # the same kind again: its objects are gone
        code, listed = eventually(lambda: _answered(200, api.request("GET", widgets.collection)))
        assert listed["items"] == []


def _untyped_field(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with a field of no type under ``spec``: not a structural schema."""
    changed = copy.deepcopy(schema)
    changed["properties"]["spec"]["properties"]["label"] = {"description": "a field of no type"}
    return changed


def _with_second_version(crd: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``crd`` serving ``v2`` too (not stored), with ``schema``."""
    second = {**crd["spec"]["versions"][0], "name": "v2", "storage": False}
    second["schema"] = {"openAPIV3Schema": schema}
    crd["spec"]["versions"].append(second)
    return crd


UNTYPED = "properties[spec].properties[label].type"


@pytest.mark.parametrize(
    ("versions", "path"),
    [
        pytest.param("one", f"spec.validation.openAPIV3Schema.{UNTYPED}", id="one-version"),
        pytest.param(
            "sharing", f"spec.validation.openAPIV3Schema.{UNTYPED}", id="versions-sharing-it"
        ),
        pytest.param(
            "differing",
            f"spec.versions[1].schema.openAPIV3Schema.{UNTYPED}",
            id="versions-differing",
        ),
    ],
)
def test_a_crd_whose_schema_is_not_structural_is_refused(
    api: ApiServer, versions: str, path: str
) -> None:
    """``apiextensions.k8s.io/v1`` takes only structural schemas (the "Specifying a structural
    schema" section of kubernetes.io's CustomResourceDefinition task page): a field without a
    type is refused with a 422 naming it (``validateStructuralInvariants`` in apiextensions-apiserver
    ``pkg/apiserver/schema/validation.go``), and no CRD is created. The server validates the
    CRD's internal form, where a schema all versions share is ``spec.validation``
    (``Convert_v1_CustomResourceDefinitionSpec_To_apiextensions_CustomResourceDefinitionSpec`` in
    ``pkg/apis/apiextensions/v1/conversion.go``), so the error names it there, once; a schema of
    one version among different ones is named at that version."""
    group = f"w{uuid.uuid4().hex[:8]}.test.podwright.dev"
    crd = widget_crd(group)
    untyped = _untyped_field(WIDGET_SCHEMA)
    if versions == "differing":
        crd = _with_second_version(crd, untyped)
    else:
        crd["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": untyped}
        if versions == "sharing":
            crd = _with_second_version(crd, untyped)
    code, answer = api.request("POST", CRD_PATH, crd)
    if code == 201:
        api.request("DELETE", f"{CRD_PATH}/widgets.{group}")
    assert (code, answer["reason"]) == (422, "Invalid"), answer
    assert answer["message"] == (
        f'CustomResourceDefinition.apiextensions.k8s.io "widgets.{group}" is invalid: '
        f"{path}: Required value: must not be empty for specified object fields"
    )
    assert api.request("GET", f"{CRD_PATH}/widgets.{group}")[0] == 404


def _answered(code: int, answer: tuple[int, Any]) -> tuple[int, Any] | None:
    """``answer`` once its status is ``code`` (for ``eventually``)."""
    return answer if answer[0] == code else None
