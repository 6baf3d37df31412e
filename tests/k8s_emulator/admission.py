"""Admission webhooks, called as kube-apiserver calls them.

podwright serves validating and mutating admission webhooks; the emulator calls them the way a real
API server does, so that the same tests run against the emulator in CI and against a real cluster.
The store calls :meth:`Admission.mutate` and :meth:`Admission.validate` on each create, update
(PUT and PATCH, the ``status`` subresource included) and delete, without holding its lock.

What a real server does, and where (``staging/src/k8s.io/apiserver/pkg/admission/``):

* the webhooks and their order: ``configuration/mutating_webhook_manager.go``
  (``getMutatingWebhookConfigurations``): configurations sorted by name, the webhooks of one in
  the order they are listed; mutating webhooks are called one after another, each seeing the
  object as the previous ones left it (``plugin/webhook/mutating/dispatcher.go``); validating
  webhooks all at once, the first refusal answering (``plugin/webhook/validating/dispatcher.go``);
* which are called (``plugin/webhook/generic/webhook.go``, ``ShouldCallHook``): one of ``rules``
  matches (``predicates/rules/rules.go``: operations, apiGroups, apiVersions, resources with ``*``,
  ``resource/subresource`` and ``*/*``, scope ``Namespaced``, ``Cluster`` or ``*``; a Namespace is
  cluster-scoped and its requests name itself as their namespace), the ``namespaceSelector``
  matches the namespace's labels (``predicates/namespace/matcher.go``: always for other
  cluster-scoped objects; a Namespace's own labels when it is created or updated; 404 when the
  namespace does not exist), the ``objectSelector`` matches the new or the old object's labels
  (``predicates/object/matcher.go``); webhook configurations themselves are never sent
  (``IsExemptAdmissionConfigurationResource``);
* the call: an ``admission.k8s.io/v1`` AdmissionReview (``request/admissionreview.go``,
  ``CreateV1AdmissionReview``), POSTed to ``clientConfig.url`` with ``?timeout=<n>s``, the server
  certificate checked against ``caBundle`` and the URL's host; the answer checked by
  ``VerifyAdmissionResponse`` (the uid, ``admission.k8s.io/v1, Kind=AdmissionReview``, patch and
  patchType together, no patch from a validating webhook);
* a failed call (no answer within ``timeoutSeconds``, an invalid answer, ...) is an
  ``ErrCallingWebhook`` (``util/webhook/error.go``: ``failed calling webhook "<name>": ...``):
  ``failurePolicy: Ignore`` admits, ``Fail`` (the v1 default) answers 500 InternalError;
* a refusal answers the webhook's status (``plugin/webhook/errors/statuserror.go``,
  ``ToStatusErr``): its code (below 400 becomes 400), reason and details, and the message
  ``admission webhook "<name>" denied the request: <message>`` (or ``... without explanation``);
* warnings are sent back as ``Warning: 299 - "<text>"`` headers, each text once
  (``warning.AddWarning``); :func:`collect_warnings` gathers them for the HTTP server;
* a JSONPatch answer is applied to the object (``patchType: JSONPatch`` is the only type).

The configurations themselves get the v1 defaults (``pkg/apis/admissionregistration/v1/
defaults.go``) and the v1 validation that matters to a test (``pkg/apis/admissionregistration/
validation/validation.go``: ``sideEffects`` must be None or NoneOnDryRun, so a dry-run request
never meets a webhook with side effects; ``timeoutSeconds`` within 1..30; exactly one of ``url``
and ``service``; ``admissionReviewVersions`` naming v1 or v1beta1).

``reinvocationPolicy: IfNeeded``: when a mutating webhook's call changed the object, every
``IfNeeded`` webhook called before it is called once more, in a second pass after the first
(``plugin/webhook/mutating/dispatcher.go``, ``Dispatch``; ``reinvocationcontext.go``; the second
pass is the admission chain's one reinvocation, ``admission/reinvocation.go``); a change in that
pass calls nobody again.

Not modelled: ``matchConditions`` (CEL: webhooks are called as if they had none), in-tree
mutating plugins' reinvocation (the emulator's own admission steps change nothing a webhook
sees twice), ``matchPolicy: Equivalent`` (every resource
has one version here), ``service`` client configurations (no cluster network: calling one fails
as an unreachable service does), CONNECT and the ``binding`` subresource, and AdmissionReview
v1beta1 (v1 is always sent).
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import copy
import http.client
import json
import ssl
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from podwright.core.json_patch import PatchError, apply_json_patch
from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.selectors import label_selector

if TYPE_CHECKING:
    from tests.k8s_emulator.store import ResourceType

Obj = dict[str, Any]
Operation = Literal["CREATE", "UPDATE", "DELETE"]

GROUP = "admissionregistration.k8s.io"
MUTATING = "mutatingwebhookconfigurations"
VALIDATING = "validatingwebhookconfigurations"
DEFAULT_TIMEOUT_SECONDS = 10
REVIEW_API_VERSION = "admission.k8s.io/v1"
TEST_USER = {"username": "podwright-test", "uid": "", "groups": ["system:authenticated"]}
"""The user every request is made by, as the emulator authenticates no one."""

_OPTIONS_KINDS = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
_warnings: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "admission_warnings", default=None
)


def collect_warnings() -> list[str]:
    """A fresh list that receives the warnings admission gives from now on in this context (the
    HTTP server starts one for each request it serves, and sends them as ``Warning`` headers)."""
    collected: list[str] = []
    _warnings.set(collected)
    return collected


def warn(texts: Iterable[str]) -> None:
    """Give the current request these warnings (each text once), if its warnings are
    collected (see :func:`collect_warnings`)."""
    collected = _warnings.get()
    if collected is not None:
        collected.extend(text for text in texts if text not in collected)


def warning_header(text: str) -> str:
    """A ``Warning`` header's value as the API server writes it (``NewWarningHeader`` in
    ``k8s.io/apimachinery/pkg/util/net/http.go``: code 299, agent ``-``, the text quoted)."""
    quoted = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{quoted}"'


@dataclass(frozen=True)
class Attributes:
    """One write, as admission sees it (``admission.Attributes``): ``obj`` is None for a delete,
    ``old`` for a create; ``options`` are the request's Create/Update/DeleteOptions fields."""

    resource: ResourceType
    operation: Operation
    namespace: str
    name: str
    obj: Obj | None
    old: Obj | None = None
    subresource: str = ""
    dry_run: bool = False
    options: Mapping[str, Any] | None = None

    @property
    def is_namespace(self) -> bool:
        return self.resource.group == "" and self.resource.plural == "namespaces"

    @property
    def request_namespace(self) -> str:
        """The namespace the request is in: a Namespace's own requests are in itself."""
        return self.name if self.is_namespace else self.namespace

    @property
    def is_webhook_configuration(self) -> bool:
        return self.resource.group == GROUP and self.resource.plural in (MUTATING, VALIDATING)


