"""Admission webhooks as a real API server calls them, asserted against the emulator and, marked
``cluster``, a real API server.

The webhooks are served by this process (tests/webhook_server.py) at
``PODWRIGHT_TEST_WEBHOOK_HOST``. Every configuration selects only objects carrying a label unique
to its test (``objectSelector``), so a real cluster's other traffic never reaches them, and is
deleted when its test ends, also on failure. A real API server loads a new configuration a moment
after it is created: each test waits until a dry-run probe reaches one of its webhooks.

Sources (k8s.io/apiserver, ``staging/src/k8s.io/apiserver/pkg/admission/``) are named in each
test; tests/k8s_emulator/admission.py lists them all.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from podwright.engine.kubernetes_port import (
    ForbiddenError,
    KubernetesError,
    NotFoundError,
    ObjectRef,
    PatchType,
    ServerError,
)
from tests.kube.support import ApiServer, config_map, eventually
from tests.webhook_server import Review, WebhookServer, untrusted_ca_bundle

CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1"
ALLOW: Callable[[Review], Review] = lambda _request: {"allowed": True}  # noqa: E731


@pytest.fixture
def marker() -> str:
    """A label key unique to the test: its webhooks select only objects that carry it."""
    return f"webhook-test-{uuid.uuid4().hex[:8]}.podwright.dev/subject"


def webhook(
    name: str,
    url: str,
    server: WebhookServer | None,
    marker: str,
    *,
    values: tuple[str, ...] = (),
    operations: tuple[str, ...] = ("CREATE",),
    **fields: Any,
) -> dict[str, Any]:
    """A webhook for the test's ConfigMaps that carry ``marker`` (with one of ``values``)."""
    selector = {"key": marker, "operator": "In" if values else "Exists"}
    if values:
        selector["values"] = list(values)
    client_config: dict[str, Any] = {"url": url}
    if server is not None:
        client_config["caBundle"] = server.ca_bundle
    return {
        "name": f"{name}.{marker.split('/', maxsplit=1)[0]}",
        "clientConfig": client_config,
        "rules": [
            {
                "operations": list(operations),
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["configmaps"],
                "scope": "Namespaced",
            }
        ],
        "objectSelector": {"matchExpressions": [selector]},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
        **fields,
    }


@contextlib.contextmanager
def installed(
    api: ApiServer,
    kind: str,
    webhooks: list[dict[str, Any]],
    *,
    active: Callable[[], bool],
) -> Iterator[str]:
    """A webhook configuration, created and waited for until ``active()``; deleted at the end."""
    plural = kind.lower() + "s"
    name = webhooks[0]["name"]
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": webhooks,
    }
    created = api.send("POST", f"{CONFIGURATIONS}/{plural}", body)
    assert created.status == 201, created.body
    try:
        eventually(active, timeout=30)
        yield name
    finally:
        api.send("DELETE", f"{CONFIGURATIONS}/{plural}/{name}")


def probed(api: ApiServer, server: WebhookServer, path: str, labels: dict[str, str]) -> bool:
    """Whether a dry-run create of a ConfigMap with ``labels`` reaches the webhook at ``path``
    (whatever it answers): the configuration is in force."""
    name = f"probe-{uuid.uuid4().hex[:8]}"
    api.send(
        "POST",
        f"/api/v1/namespaces/{api.namespace}/configmaps",
        config_map(name, api.namespace, **labels),
        query={"dryRun": "All"},
    )
    return sent(server, path, name) is not None


def sent(server: WebhookServer, path: str, name: str) -> Review | None:
    """The last request about ``name`` the webhook at ``path`` received."""
    return next((r for r in reversed(server.reviews(path)) if r["name"] == name), None)


def refused(call: Callable[[], object]) -> KubernetesError:
    with pytest.raises(KubernetesError) as caught:
        call()
    return caught.value


