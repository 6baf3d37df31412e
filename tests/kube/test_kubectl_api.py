"""What kubectl reads from an API server, asserted on the requests themselves against the emulator
and, marked ``cluster``, a real API server: discovery with short names and categories, the OpenAPI
documents that tell kubectl a kind supports server-side field validation, the ``fieldValidation``
parameter itself, and server-side printing (Tables). ``test_kubectl.py`` drives the same through
the kubectl binary.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from tests.kube.gadgets import PRINTER_COLUMNS, gadget_crd, installed_gadgets
from tests.kube.support import ApiServer, config_map, eventually, installed_crd

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
AGE = re.compile(r"^\d+[smhdy]$")
"""An age as the server renders it for a fresh object (``duration.ShortHumanDuration``, or
``HumanDuration``, which agree below two minutes)."""


def by_name(resources: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in resources}


def test_discovery_names_short_names_verbs_and_categories(api: ApiServer) -> None:
    """``kubectl get cm`` and ``kubectl get <category>`` resolve names through the legacy
    discovery documents (``APIResourceList``: ``shortNames``, ``categories``, ``singularName``,
    ``verbs``; apimachinery ``pkg/apis/meta/v1/types.go``), which client-go reads when the
    server does not answer with the aggregated type (``downloadAPIs`` in client-go
    ``discovery/discovery_client.go`` switches on the answer's ``Content-Type``). A custom
    kind's come from its CRD's ``names``."""
    code, core = api.request("GET", "/api/v1")
    assert code == 200
    config_maps = by_name(core["resources"])["configmaps"]
    assert config_maps["shortNames"] == ["cm"]
    assert config_maps["singularName"] in ("configmap", "")  # empty before Kubernetes 1.27
    assert {"create", "delete", "get", "list", "patch", "update", "watch"} <= set(
        config_maps["verbs"]
    )
    assert "all" in by_name(core["resources"])["pods"]["categories"]
    with installed_gadgets(api) as gadgets:
        code, listing = api.request("GET", f"/apis/{gadgets.api_version}")
        assert code == 200
        entry = by_name(listing["resources"])["gadgets"]
        assert entry["shortNames"] == [gadgets.short_name]
        assert entry["categories"] == [gadgets.category]
        assert entry["singularName"] == "gadget"
        assert entry["kind"] == "Gadget"


def _parameters(operation: dict[str, Any], document: dict[str, Any]) -> set[str]:
    """The names of an operation's parameters, ``$ref``s resolved (Swagger 2.0 documents share
    some in ``parameters``)."""
    names = set()
    for listed in operation.get("parameters", []):
        reference = listed.get("$ref", "")
        shared = reference.startswith("#/parameters/")
        parameter = (
            document["parameters"][reference.removeprefix("#/parameters/")] if shared else listed
        )
        names.add(parameter.get("name"))
    return names


def _patch_operation(document: dict[str, Any], group: str, kind: str) -> dict[str, Any] | None:
    """The PATCH operation of ``kind`` (cli-runtime ``supportsQueryParam``: an operation whose
    ``x-kubernetes-group-version-kind`` names the kind)."""
    for path in document["paths"].values():
        patch = path.get("patch") or {}
        gvk = patch.get("x-kubernetes-group-version-kind") or {}
        if (gvk.get("group"), gvk.get("kind")) == (group, kind):
            return dict(patch)
    return None


def test_openapi_v3_tells_kubectl_which_kinds_validate_fields_on_the_server(
    api: ApiServer,
) -> None:
    """kubectl 1.29+ asks ``/openapi/v3`` for the kind's group version (``paths`` keyed
    ``api/v1`` or ``apis/<group>/<version>``, each with a ``serverRelativeURL``: client-go
    ``openapi3/root.go``), then looks there for the PATCH operation of the kind and a
    ``fieldValidation`` parameter among its own (cli-runtime ``pkg/resource/
    query_param_verifier_v3.go``); found, it leaves validation to the server. Built-in kinds
    accept strategic merge patches, custom resources do not (kubectl ``pkg/cmd/apply/
    patcher.go``, ``gvkSupportsPatchOpenAPIV3``)."""
    code, index = api.request("GET", "/openapi/v3")
    assert code == 200
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    path, _, query = url.partition("?")
    code, core = api.request("GET", path, query=dict([query.split("=", 1)]) if query else None)
    assert code == 200
    patch = _patch_operation(core, "", "ConfigMap")
    assert patch is not None
    assert "fieldValidation" in {parameter["name"] for parameter in patch["parameters"]}
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    with installed_gadgets(api) as gadgets:
        key = f"apis/{gadgets.api_version}"
        # A real server publishes a new CRD's document a moment after it is Established.
        paths = eventually(lambda: api.request("GET", "/openapi/v3")[1]["paths"].get(key))
        path, _, query = paths["serverRelativeURL"].partition("?")
        code, document = api.request("GET", path, query=dict([query.split("=", 1)]))
        assert code == 200
        custom = _patch_operation(document, gadgets.group, "Gadget")
        assert custom is not None
        assert "fieldValidation" in {parameter["name"] for parameter in custom["parameters"]}
        assert "application/merge-patch+json" in custom["requestBody"]["content"]
        assert "application/strategic-merge-patch+json" not in custom["requestBody"]["content"]


def test_openapi_v2_tells_older_kubectl_the_same(api: ApiServer) -> None:
    """kubectl 1.27 and 1.28 ask only ``/openapi/v2`` (protobuf; the same document in JSON is
    asserted here): the PATCH operation of the kind, and a ``fieldValidation`` query parameter,
    inline or by reference (cli-runtime ``pkg/resource/query_param_verifier.go``,
    ``supportsQueryParam``)."""
    code, document = api.request("GET", "/openapi/v2")
    assert code == 200
    assert document["swagger"] == "2.0"
    patch = _patch_operation(document, "", "ConfigMap")
    assert patch is not None
    assert "fieldValidation" in _parameters(patch, document)
    assert "application/strategic-merge-patch+json" in patch["consumes"]


@pytest.mark.parametrize(
    ("field_validation", "refused", "warned"),
    [
        pytest.param("Strict", True, False, id="strict-refuses"),
        pytest.param("Warn", False, True, id="warn-warns"),
        pytest.param(None, False, True, id="absent-warns"),
        pytest.param("Ignore", False, False, id="ignore-drops-silently"),
    ],
)
def test_field_validation_decides_what_an_unknown_field_costs(
    api: ApiServer, field_validation: str | None, refused: bool, warned: bool
) -> None:
    """An unknown field is dropped; ``fieldValidation`` (kubernetes.io "API concepts", "Field
    validation") decides the rest: Strict refuses the create with 400 and ``strict decoding
    error: unknown field "<path>"`` (apiserver ``handlers/rest.go``, ``transformDecodeError``:
    ``<Kind> in version "<v>" cannot be handled as a <Kind>: ...``), a patch with 422 and the
    same tail (``handlers/patch.go``); Warn, the default, sends ``Warning: 299 - "unknown field
    \\"<path>\\""``; Ignore says nothing. The paths are those of the upstream integration test
    (test/integration/apiserver/field_validation_test.go)."""
    query = {"fieldValidation": field_validation} if field_validation else {}
    with installed_gadgets(api) as gadgets:
        body = gadgets.body("g1", size=1)
        body["spec"]["foo"] = "bar"
        answer = api.send("POST", gadgets.collection, body, query=query)
        message = 'strict decoding error: unknown field "spec.foo"'
        if refused:
            assert answer.status == 400, answer.body
            assert answer.body["reason"] == "BadRequest"
            assert answer.body["message"].endswith(message)
            assert answer.body["message"].startswith('Gadget in version "v1" cannot be handled')
            body["spec"].pop("foo")
            assert api.send("POST", gadgets.collection, body).status == 201
        else:
            assert answer.status == 201, answer.body
            assert "foo" not in answer.body["spec"]
        assert ('299 - "unknown field \\"spec.foo\\""' in answer.warnings) == warned
        patched = api.send(
            "PATCH",
            f"{gadgets.collection}/g1",
            {"spec": {"bar": 1}},
            content_type="application/merge-patch+json",
            query=query,
        )
        if refused:
            assert patched.status == 422, patched.body
            assert patched.body["message"].endswith(
                'strict decoding error: unknown field "spec.bar"'
            )
        else:
            assert patched.status == 200, patched.body
            assert "bar" not in patched.body["spec"]
    cm = config_map("cm1", api.namespace)
    cm["metadata"]["unknownMeta"] = "x"
    answer = api.send("POST", f"/api/v1/namespaces/{api.namespace}/configmaps", cm, query=query)
    assert answer.status == (400 if refused else 201), answer.body
    if refused:
        assert answer.body["message"] == (
            'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding '
            'error: unknown field "metadata.unknownMeta"'
        )
    assert ('299 - "unknown field \\"metadata.unknownMeta\\""' in answer.warnings) == warned


def test_an_unknown_field_validation_is_refused_naming_the_allowed_ones(api: ApiServer) -> None:
    """``ValidateFieldValidation`` (apimachinery ``pkg/apis/meta/v1/validation``): a value
    outside ``"", Ignore, Strict, Warn`` is 422 Invalid."""
    answer = api.send(
        "POST",
        f"/api/v1/namespaces/{api.namespace}/configmaps",
        config_map("cm1", api.namespace),
        query={"fieldValidation": "Loose"},
    )
    assert answer.status == 422, answer.body
    assert 'fieldValidation: Unsupported value: "Loose"' in answer.body["message"]


def test_server_side_apply_refuses_a_field_the_schema_does_not_declare(api: ApiServer) -> None:
    """Server-side apply types the applied configuration whatever ``fieldValidation`` says:
    ``failed to create typed patch object (<ns>/<name>; /v1, Kind=ConfigMap): .foo: field not
    declared in schema`` (apiserver ``fieldmanager/internal/structuredmerge.go``;
    structured-merge-diff's validation)."""
    cm = config_map("applied", api.namespace)
    cm["foo"] = "bar"
    answer = api.send(
        "PATCH",
        f"/api/v1/namespaces/{api.namespace}/configmaps/applied",
        cm,
        content_type="application/apply-patch+yaml",
        query={"fieldManager": "tests", "fieldValidation": "Ignore"},
    )
    assert answer.status >= 400, answer.body
    assert answer.body["message"] == (
        f"failed to create typed patch object ({api.namespace}/applied; /v1, Kind=ConfigMap): "
        ".foo: field not declared in schema"
    )


def test_a_list_is_printed_as_a_table_of_the_crds_printer_columns(api: ApiServer) -> None:
    """``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` answers a ``meta.k8s.io/v1``
    Table: for a custom resource, ``Name`` then the version's ``additionalPrinterColumns``, each
    cell the first value its ``jsonPath`` finds, typed by the column, nothing found ``null``, and
    a ``date`` rendered as an age by the server (apiextensions ``tableconvertor.go``,
    ``cellForJSONValue``; apimachinery ``meta/table/table.go``). Rows carry the object's
    metadata as a ``PartialObjectMetadata`` unless ``includeObject`` asks otherwise (metav1
    ``TableOptions``)."""
    with installed_gadgets(api) as gadgets:
        created = api.send("POST", gadgets.collection, gadgets.body("g1", size=3, fragile=True))
        assert created.status == 201, created.body
        answer = api.send("GET", gadgets.collection, accept=TABLE)
        assert answer.status == 200, answer.body
        table = answer.body
        assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
        columns = [(c["name"], c["type"]) for c in table["columnDefinitions"]]
        assert columns == [("Name", "string")] + [(c["name"], c["type"]) for c in PRINTER_COLUMNS]
        assert table["columnDefinitions"][0]["format"] == "name"
        assert table["columnDefinitions"][2]["description"] == "Its color."
        [row] = table["rows"]
        name, size, color, fragile, phase, age = row["cells"]
        assert (name, size, color, fragile, phase) == ("g1", 3, "red", True, None)
        assert AGE.match(age), age
        assert row["object"]["kind"] == "PartialObjectMetadata"
        assert row["object"]["metadata"]["name"] == "g1"
        assert "spec" not in row["object"]
        whole = api.send(
            "GET",
            f"{gadgets.collection}/g1",
            accept=TABLE,
            query={"includeObject": "Object"},
        ).body
        assert [r["cells"][0] for r in whole["rows"]] == ["g1"]
        assert whole["rows"][0]["object"]["spec"]["size"] == 3


def test_a_printer_column_reads_an_annotation_whose_key_has_dots_and_a_slash(
    api: ApiServer,
) -> None:
    """A column's ``jsonPath`` escapes the dots of an annotation's key, and a ``/`` needs no
    escape (client-go's ``util/jsonpath/parser.go``: ``parseField`` reads a field up to an
    unescaped terminator, and drops the backslashes), as podwright's Workload CRD shows who
    submitted each Workload; an object without the annotation gets a null cell."""
    suffix = uuid.uuid4().hex[:8]
    group = f"o{suffix}.test.podwright.dev"
    crd = gadget_crd(group, f"go{suffix}")
    owner = {
        "name": "Owner",
        "type": "string",
        "jsonPath": r".metadata.annotations.test\.podwright\.dev/owner",
    }
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [owner]
    collection = f"/apis/{group}/v1/namespaces/{api.namespace}/gadgets"
    with installed_crd(api, crd):
        eventually(lambda: api.request("GET", collection)[0] == 200)
        for name, annotations in (("owned", {"test.podwright.dev/owner": "alice"}), ("other", {})):
            body = {
                "apiVersion": f"{group}/v1",
                "kind": "Gadget",
                "metadata": {"name": name, "annotations": annotations},
                "spec": {},
            }
            created = api.send("POST", collection, body)
            assert created.status == 201, created.body
        table = api.send("GET", collection, accept=TABLE).body
    assert [column["name"] for column in table["columnDefinitions"]] == ["Name", "Owner"]
    assert sorted(row["cells"] for row in table["rows"]) == [["other", None], ["owned", "alice"]]


def test_a_built_in_kind_is_printed_with_its_name_first(api: ApiServer) -> None:
    """Built-in kinds are printed by kube-apiserver's printers (``pkg/printers/internalversion/
    printers.go``): the first column is ``Name`` (format ``name``); a ConfigMap's ``Data`` counts
    its keys."""
    api.client.create(config_map("cm1", api.namespace, test="table"))
    answer = api.send(
        "GET",
        f"/api/v1/namespaces/{api.namespace}/configmaps",
        accept=TABLE,
        query={"labelSelector": "test=table"},
    )
    assert answer.status == 200, answer.body
    table = answer.body
    names = [column["name"] for column in table["columnDefinitions"]]
    assert names[0] == "Name"
    assert table["columnDefinitions"][0]["format"] == "name"
    [row] = table["rows"]
    assert row["cells"][0] == "cm1"
    assert row["cells"][names.index("Data")] == 1
    assert AGE.match(row["cells"][names.index("Age")])