class _CallingWebhookError(Exception):
    """The webhook could not be called, or answered something that is not a valid answer."""


class Admission:
    """The admission webhooks of one store. ``configurations(plural)`` lists the mutating or
    validating webhook configurations and ``namespace(name)`` reads a namespace (404 when it does
    not exist); both take the store's lock only while they read."""

    def __init__(
        self,
        configurations: Callable[[str], list[Obj]],
        namespace: Callable[[str], Obj],
    ) -> None:
        self._configurations = configurations
        self._namespace = namespace
        self._connections = _Connections()

    def close(self) -> None:
        """Close the connections kept to webhooks."""
        self._connections.close()

    def mutate(self, attributes: Attributes) -> Obj:
        """The object (of a create or an update) once every matching mutating webhook has
        patched it, in order."""
        assert attributes.obj is not None, "only a create or an update has an object to mutate"
        if attributes.is_webhook_configuration:
            return _with_defaults(attributes.resource, attributes.obj)
        mutated = self._mutated(attributes, attributes.obj)
        assert mutated is not None, "a patch turns an object into an object"
        return mutated

    def admit_delete(self, attributes: Attributes) -> None:
        """A delete goes to the mutating webhooks (which may refuse it but not patch it), then
        to the validating ones."""
        if not attributes.is_webhook_configuration:
            self._mutated(attributes, None)
            self.validate(attributes)

    def _mutated(self, attributes: Attributes, obj: Obj | None) -> Obj | None:
        """The mutating webhooks called in order, then once more those of them with
        ``reinvocationPolicy: IfNeeded`` that a later webhook's change came after (see
        :func:`_reinvoked`)."""
        hooks = self._webhooks(MUTATING)
        obj, reinvoke = self._mutating_pass(attributes, obj, hooks)
        if reinvoke:
            obj, _ = self._mutating_pass(attributes, obj, [hooks[i] for i in sorted(reinvoke)])
        return obj

    def _mutating_pass(
        self, attributes: Attributes, obj: Obj | None, hooks: list[Obj]
    ) -> tuple[Obj | None, set[int]]:
        """One pass of ``hooks`` over ``obj``; the object, and the positions of the webhooks to
        call again: each ``IfNeeded`` one called before a webhook that changed the object
        (``mutating/dispatcher.go``: ``RequireReinvokingPreviouslyInvokedPlugins`` when a call
        changed it, ``AddReinvocableWebhookToPreviouslyInvoked`` after an ``IfNeeded`` one's;
        ``mutating/reinvocationcontext.go``)."""
        invoked_reinvocable: set[int] = set()
        reinvoke: set[int] = set()
        for position, hook in enumerate(hooks):
            current = replace(attributes, obj=obj)
            if not self._calls(hook, current):
                continue
            patched = _patched(
                hook["name"], obj, _answer(_review(hook, current, self._connections, mutating=True))
            )
            if patched != obj:
                reinvoke |= invoked_reinvocable
                invoked_reinvocable = set()
            obj = patched
            if hook.get("reinvocationPolicy") == "IfNeeded":
                invoked_reinvocable.add(position)
        return obj, reinvoke

    def validate(self, attributes: Attributes) -> None:
        """Call every matching validating webhook at once; the first refusal (in their order)
        or call failure under ``failurePolicy: Fail`` is raised."""
        if attributes.is_webhook_configuration:
            _validate_configuration(attributes)
            return
        hooks = [hook for hook in self._webhooks(VALIDATING) if self._calls(hook, attributes)]
        if not hooks:
            return
        if len(hooks) == 1:  # no thread to start for one call
            _answer(_review(hooks[0], attributes, self._connections, mutating=False))
            return
        with ThreadPoolExecutor(max_workers=len(hooks)) as pool:
            calls = [
                pool.submit(_review, hook, attributes, self._connections, mutating=False)
                for hook in hooks
            ]
        for call in calls:
            _answer(call.result())

    def _webhooks(self, plural: str) -> list[Obj]:
        configurations = sorted(self._configurations(plural), key=lambda c: c["metadata"]["name"])
        return [hook for c in configurations for hook in c.get("webhooks") or []]

    def _calls(self, hook: Obj, attributes: Attributes) -> bool:
        return (
            any(_rule_matches(rule, attributes) for rule in hook.get("rules") or [])
            and self._namespace_matches(hook.get("namespaceSelector"), attributes)
            and _object_matches(hook.get("objectSelector"), attributes)
        )

    def _namespace_matches(self, selector: Obj | None, attributes: Attributes) -> bool:
        if not attributes.request_namespace and not attributes.is_namespace:
            return True
        matches = _selector(selector)
        if matches is None:
            return True
        if (
            attributes.is_namespace
            and attributes.operation != "DELETE"
            and not attributes.subresource
        ):
            return matches(_labels(attributes.obj))
        return matches(_labels(self._namespace(attributes.request_namespace)))


