"""kubectl against the API server under test: the emulator and, marked ``cluster``, a real one.

Each test runs the kubectl binary (``ApiServer.kubectl``: ``PODWRIGHT_TEST_KUBECTL`` or the one on
the ``PATH``) with a kubeconfig naming the server, and asserts what kubectl prints and what the
server then holds, using only what kubectl 1.27 to 1.33 all do: create, client-side and
server-side apply, get (by name, ``-o yaml``, ``-o json``, ``-l``, by short name, by category),
delete, ``--dry-run=server``, server-side field validation, server-side printing, and admission
webhooks' refusals and warnings. Sources are kubectl's (``staging/src/k8s.io/kubectl/pkg/cmd``)
and ``test_kubectl_api.py``'s for what the server answers.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import yaml

from tests.kube.gadgets import Gadgets, installed_gadgets
from tests.kube.support import ApiServer, config_map
from tests.kube.test_admission_webhooks import installed, probed, webhook
from tests.webhook_server import Review, WebhookServer

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def succeeded(api: ApiServer, *args: str, input: str | None = None) -> str:
    """kubectl's standard output, once it exited 0."""
    done = api.kubectl(*args, input=input)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def manifest(name: str, namespace: str, label: str, **data: str) -> str:
    cm = config_map(name, namespace, test=label)
    cm["data"] = data
    return yaml.safe_dump(cm)


@pytest.fixture
def label() -> str:
    """A label value of the test's own: ``-l test=<label>`` selects only its objects."""
    return f"k{uuid.uuid4().hex[:8]}"


def test_create_get_and_delete_a_configmap(api: ApiServer, label: str) -> None:
    """``kubectl create -f`` prints ``configmap/<name> created``; ``get`` finds it by name, by its
    short name ``cm`` (discovery's ``shortNames``) and by label, prints the server's Table (``NAME``
    first, ``DATA``) and the stored object as YAML or JSON; ``delete`` prints ``configmap
    "<name>" deleted``, after which ``get`` exits 1 with the server's NotFound."""
    out = succeeded(api, "create", "-f", "-", input=manifest("one", api.namespace, label, a="1"))
    assert out.strip() == "configmap/one created"
    succeeded(api, "create", "-f", "-", input=manifest("two", api.namespace, label, b="2", c="3"))
    table = succeeded(api, "get", "cm", "-l", f"test={label}").splitlines()
    assert table[0].split()[:2] == ["NAME", "DATA"]
    assert [line.split()[:2] for line in table[1:]] == [["one", "1"], ["two", "2"]]
    stored = yaml.safe_load(succeeded(api, "get", "configmap", "one", "-o", "yaml"))
    assert stored["data"] == {"a": "1"}
    assert stored["metadata"]["uid"]
    listed = json.loads(succeeded(api, "get", "configmaps", "-l", f"test={label}", "-o", "json"))
    assert [item["metadata"]["name"] for item in listed["items"]] == ["one", "two"]
    assert succeeded(api, "get", "cm", "one", "-o", "name").strip() == "configmap/one"
    assert succeeded(api, "delete", "cm", "one").strip() == 'configmap "one" deleted'
    gone = api.kubectl("get", "cm", "one")
    assert gone.returncode == 1
    assert 'Error from server (NotFound): configmaps "one" not found' in gone.stderr
    out = succeeded(api, "delete", "-f", "-", input=manifest("two", api.namespace, label))
    assert out.strip() == 'configmap "two" deleted'


def test_client_side_apply_creates_then_patches_with_the_last_applied_configuration(
    api: ApiServer, label: str
) -> None:
    """``kubectl apply`` (client-side) creates an object that is absent, recording what it
    applied in the ``kubectl.kubernetes.io/last-applied-configuration`` annotation; applied
    again, it sends a three-way patch (a strategic merge patch for a built-in kind) that drops
    what was removed from the file, and prints ``configured``, or ``unchanged`` when there is
    nothing to send (kubectl ``pkg/cmd/apply/apply.go``, ``patcher.go``)."""
    first = manifest("app", api.namespace, label, a="1", b="2")
    assert succeeded(api, "apply", "-f", "-", input=first).strip() == "configmap/app created"
    stored = json.loads(succeeded(api, "get", "cm", "app", "-o", "json"))
    applied = json.loads(stored["metadata"]["annotations"][LAST_APPLIED])
    assert applied["data"] == {"a": "1", "b": "2"}
    second = manifest("app", api.namespace, label, a="10")
    assert succeeded(api, "apply", "-f", "-", input=second).strip() == "configmap/app configured"
    stored = json.loads(succeeded(api, "get", "cm", "app", "-o", "json"))
    assert stored["data"] == {"a": "10"}
    assert succeeded(api, "apply", "-f", "-", input=second).strip() == "configmap/app unchanged"