def test_a_validating_webhook_refuses_with_its_code_and_message(
    api: ApiServer, marker: str
) -> None:
    """A refusal answers the webhook's status code and the message ``admission webhook "<name>"
    denied the request: <message>`` (``ToStatusErr`` in plugin/webhook/errors/statuserror.go;
    newer servers may prefix it with ``<resource> "<name>" is forbidden: ``, hence ``in``).
    Objects the ``objectSelector`` does not select are not sent (predicates/object/matcher.go)."""

    def deny(request: Review) -> Review:
        return {"allowed": False, "status": {"code": 403, "message": "no tea before noon"}}

    with WebhookServer({"/deny": deny}) as server:
        hook = webhook("deny", server.url("/deny"), server, marker)
        probe = {marker: "probe"}
        with installed(
            api,
            "ValidatingWebhookConfiguration",
            [hook],
            active=lambda: probed(api, server, "/deny", probe),
        ):
            error = refused(
                lambda: api.client.create(config_map("tea", api.namespace, **{marker: "x"}))
            )
            assert isinstance(error, ForbiddenError)
            assert error.status == 403
            assert (
                f'admission webhook "{hook["name"]}" denied the request: no tea before noon'
                in error.message
            )
            with pytest.raises(NotFoundError):
                api.client.get(api.ref("ConfigMap", "tea"))
            api.client.create(config_map("coffee", api.namespace))
            assert sent(server, "/deny", "coffee") is None


def test_warnings_reach_the_client_as_warning_headers(api: ApiServer, marker: str) -> None:
    """A webhook's ``warnings`` are sent back as ``Warning: 299 - "<text>"`` headers, quotes
    escaped (mutating and validating dispatchers: ``warning.AddWarning``; ``NewWarningHeader``
    in k8s.io/apimachinery/pkg/util/net/http.go)."""

    def warn(request: Review) -> Review:
        return {"allowed": True, "warnings": ["mind the gap", 'say "please"']}

    with (
        WebhookServer({"/warn": warn}) as server,
        installed(
            api,
            "ValidatingWebhookConfiguration",
            [webhook("warn", server.url("/warn"), server, marker)],
            active=lambda: probed(api, server, "/warn", {marker: "probe"}),
        ),
    ):
        answer = api.send(
            "POST",
            f"/api/v1/namespaces/{api.namespace}/configmaps",
            config_map("warned", api.namespace, **{marker: "x"}),
        )
    assert answer.status == 201, answer.body
    assert '299 - "mind the gap"' in answer.warnings
    assert '299 - "say \\"please\\""' in answer.warnings


def test_a_mutating_patch_is_applied_before_validating_webhooks_see_the_object(
    api: ApiServer, marker: str
) -> None:
    """A mutating webhook's JSONPatch is applied, and validating webhooks run after every
    mutating one, on the mutated object (mutating/dispatcher.go ``callAttrMutatingHook``; the
    admission chain runs MutatingAdmissionWebhook before ValidatingAdmissionWebhook)."""
    patch = [{"op": "add", "path": "/data/added", "value": "by the webhook"}]

    def mutate(request: Review) -> Review:
        encoded = base64.b64encode(json.dumps(patch).encode()).decode()
        return {"allowed": True, "patchType": "JSONPatch", "patch": encoded}

    with WebhookServer({"/mutate": mutate, "/validate": ALLOW}) as server:
        probe = {marker: "probe"}
        with (
            installed(
                api,
                "MutatingWebhookConfiguration",
                [webhook("mutate", server.url("/mutate"), server, marker)],
                active=lambda: probed(api, server, "/mutate", probe),
            ),
            installed(
                api,
                "ValidatingWebhookConfiguration",
                [webhook("validate", server.url("/validate"), server, marker)],
                active=lambda: probed(api, server, "/validate", probe),
            ),
        ):
            created = api.client.create(config_map("mutated", api.namespace, **{marker: "x"}))
            assert created["data"] == {"key": "value", "added": "by the webhook"}
            mutating = sent(server, "/mutate", "mutated")
            validating = sent(server, "/validate", "mutated")
    assert mutating is not None
    assert validating is not None
    assert "added" not in mutating["object"]["data"]
    assert validating["object"]["data"]["added"] == "by the webhook"