@dataclass(frozen=True)
class _Outcome:
    """What a webhook's call came to: the JSONPatch operations it answered (none when its call
    failed and its failure policy ignores that), or the error that refuses the request; and the
    warnings it gave either way."""

    patch: list[Any]
    error: ApiError | None = None
    warnings: tuple[str, ...] = ()


def _answer(outcome: _Outcome) -> list[Any]:
    """Record the outcome's warnings; raise its error or return its patch."""
    warn(outcome.warnings)
    if outcome.error is not None:
        raise outcome.error
    return outcome.patch


def _review(
    hook: Obj, attributes: Attributes, connections: _Connections, *, mutating: bool
) -> _Outcome:
    """Send the AdmissionReview to the webhook and judge its answer."""
    name = hook["name"]
    uid = str(uuid.uuid4())
    try:
        answer = _post(hook, _request(uid, attributes), connections)
        response = _verified(answer, uid, mutating=mutating)
        patch = _operations(response)
    except _CallingWebhookError as failure:
        if hook.get("failurePolicy", "Fail") == "Ignore":
            return _Outcome([])
        message = f'failed calling webhook "{name}": {failure}'
        return _Outcome(
            [],
            ApiError(
                500,
                "InternalError",
                f"Internal error occurred: {message}",
                details={"causes": [{"message": message}]},
            ),
        )
    warnings = tuple(str(text) for text in response.get("warnings") or [])
    if not response.get("allowed"):
        return _Outcome([], _denied(name, response.get("status")), warnings)
    return _Outcome(patch, None, warnings)