def test_server_side_apply_records_kubectl_as_the_fields_manager(
    api: ApiServer, label: str
) -> None:
    """``kubectl apply --server-side`` sends the file as an apply patch with the field manager
    ``kubectl`` and prints ``serverside-applied`` (kubectl ``pkg/cmd/apply/apply.go``); the
    object's ``managedFields`` name the manager and its ``Apply`` operation."""
    body = manifest("ssa", api.namespace, label, a="1")
    out = succeeded(api, "apply", "--server-side", "-f", "-", input=body)
    assert out.strip() == "configmap/ssa serverside-applied"
    body = manifest("ssa", api.namespace, label, a="2")
    succeeded(api, "apply", "--server-side", "-f", "-", input=body)
    stored = json.loads(succeeded(api, "get", "cm", "ssa", "-o", "json", "--show-managed-fields"))
    assert stored["data"] == {"a": "2"}
    managers = {(e["manager"], e["operation"]) for e in stored["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers


def test_a_server_dry_run_creates_nothing(api: ApiServer, label: str) -> None:
    """``kubectl create --dry-run=server`` sends ``dryRun=All`` and prints ``created (server dry
    run)``; nothing is stored."""
    out = succeeded(
        api, "create", "--dry-run=server", "-f", "-", input=manifest("dry", api.namespace, label)
    )
    assert out.strip() == "configmap/dry created (server dry run)"
    assert api.kubectl("get", "cm", "dry").returncode == 1


def test_unknown_fields_are_refused_by_the_server_as_kubectl_asks(
    api: ApiServer, label: str
) -> None:
    """kubectl validates strictly by default, and, where the server's OpenAPI says it supports
    ``fieldValidation``, leaves it to the server with ``fieldValidation=Strict``
    (``GetValidationDirective`` in kubectl ``pkg/cmd/util/helpers.go``): the server's 400 is
    printed as ``Error from server (BadRequest): ... strict decoding error: unknown field
    "<path>"``. ``--validate=warn`` sends ``Warn``: created, and kubectl prints the server's
    ``Warning: unknown field "<path>"`` on stderr."""
    cm = config_map("typo", api.namespace, test=label)
    cm["dta"] = {"a": "1"}
    refused = api.kubectl("create", "-f", "-", input=yaml.safe_dump(cm))
    assert refused.returncode == 1
    assert "Error from server (BadRequest)" in refused.stderr
    assert 'strict decoding error: unknown field "dta"' in refused.stderr
    warned = api.kubectl("create", "--validate=warn", "-f", "-", input=yaml.safe_dump(cm))
    assert warned.returncode == 0, warned.stderr
    assert 'Warning: unknown field "dta"' in warned.stderr


def _apply(api: ApiServer, body: str) -> str:
    return succeeded(api, "apply", "-f", "-", input=body).strip()


def test_a_custom_resource_through_kubectl(api: ApiServer) -> None:
    """A custom resource (its CRD with printer columns, a status subresource, a short name and
    a category): ``kubectl apply`` creates it, and applied again sends a JSON merge patch (no
    strategic merge for custom resources: kubectl ``patcher.go``, ``buildMergePatch``);
    ``kubectl get`` by plural, short name and category prints the CRD's columns after ``NAME``
    (the server's Table), ``-o yaml`` the stored object with its schema's defaults; an unknown
    field is refused (``fieldValidation=Strict``); ``delete -f`` deletes it."""
    with installed_gadgets(api) as gadgets:
        printed = f"gadget.{gadgets.group}"  # kubectl names objects <kind>.<group>/<name>
        assert _apply(api, gadgets.manifest("g1", size=2)) == f"{printed}/g1 created"
        assert _apply(api, gadgets.manifest("g1", size=5)) == f"{printed}/g1 configured"
        for listed in (gadgets.resource, gadgets.short_name, gadgets.category):
            header, row = succeeded(api, "get", listed).splitlines()
            assert header.split() == ["NAME", "SIZE", "COLOR", "FRAGILE", "PHASE", "AGE"]
            # FRAGILE and PHASE find nothing: null cells, printed empty.
            name, size, color, age = row.split()
            assert (name, size, color) == ("g1", "5", "red")
            assert age[-1] in "smhdy"
        stored = yaml.safe_load(succeeded(api, "get", gadgets.short_name, "g1", "-o", "yaml"))
        assert stored["spec"] == {"size": 5, "color": "red"}
        assert stored["kind"] == "Gadget"
        typo = gadgets.body("g2", size=1)
        typo["spec"]["colour"] = "blue"
        refused = api.kubectl("apply", "-f", "-", input=yaml.safe_dump(typo))
        assert refused.returncode == 1
        assert 'strict decoding error: unknown field "spec.colour"' in refused.stderr
        deleted = succeeded(api, "delete", "-f", "-", input=gadgets.manifest("g1"))
        assert deleted.strip() == f'{printed} "g1" deleted'
        assert succeeded(api, "get", gadgets.short_name, "-o", "name") == ""


def _status_phase(api: ApiServer, gadgets: Gadgets, phase: str) -> dict[str, Any]:
    answer = api.send(
        "PATCH",
        f"{gadgets.collection}/g1/status",
        {"status": {"phase": phase}},
        content_type="application/merge-patch+json",
    )
    assert answer.status == 200, answer.body
    body: dict[str, Any] = answer.body
    return body


def test_printer_columns_show_the_status(api: ApiServer) -> None:
    """A printer column reads the status the status subresource wrote; ``-o wide`` shows the
    same columns when none has a priority above 0."""
    with installed_gadgets(api) as gadgets:
        _apply(api, gadgets.manifest("g1", size=1, fragile=False))
        _status_phase(api, gadgets, "Ready")
        header, row = succeeded(api, "get", gadgets.short_name, "g1", "-o", "wide").splitlines()
        assert header.split()[:5] == ["NAME", "SIZE", "COLOR", "FRAGILE", "PHASE"]
        assert row.split()[:5] == ["g1", "1", "red", "false", "Ready"]


def test_admission_refusals_and_warnings_reach_the_kubectl_user(api: ApiServer, label: str) -> None:
    """A validating webhook's refusal makes ``kubectl apply`` exit 1 and print ``Error from
    server: error when creating "STDIN": admission webhook "<name>" denied the request:
    <message>`` (``ToStatusErr`` in apiserver plugin/webhook/errors/statuserror.go keeps the
    webhook's status, here without a reason, which kubectl would print in parentheses);
    its warnings, sent back as ``Warning: 299 - "<text>"`` headers, are printed by kubectl as
    ``Warning: <text>`` on stderr (client-go ``rest/warnings.go``)."""
    marker = f"webhook-test-{uuid.uuid4().hex[:8]}.podwright.dev/subject"

    def judge(request: Review) -> Review:
        labels = request["object"]["metadata"].get("labels") or {}
        if labels.get(marker) == "refuse":
            return {"allowed": False, "status": {"code": 403, "message": "no tea before noon"}}
        return {"allowed": True, "warnings": ["mind the gap"]}

    def labelled(name: str, value: str) -> str:
        cm = config_map(name, api.namespace, test=label, **{marker: value})
        return yaml.safe_dump(cm)

    with (
        WebhookServer({"/judge": judge}) as server,
        installed(
            api,
            "ValidatingWebhookConfiguration",
            [webhook("judge", server.url("/judge"), server, marker)],
            active=lambda: probed(api, server, "/judge", {marker: "probe"}),
        ) as name,
    ):
        refused = api.kubectl("apply", "-f", "-", input=labelled("tea", "refuse"))
        assert refused.returncode == 1
        assert f'admission webhook "{name}" denied the request: no tea before noon' in (
            refused.stderr
        )
        assert refused.stderr.startswith('Error from server: error when creating "STDIN": ')
        admitted = api.kubectl("apply", "-f", "-", input=labelled("coffee", "admit"))
        assert admitted.returncode == 0, admitted.stderr
        assert admitted.stdout.strip() == "configmap/coffee created"
        assert "Warning: mind the gap" in admitted.stderr.splitlines()