def test_a_mutating_patch_writes_and_keeps_an_annotation_whose_key_has_a_slash(
    api: ApiServer, marker: str
) -> None:
    """What podwright's webhook does with ``podwright.dev/submitted-by``, on ConfigMaps: a create
    gets the requester the review names (``userInfo``, request/admissionreview.go), an update the
    value its ``oldObject`` had. The patch names the key with ``/`` escaped as ``~1`` (RFC 6901,
    as evanphx/json-patch reads a path); an ``add`` replaces a member that exists (RFC 6902) and
    adds the map where there is none."""
    key = "test.podwright.dev/submitted-by"
    escaped = "/metadata/annotations/test.podwright.dev~1submitted-by"

    def record(request: Review) -> Review:
        if request["operation"] == "CREATE":
            value = request["userInfo"]["username"]
        else:
            value = (request["oldObject"]["metadata"].get("annotations") or {})[key]
        annotations = request["object"]["metadata"].get("annotations")
        if annotations is None:
            patch = [{"op": "add", "path": "/metadata/annotations", "value": {key: value}}]
        else:
            patch = [{"op": "add", "path": escaped, "value": value}]
        encoded = base64.b64encode(json.dumps(patch).encode()).decode()
        return {"allowed": True, "patchType": "JSONPatch", "patch": encoded}

    with WebhookServer({"/record": record}) as server:
        hook = webhook(
            "record", server.url("/record"), server, marker, operations=("CREATE", "UPDATE")
        )
        with installed(
            api,
            "MutatingWebhookConfiguration",
            [hook],
            active=lambda: probed(api, server, "/record", {marker: "probe"}),
        ):
            claimed = config_map("claimed", api.namespace, **{marker: "x"})
            claimed["metadata"]["annotations"] = {key: "someone-else", "note": "kept"}
            created = api.client.create(claimed)
            review = sent(server, "/record", "claimed")
            assert review is not None
            requester = review["userInfo"]["username"]
            assert requester
            assert created["metadata"]["annotations"] == {key: requester, "note": "kept"}
            bare = api.client.create(config_map("bare", api.namespace, **{marker: "x"}))
            assert bare["metadata"]["annotations"] == {key: requester}

            ref = ObjectRef("v1", "ConfigMap", api.namespace, "claimed")
            changed = copy.deepcopy(created)
            changed["metadata"]["annotations"][key] = "mallory"
            replaced = api.client.replace(ref, changed)
            assert replaced["metadata"]["annotations"] == {key: requester, "note": "kept"}
            removed = copy.deepcopy(replaced)
            del removed["metadata"]["annotations"]
            replaced = api.client.replace(ref, removed)
            assert replaced["metadata"]["annotations"] == {key: requester}


@pytest.mark.parametrize(("policy", "calls"), [("IfNeeded", 2), ("Never", 1)])
def test_a_mutating_webhook_that_needs_it_is_called_again_after_a_later_ones_change(
    api: ApiServer, marker: str, policy: str, calls: int
) -> None:
    """``reinvocationPolicy: IfNeeded``: a mutating webhook called before another that changes
    the object is called once more, and sees the change (mutating/dispatcher.go ``Dispatch``:
    ``RequireReinvokingPreviouslyInvokedPlugins`` after a call that changed the object; the
    admission chain's one reinvocation, admission/reinvocation.go); ``Never``: once. The
    configurations are called in the order of their names."""
    patch = [{"op": "add", "path": "/data/later", "value": "changed"}]

    def later(request: Review) -> Review:
        encoded = base64.b64encode(json.dumps(patch).encode()).decode()
        return {"allowed": True, "patchType": "JSONPatch", "patch": encoded}

    with WebhookServer({"/earlier": ALLOW, "/later": later}) as server:
        probe = {marker: "probe"}
        earlier_hook = webhook(
            "a-earlier", server.url("/earlier"), server, marker, reinvocationPolicy=policy
        )
        with (
            installed(
                api,
                "MutatingWebhookConfiguration",
                [earlier_hook],
                active=lambda: probed(api, server, "/earlier", probe),
            ),
            installed(
                api,
                "MutatingWebhookConfiguration",
                [webhook("b-later", server.url("/later"), server, marker)],
                active=lambda: probed(api, server, "/later", probe),
            ),
        ):
            created = api.client.create(config_map("twice", api.namespace, **{marker: "x"}))
            earlier = [r for r in server.reviews("/earlier") if r["name"] == "twice"]
            later_calls = [r for r in server.reviews("/later") if r["name"] == "twice"]
    assert created["data"] == {"key": "value", "later": "changed"}
    assert len(later_calls) == 1
    assert [review["object"]["data"].get("later") for review in earlier] == [None, "changed"][
        :calls
    ]