def _request(uid: str, attributes: Attributes) -> Obj:
    resource = attributes.resource
    kind = {"group": resource.group, "version": resource.version, "kind": resource.kind}
    gvr = {"group": resource.group, "version": resource.version, "resource": resource.plural}
    options = {"kind": _OPTIONS_KINDS[attributes.operation], "apiVersion": "meta.k8s.io/v1"}
    options.update(attributes.options or {})
    if attributes.dry_run:
        options["dryRun"] = ["All"]
    request: Obj = {
        "uid": uid,
        "kind": kind,
        "resource": gvr,
        "requestKind": kind,
        "requestResource": gvr,
        "name": attributes.name,
        "namespace": attributes.request_namespace,
        "operation": attributes.operation,
        "userInfo": TEST_USER,
        "object": attributes.obj,
        "oldObject": attributes.old,
        "dryRun": attributes.dry_run,
        "options": options,
    }
    if attributes.subresource:
        request["subResource"] = attributes.subresource
        request["requestSubResource"] = attributes.subresource
    return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "request": request}


class _Connections:
    """Kept-alive HTTPS connections to the webhooks, by host, port and CA bundle.

    kube-apiserver keeps its webhook clients (``util/webhook/client.go``: ``ClientManager``
    caches a REST client per client configuration) and their transports reuse idle connections,
    so a webhook sees one TLS handshake per API server connection, not one per review; and they
    speak HTTP/1.1, never HTTP/2 (``ClientManager.HookClient`` sets ``NextProtos`` to
    ``http/1.1``, kubernetes/kubernetes#75791), as ``http.client`` does here. A
    connection is given back once its answer is read whole; one that fails is closed. A kept
    connection the webhook closed meanwhile fails before an answer: the review is sent once more
    on a new connection, as Go's transport retries a request on a connection the server closed
    while idle (``net/http``'s ``errServerClosedIdle``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, int, str | None], list[http.client.HTTPSConnection]] = {}
        self._contexts: dict[str | None, ssl.SSLContext] = {}

    def context(self, bundle: str | None) -> ssl.SSLContext:
        with self._lock:
            context = self._contexts.get(bundle)
        if context is None:
            context = ssl.create_default_context(cadata=bundle)
            with self._lock:
                self._contexts[bundle] = context
        return context

    def take(
        self, key: tuple[str, int, str | None], timeout: float
    ) -> tuple[http.client.HTTPSConnection, bool]:
        """A kept connection (and True), else a new one (and False)."""
        with self._lock:
            idle = self._idle.get(key)
            connection = idle.pop() if idle else None
        if connection is not None:
            connection.timeout = timeout
            if connection.sock is not None:
                connection.sock.settimeout(timeout)
            return connection, True
        host, port, bundle = key
        context = self.context(bundle)
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=context), False

    def give_back(
        self, key: tuple[str, int, str | None], connection: http.client.HTTPSConnection
    ) -> None:
        with self._lock:
            self._idle.setdefault(key, []).append(connection)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()


def _post(hook: Obj, review: Obj, connections: _Connections) -> Obj:
    """POST the review to the webhook's URL over HTTPS; its JSON answer."""
    config = hook.get("clientConfig") or {}
    timeout = int(hook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS)
    if "url" not in config:
        service = config.get("service") or {}
        target = (
            f"https://{service.get('name')}.{service.get('namespace')}.svc:"
            f"{service.get('port', 443)}{service.get('path', '')}?timeout={timeout}s"
        )
        raise _CallingWebhookError(
            f'failed to call webhook: Post "{target}": the emulator has no cluster network '
            "to reach a service"
        )
    url = urlsplit(config["url"])
    path = f"{url.path or '/'}?{url.query + '&' if url.query else ''}timeout={timeout}s"
    target = f"https://{url.netloc}{path}"
    try:
        key = (url.hostname or "", url.port or 443, _ca_bundle(config))
        connections.context(key[2])
    except (ValueError, ssl.SSLError) as error:
        raise _CallingWebhookError(f"could not get REST client: {error}") from error
    body = json.dumps(review).encode()
    while True:
        connection, reused = connections.take(key, timeout)
        try:
            connection.request(
                "POST",
                path,
                body,
                {"Content-Type": "application/json", "Accept": "application/json"},
            )
            answer = connection.getresponse()
            data = answer.read()
        except TimeoutError as error:
            connection.close()
            raise _CallingWebhookError(
                f'failed to call webhook: Post "{target}": context deadline exceeded'
            ) from error
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as error:
            connection.close()
            if reused:
                continue  # closed by the webhook while idle: once more, on a new connection
            raise _CallingWebhookError(
                f'failed to call webhook: Post "{target}": {error}'
            ) from error
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            raise _CallingWebhookError(
                f'failed to call webhook: Post "{target}": {error}'
            ) from error
        if answer.will_close:
            connection.close()
        else:
            connections.give_back(key, connection)
        break
    if not 200 <= answer.status < 300:
        raise _CallingWebhookError(
            f"failed to call webhook: the server responded with the status code {answer.status} "
            "but did not return more information"
        )
    try:
        decoded = json.loads(data)
    except ValueError as error:
        raise _CallingWebhookError(f"failed to call webhook: {error}") from error
    if not isinstance(decoded, dict):
        raise _CallingWebhookError("failed to call webhook: the answer is not a JSON object")
    return decoded


def _ca_bundle(config: Mapping[str, Any]) -> str | None:
    bundle = config.get("caBundle")
    if not bundle:
        return None  # the system's trusted roots, as a real server uses
    try:
        return base64.b64decode(bundle, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as error:
        raise ValueError(f"caBundle is not base64-encoded PEM: {error}") from error


def _verified(answer: Mapping[str, Any], uid: str, *, mutating: bool) -> Obj:
    """The answer's ``response``, checked as ``VerifyAdmissionResponse`` checks it."""

    def invalid(reason: str) -> _CallingWebhookError:
        return _CallingWebhookError(f"received invalid webhook response: {reason}")

    response = answer.get("response")
    if not isinstance(response, dict):
        raise invalid("webhook response was absent")
    if response.get("uid") != uid:
        raise invalid(f'expected response.uid="{uid}", got "{response.get("uid", "")}"')
    api_version, kind = answer.get("apiVersion", ""), answer.get("kind", "")
    if (api_version, kind) != (REVIEW_API_VERSION, "AdmissionReview"):
        raise invalid(
            f"expected webhook response of {REVIEW_API_VERSION}, Kind=AdmissionReview, got "
            f"{api_version}, Kind={kind}"
        )
    patch, patch_type = response.get("patch"), response.get("patchType")
    if not mutating:
        if patch:
            raise invalid("validating webhook may not return response.patch")
        if patch_type is not None:
            raise invalid("validating webhook may not return response.patchType")
    elif patch and patch_type is None:
        raise invalid("webhook returned response.patch but not response.patchType")
    elif not patch and patch_type is not None:
        raise invalid("webhook returned response.patchType but not response.patch")
    return response


def _denied(name: str, status: Mapping[str, Any] | None) -> ApiError:
    """The refusal a webhook's ``status`` makes (``ToStatusErr``)."""
    status = status or {}
    denied = f'admission webhook "{name}" denied the request'
    if status.get("message"):
        message = f"{denied}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied}: {status['reason']}"
    else:
        message = f"{denied} without explanation"
    code = int(status.get("code") or 0)
    return ApiError(
        max(code, 400), str(status.get("reason") or ""), message, details=status.get("details")
    )


def _operations(response: Mapping[str, Any]) -> list[Any]:
    """The JSONPatch operations of an answer (a type other than JSONPatch, or a patch that does
    not decode, is a failed call)."""
    if not response.get("patch"):
        return []
    if response.get("patchType") != "JSONPatch":
        raise _CallingWebhookError(f'unsupported patch type "{response.get("patchType")}"')
    try:
        operations = json.loads(base64.b64decode(response["patch"], validate=True))
    except (binascii.Error, ValueError) as error:
        raise _CallingWebhookError(
            f"received undecodable patch in webhook response: {error}"
        ) from error
    if not isinstance(operations, list):
        raise _CallingWebhookError("received undecodable patch in webhook response: not a list")
    return operations


def _patched(name: str, obj: Obj | None, operations: list[Any]) -> Obj | None:
    """``obj`` with a webhook's JSONPatch applied; a patch that does not apply, or one for a
    delete, is an internal error (``callAttrMutatingHook``)."""
    if not operations:
        return obj
    if obj is None:
        raise _internal_error(
            f'admission webhook "{name}" attempted to modify the object, which is not supported '
            "for this operation"
        )
    try:
        patched = apply_json_patch(obj, operations)
    except PatchError as error:
        raise _internal_error(str(error)) from error
    if not isinstance(patched, dict):
        raise _internal_error(f'admission webhook "{name}" replaced the object by a non-object')
    return patched


def _internal_error(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")


def _rule_matches(rule: Mapping[str, Any], attributes: Attributes) -> bool:
    resource = attributes.resource
    scope = rule.get("scope") or "*"
    cluster_scoped = attributes.is_namespace or not attributes.request_namespace
    if (scope == "Namespaced" and cluster_scoped) or (scope == "Cluster" and not cluster_scoped):
        return False
    return (
        _listed(rule.get("operations"), attributes.operation)
        and _listed(rule.get("apiGroups"), resource.group)
        and _listed(rule.get("apiVersions"), resource.version)
        and any(
            _resource_matches(entry, resource.plural, attributes.subresource)
            for entry in rule.get("resources") or []
        )
    )


def _listed(items: list[str] | None, wanted: str) -> bool:
    return any(item in ("*", wanted) for item in items or [])


def _resource_matches(entry: str, plural: str, subresource: str) -> bool:
    name, _, sub = entry.partition("/")
    return name in ("*", plural) and sub in ("*", subresource)


def _object_matches(selector: Obj | None, attributes: Attributes) -> bool:
    matches = _selector(selector)
    if matches is None:
        return True
    return any(matches(_labels(obj)) for obj in (attributes.obj, attributes.old) if obj is not None)


def _selector(selector: Mapping[str, Any] | None) -> Callable[[Mapping[str, str]], bool] | None:
    """A ``metav1.LabelSelector`` as a predicate over labels; None when it is empty (everything
    matches)."""
    terms = [f"{key}={value}" for key, value in ((selector or {}).get("matchLabels") or {}).items()]
    for expression in (selector or {}).get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = ",".join(expression.get("values") or [])
        terms.append(
            {
                "In": f"{key} in ({values})",
                "NotIn": f"{key} notin ({values})",
                "Exists": key,
                "DoesNotExist": f"!{key}",
            }[operator]
        )
    return label_selector(",".join(terms)) if terms else None


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


# The webhook configurations themselves ----------------------------------------------------------


def _with_defaults(resource: ResourceType, obj: Obj) -> Obj:
    """A configuration with the v1 defaults (``SetDefaults_ValidatingWebhook``,
    ``SetDefaults_MutatingWebhook``, ``SetDefaults_Rule``, ``SetDefaults_ServiceReference``)."""
    defaulted = copy.deepcopy(obj)
    for hook in defaulted.get("webhooks") or []:
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
        if resource.plural == MUTATING:
            hook.setdefault("reinvocationPolicy", "Never")
        for rule in hook.get("rules") or []:
            rule.setdefault("scope", "*")
        service = (hook.get("clientConfig") or {}).get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)
    return defaulted


def _validate_configuration(attributes: Attributes) -> None:
    """The v1 validation of a webhook configuration, as far as a test can go wrong with it."""
    obj = attributes.obj or {}
    errors: list[str] = []
    for index, hook in enumerate(obj.get("webhooks") or []):
        at = f"webhooks[{index}]"
        side_effects = hook.get("sideEffects")
        if side_effects is None:
            errors.append(
                f"{at}.sideEffects: Required value: must specify one of None, NoneOnDryRun"
            )
        elif side_effects not in ("None", "NoneOnDryRun"):
            errors.append(
                f'{at}.sideEffects: Unsupported value: "{side_effects}": supported values: '
                '"None", "NoneOnDryRun"'
            )
        timeout = hook.get("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
        if not 1 <= timeout <= 30:
            errors.append(
                f"{at}.timeoutSeconds: Invalid value: {timeout}: the timeout value must be "
                "between 1 and 30 seconds"
            )
        config = hook.get("clientConfig") or {}
        if ("url" in config) == ("service" in config):
            errors.append(
                f"{at}.clientConfig: Required value: exactly one of url or service is required"
            )
        elif "url" in config and urlsplit(config["url"]).scheme != "https":
            errors.append(
                f"{at}.clientConfig.url: Invalid value: \"{config['url']}\": 'https' is the only "
                "allowed URL scheme"
            )
        versions = hook.get("admissionReviewVersions") or []
        if not versions:
            errors.append(
                f"{at}.admissionReviewVersions: Required value: must specify one of v1, v1beta1"
            )
        elif not set(versions) & {"v1", "v1beta1"}:
            errors.append(
                f"{at}.admissionReviewVersions: Invalid value: {json.dumps(versions)}: must "
                "include at least one of v1, v1beta1"
            )
    if errors:
        kind = attributes.resource.kind
        listing = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
        raise ApiError(
            422,
            "Invalid",
            f'{kind}.{GROUP} "{attributes.name}" is invalid: {listing}',
            details={"name": attributes.name, "group": GROUP, "kind": kind},
        )