def test_rules_and_selectors_limit_what_is_sent(api: ApiServer, marker: str) -> None:
    """A webhook gets only the operations and resources its ``rules`` name
    (predicates/rules/rules.go), in namespaces its ``namespaceSelector`` selects
    (predicates/namespace/matcher.go), for objects its ``objectSelector`` selects; the request
    carries the AdmissionReview v1 fields (request/admissionreview.go
    ``CreateV1AdmissionReview``)."""
    namespace_ref = ObjectRef("v1", "Namespace", "", api.namespace)
    api.client.patch(namespace_ref, {"metadata": {"labels": {marker: "yes"}}}, PatchType.MERGE)
    hook = webhook(
        "record",
        "",
        None,
        marker,
        operations=("CREATE", "DELETE"),
        namespaceSelector={"matchLabels": {marker: "yes"}},
    )
    with WebhookServer({"/record": ALLOW}) as server:
        hook["clientConfig"] = {
            "url": server.url("/record"),
            "caBundle": server.ca_bundle,
        }
        with installed(
            api,
            "ValidatingWebhookConfiguration",
            [hook],
            active=lambda: probed(api, server, "/record", {marker: "probe"}),
        ):
            api.client.create(config_map("unselected", api.namespace))
            api.client.create(config_map("selected", api.namespace, **{marker: "x"}))
            ref = api.ref("ConfigMap", "selected")
            api.client.patch(ref, {"data": {"key": "changed"}}, PatchType.MERGE)
            api.client.delete(ref)
            assert sent(server, "/record", "unselected") is None
            requests = [r for r in server.reviews("/record") if r["name"] == "selected"]
            assert [r["operation"] for r in requests] == ["CREATE", "DELETE"]
            create, delete = requests
            assert create["namespace"] == api.namespace
            assert create["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
            assert create["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
            assert create["requestResource"] == create["resource"]
            assert create["dryRun"] is False
            assert create["options"]["kind"] == "CreateOptions"
            assert create["object"]["metadata"]["labels"] == {marker: "x"}
            assert create["oldObject"] is None
            assert create["userInfo"]["username"]
            assert delete["object"] is None
            assert delete["oldObject"]["data"] == {"key": "changed"}
            assert delete["options"]["kind"] == "DeleteOptions"

            api.client.patch(
                namespace_ref, {"metadata": {"labels": {marker: None}}}, PatchType.MERGE
            )

            def not_sent_outside_the_namespace_selector() -> bool:
                name = f"later-{uuid.uuid4().hex[:6]}"
                api.client.create(config_map(name, api.namespace, **{marker: "x"}))
                return sent(server, "/record", name) is None

            eventually(not_sent_outside_the_namespace_selector, timeout=30)


def unreachable_url() -> str:
    """An HTTPS URL where nothing listens (a port just freed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"https://127.0.0.1:{port}/nothing"


def test_failure_policy_decides_when_the_webhook_cannot_be_called(
    api: ApiServer, marker: str
) -> None:
    """A webhook that cannot be reached, or whose certificate ``caBundle`` does not vouch for,
    refuses the request with 500 ``failed calling webhook "<name>"`` under ``failurePolicy:
    Fail`` and admits it under ``Ignore`` (validating/dispatcher.go: ``ErrCallingWebhook``,
    ``apierrors.NewInternalError``; the client of util/webhook/client.go trusts ``caBundle``)."""
    with WebhookServer({"/record": ALLOW}) as server:
        fail = webhook("fail", unreachable_url(), None, marker, values=("fail",))
        fail["failurePolicy"] = "Fail"
        ignore = webhook("ignore", unreachable_url(), None, marker, values=("ignore",))
        ignore["failurePolicy"] = "Ignore"
        untrusted = webhook("untrusted", server.url("/record"), None, marker, values=("untrusted",))
        untrusted["clientConfig"]["caBundle"] = untrusted_ca_bundle()
        record = webhook("record", server.url("/record"), server, marker, values=("probe",))
        with installed(
            api,
            "ValidatingWebhookConfiguration",
            [record, fail, ignore, untrusted],
            active=lambda: probed(api, server, "/record", {marker: "probe"}),
        ):
            error = refused(
                lambda: api.client.create(config_map("closed", api.namespace, **{marker: "fail"}))
            )
            assert isinstance(error, ServerError)
            assert error.status == 500
            assert f'failed calling webhook "{fail["name"]}"' in error.message
            created = api.client.create(config_map("open", api.namespace, **{marker: "ignore"}))
            assert created["metadata"]["name"] == "open"
            error = refused(
                lambda: api.client.create(
                    config_map("untrusted", api.namespace, **{marker: "untrusted"})
                )
            )
            assert f'failed calling webhook "{untrusted["name"]}"' in error.message
            assert sent(server, "/record", "untrusted") is None


def test_timeout_seconds_bounds_the_call(api: ApiServer, marker: str) -> None:
    """A webhook that does not answer within ``timeoutSeconds`` is a failed call: refused under
    ``failurePolicy: Fail`` once the timeout passed, not the 10 s default (dispatchers:
    ``context.WithTimeout(ctx, TimeoutSeconds)``)."""
    release = threading.Event()

    def slow(request: Review) -> Review:
        if request["name"].startswith("slow"):
            release.wait(timeout=20)
        return {"allowed": True}

    with WebhookServer({"/slow": slow}) as server:
        try:
            hook = webhook("slow", server.url("/slow"), server, marker, timeoutSeconds=1)
            with installed(
                api,
                "ValidatingWebhookConfiguration",
                [hook],
                active=lambda: probed(api, server, "/slow", {marker: "probe"}),
            ):
                started = time.monotonic()
                error = refused(
                    lambda: api.client.create(config_map("slow", api.namespace, **{marker: "x"}))
                )
                assert time.monotonic() - started < 8
                assert error.status == 500
                assert f'failed calling webhook "{hook["name"]}"' in error.message
        finally:
            release.set()


def test_dry_run_requests_reach_side_effect_free_webhooks_as_dry_run(
    api: ApiServer, marker: str
) -> None:
    """A dry-run request is sent to a webhook with ``sideEffects: None``, with ``dryRun: true``
    and the options' ``dryRun: [All]`` (``CreateV1AdmissionReview``); nothing is stored. (A
    webhook with side effects cannot be created through v1: see the next test.)"""
    with (
        WebhookServer({"/record": ALLOW}) as server,
        installed(
            api,
            "ValidatingWebhookConfiguration",
            [webhook("record", server.url("/record"), server, marker)],
            active=lambda: probed(api, server, "/record", {marker: "probe"}),
        ),
    ):
        answer = api.send(
            "POST",
            f"/api/v1/namespaces/{api.namespace}/configmaps",
            config_map("dry", api.namespace, **{marker: "x"}),
            query={"dryRun": "All"},
        )
        assert answer.status == 201, answer.body
        review = sent(server, "/record", "dry")
    assert review is not None
    assert review["dryRun"] is True
    assert review["options"]["dryRun"] == ["All"]
    with pytest.raises(NotFoundError):
        api.client.get(api.ref("ConfigMap", "dry"))


def test_a_webhook_configuration_must_declare_no_side_effects(api: ApiServer, marker: str) -> None:
    """v1 refuses a webhook without ``sideEffects``, or with side effects (Some, Unknown): 422
    (pkg/apis/admissionregistration/validation/validation.go, ``requireNoSideEffects``)."""
    hook = webhook("sloppy", unreachable_url(), None, marker)
    for side_effects in (None, "Some"):
        if side_effects is None:
            hook.pop("sideEffects")
        else:
            hook["sideEffects"] = side_effects
        answer = api.send(
            "POST",
            f"{CONFIGURATIONS}/validatingwebhookconfigurations",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": hook["name"]},
                "webhooks": [hook],
            },
        )
        if answer.status == 201:  # a server that accepted it: clean up before failing
            api.send("DELETE", f"{CONFIGURATIONS}/validatingwebhookconfigurations/{hook['name']}")
        assert answer.status == 422, answer.body
        assert "webhooks[0].sideEffects" in answer.body["message"]


def test_reviews_reuse_the_connections_to_a_webhook(api: ApiServer, marker: str) -> None:
    """The API server keeps its connections to a webhook open and sends the next reviews over
    them: its ``ClientManager`` caches a REST client per client configuration
    (``staging/src/k8s.io/apiserver/pkg/util/webhook/client.go``, ``HookClient``), whose
    transport keeps idle connections (``net/http``). Ten creates one after another take fewer
    connections than reviews (a highly available control plane may open one per API server)."""
    with (
        WebhookServer({"/allow": ALLOW}) as server,
        installed(
            api,
            "ValidatingWebhookConfiguration",
            [webhook("allow", server.url("/allow"), server, marker)],
            active=lambda: probed(api, server, "/allow", {marker: "probe"}),
        ),
    ):
        before = server.connections_accepted
        for index in range(10):
            answer = api.send(
                "POST",
                f"/api/v1/namespaces/{api.namespace}/configmaps",
                config_map(f"kept-{index}", api.namespace, **{marker: "x"}),
            )
            assert answer.status == 201, answer.body
        assert [sent(server, "/allow", f"kept-{index}") is not None for index in range(10)] == [
            True
        ] * 10
        assert server.connections_accepted - before < 10
