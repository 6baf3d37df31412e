"""Who a request is, and whether RBAC lets it: the emulator's authentication, impersonation and
authorization, on only when an :class:`~tests.k8s_emulator.Emulator` is made with ``rbac=True``.

Authentication (:meth:`Access.authenticate`). A request with no ``Authorization`` header is the
emulator's admin, :data:`ADMIN` (in ``system:masters``): it stands for a real cluster's admin
kubeconfig, whose client certificate the emulator (plain HTTP) cannot see, so that fixtures go on
installing CRDs and objects as they do without RBAC. ``Authorization: Bearer <token>`` is the user
the token was made for (:meth:`Access.add_user`, or a ServiceAccount's TokenRequest, see
:meth:`Access.token_request`) with the group ``system:authenticated`` added, as the
authenticator chain adds it (``group.NewAuthenticatedGroupAdder``,
k8s.io/apiserver/pkg/authentication/group/authenticated_group_adder.go). Any other
``Authorization`` (an unknown token) is ``401 Unauthorized``, a Status whose message and reason
are both ``Unauthorized``, as ``filters.Unauthorized`` answers an ``errors.NewUnauthorized
("Unauthorized")`` (k8s.io/apiserver/pkg/endpoints/filters/authentication.go): a real server
answers so to a bad token even with anonymous requests enabled (``union.NewFailOnError`` in
k8s.io/apiserver/pkg/authentication/request/union, wrapped around the anonymous authenticator).

Impersonation (:meth:`Access.impersonate`), as the legacy filter
k8s.io/apiserver/pkg/endpoints/filters/impersonation.go does it: ``Impersonate-User`` (a
``system:serviceaccount:<namespace>:<name>`` user is the ServiceAccount), ``Impersonate-Group``
(repeatable), ``Impersonate-Extra-<key>`` and ``Impersonate-Uid``; each is authorized for the
requester with verb ``impersonate`` on ``users``, ``groups``, ``serviceaccounts`` (core group ""),
``userextras/<key>`` or ``uids`` (group ``authentication.k8s.io``), named by the value. The first
refused is 403 with that check's message (``users "bob" is forbidden: User "x" cannot impersonate
resource "users" in API group "" at the cluster scope``). Then the request is the impersonated
user, with ``system:authenticated`` added unless a group given is ``system:authenticated`` or
``system:unauthenticated``; a ServiceAccount with no groups given is in ``system:serviceaccounts``
and ``system:serviceaccounts:<namespace>``. (Kubernetes 1.35 adds, behind its alpha
``ConstrainedImpersonation`` gate, off by default, other verbs and other messages: not emulated.)

Authorization (:class:`Authorizer`), as kube-apiserver's ``Node,RBAC`` chain answers a user that
is no node: the ``system:masters`` group is allowed everything (the privileged-groups authorizer,
k8s.io/kubernetes/pkg/kubeapiserver/authorizer/config.go); else the RBAC authorizer
(k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/rbac.go) visits the rules of every
ClusterRoleBinding, then of every RoleBinding of the request's namespace, whose subjects include
the user (``appliesTo`` in k8s.io/kubernetes/pkg/registry/rbac/validation/rule.go), a RoleBinding's
roleRef naming a Role of its namespace or a ClusterRole; a rule allows the request when its
verbs, API groups, resources (``resource/subresource``, ``*``, ``*/subresource``) and
resourceNames match (``VerbMatches`` ... ``ResourceNameMatches``,
k8s.io/kubernetes/pkg/apis/rbac/v1/evaluation_helpers.go), or for a non-resource URL its verbs
and ``nonResourceURLs`` (``/apis/*`` a prefix). A binding whose role does not exist adds
``RBAC: <errors>`` to the refusal's message, as the authorizer's reason. The bootstrap policy's
grants that every authenticated user has are built in (:data:`BOOTSTRAP_BINDINGS`: discovery,
``/version``, ``/openapi``, creating SelfSubjectAccessReviews) rather than stored, so that the
stored ClusterRoles and ClusterRoleBindings stay the test's own; the other bootstrap ClusterRoles
(``cluster-admin``, ``view``, ``edit``...) are not there: a test makes the roles it binds.

A refused request is ``403 Forbidden`` with the message of ``responsewriters.Forbidden``
(k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go, ``forbiddenMessage``, in an
``errors.NewForbidden``): ``workloads.podwright.dev is forbidden: User "alice" cannot list
resource "workloads" in API group "podwright.dev" in the namespace "team-b"`` (``... at the
cluster scope`` without a namespace; ``<resource> "<name>" is forbidden`` for a named object).

Not emulated: RBAC's escalation checks (a user that may create Roles may not grant more than it
has; ``pkg/registry/rbac/role/policybased``), anonymous requests (there is none: no header is the
admin), aggregated ClusterRoles.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from tests.k8s_emulator.errors import ApiError

SYSTEM_MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
RBAC_GROUP = "rbac.authorization.k8s.io"
AUTHORIZATION_GROUP = "authorization.k8s.io"
AUTHENTICATION_GROUP = "authentication.k8s.io"
SELF_SUBJECT_ACCESS_REVIEWS = f"/apis/{AUTHORIZATION_GROUP}/v1/selfsubjectaccessreviews"
SUBJECT_ACCESS_REVIEWS = f"/apis/{AUTHORIZATION_GROUP}/v1/subjectaccessreviews"
TOKEN_AUDIENCES = ["https://kubernetes.default.svc.cluster.local"]
"""A TokenRequest's audiences when it names none: the API server's ``--api-audiences`` (kind's)."""
TOKEN_SECONDS = 3600
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
"""What Go's ``strconv.ParseBool`` reads as true (``?watch=``)."""
_NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()


ADMIN = User("admin", (SYSTEM_MASTERS, AUTHENTICATED))
"""Who a request without an ``Authorization`` header is when RBAC is on."""


@dataclass(frozen=True)
class Attributes:
    """What a request asks, as ``authorizer.AttributesRecord`` holds it."""

    user: User
    verb: str
    resource_request: bool = True
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    """A non-resource request's URL path."""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


Rule = Mapping[str, Any]
"""A PolicyRule as stored: apiGroups, resources, resourceNames, verbs, nonResourceURLs."""

_DISCOVERY_URLS = ["/livez", "/readyz", "/healthz", "/version", "/version/"]
BOOTSTRAP_BINDINGS: tuple[tuple[str, tuple[str, ...], tuple[Rule, ...]], ...] = (
    (
        "system:basic-user",
        (AUTHENTICATED,),
        (
            {
                "apiGroups": [AUTHORIZATION_GROUP],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                "verbs": ["create"],
            },
            {
                "apiGroups": [AUTHENTICATION_GROUP],
                "resources": ["selfsubjectreviews"],
                "verbs": ["create"],
            },
        ),
    ),
    (
        "system:discovery",
        (AUTHENTICATED,),
        (
            {
                "nonResourceURLs": [
                    *_DISCOVERY_URLS,
                    *("/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*"),
                ],
                "verbs": ["get"],
            },
        ),
    ),
    (
        "system:public-info-viewer",
        (AUTHENTICATED, UNAUTHENTICATED),
        ({"nonResourceURLs": _DISCOVERY_URLS, "verbs": ["get"]},),
    ),
)
"""The bootstrap policy's ClusterRoleBindings to every user (each binding and its ClusterRole of
one name, to groups): k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy/
policy.go."""


def request_attributes(user: User, method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """A request's attributes, as ``RequestInfoFactory.NewRequestInfo`` reads them
    (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go): ``/api/v1/...`` and
    ``/apis/<group>/<version>/...`` are resource requests (anything shorter, and every other path,
    is a non-resource one, its verb the method in lower case); ``/namespaces/<ns>/<resource>``
    sets the namespace, and ``/namespaces/<ns>`` (with ``status`` or ``finalize``) is the
    Namespace ``<ns>`` *in* the namespace ``<ns>``; a GET without a name is ``list``, or
    ``watch`` with ``?watch=true``, named by a ``metadata.name=`` field selector; a DELETE
    without a name is ``deletecollection``."""
    parts = path.strip("/").split("/") if path.strip("/") else []
    if len(parts) < 3 or parts[0] not in ("api", "apis") or (parts[0] == "apis" and len(parts) < 4):
        return Attributes(user, method.lower(), resource_request=False, path=path)
    group = parts[1] if parts[0] == "apis" else ""
    parts = parts[3:] if parts[0] == "apis" else parts[2:]
    if parts[0] in ("watch", "proxy") and len(parts) > 1:
        verb, parts = parts[0], parts[1:]
    else:
        verb = {
            "POST": "create",
            "GET": "get",
            "HEAD": "get",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete",
        }.get(method, "")
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    resource = parts[0]
    name = parts[1] if len(parts) > 1 else ""
    subresource = parts[2] if len(parts) > 2 and verb != "proxy" else ""
    if not name and verb == "get":
        verb = "watch" if query.get("watch") in _TRUE else "list"
        name = _exact_name(query.get("fieldSelector") or "")
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(user, verb, True, group, resource, subresource, namespace, name)


def _exact_name(selector: str) -> str:
    """The name a field selector requires (``metadata.name=x``: ``RequiresExactMatch``), if a
    valid path segment (``path.IsValidPathSegmentName``)."""
    for term in selector.split(","):
        key, operator, value = term.partition("==")
        if not operator:
            key, operator, value = term.partition("=")
        if key.strip() == "metadata.name" and operator:
            value = value.strip()
            if value not in (".", "..") and "/" not in value and "%" not in value:
                return value
    return ""


def rule_allows(attributes: Attributes, rule: Rule) -> bool:
    """``RuleAllows`` (rbac.go) over the evaluation helpers of evaluation_helpers.go."""
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attributes.verb not in verbs:
        return False
    if not attributes.resource_request:
        return any(
            url in ("*", attributes.path)
            or (url.endswith("*") and attributes.path.startswith(url.rstrip("*")))
            for url in rule.get("nonResourceURLs") or []
        )
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attributes.group not in groups:
        return False
    combined = attributes.resource
    if attributes.subresource:
        combined = f"{attributes.resource}/{attributes.subresource}"
    if not any(
        resource in ("*", combined)
        or (attributes.subresource and resource == f"*/{attributes.subresource}")
        for resource in rule.get("resources") or []
    ):
        return False
    names = rule.get("resourceNames") or []
    return not names or attributes.name in names


def _is_service_account(namespace: str, name: str, username: str) -> bool:
    return username == f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def _subject_applies(user: User, subject: Mapping[str, Any], namespace: str) -> bool:
    """``appliesToUser`` (rule.go): a ServiceAccount subject without a namespace is in the
    binding's (none for a ClusterRoleBinding: it applies to no one)."""
    kind, name = subject.get("kind"), subject.get("name", "")
    if kind == "User":
        return bool(user.name == name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        account_namespace = subject.get("namespace") or namespace
        return bool(account_namespace) and _is_service_account(account_namespace, name, user.name)
    return False


def _describe_subject(subject: Mapping[str, Any], namespace: str) -> str:
    """``describeSubject`` (rule.go)."""
    kind, name = subject.get("kind", ""), subject.get("name", "")
    if kind == "ServiceAccount":
        name = f"{name}/{subject.get('namespace') or namespace}"
    return f"{kind} {go_quote(name)}"


def go_quote(text: str) -> str:
    """Go's ``%q`` of a printable string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Authorizer:
    """The ``system:masters`` shortcut, then RBAC over the bindings ``objects`` lists: a
    function of (plural, namespace or None for all) to the stored objects of
    ``rbac.authorization.k8s.io``."""

    def __init__(self, objects: Callable[[str, str | None], list[dict[str, Any]]]) -> None:
        self._objects = objects

    def authorize(self, attributes: Attributes) -> Decision:
        if SYSTEM_MASTERS in attributes.user.groups:
            return Decision(True)
        errors: list[str] = []
        for source, rules in self._rules_for(attributes.user, attributes.namespace, errors):
            if any(rule_allows(attributes, rule) for rule in rules):
                return Decision(True, f"RBAC: allowed by {source}")
        if not errors:
            return Decision(False)
        # utilerrors.NewAggregate(...).Error(): one message as is, several deduplicated in [].
        unique = list(dict.fromkeys(errors))
        return Decision(
            False, "RBAC: " + (unique[0] if len(unique) == 1 else f"[{', '.join(unique)}]")
        )

    def _rules_for(
        self, user: User, namespace: str, errors: list[str]
    ) -> Iterable[tuple[str, Sequence[Rule]]]:
        """``VisitRulesFor`` (rule.go): (a description of the binding, its role's rules)."""
        for name, groups, granted in BOOTSTRAP_BINDINGS:
            group = next((g for g in groups if g in user.groups), None)
            if group is not None:
                yield (
                    f'ClusterRoleBinding "{name}" of ClusterRole "{name}" to Group "{group}"',
                    granted,
                )
        bindings = [("", b) for b in self._objects("clusterrolebindings", None)]
        if namespace:
            bindings += [(namespace, b) for b in self._objects("rolebindings", namespace)]
        for binding_namespace, binding in bindings:
            subject = next(
                (
                    s
                    for s in binding.get("subjects") or []
                    if _subject_applies(user, s, binding_namespace)
                ),
                None,
            )
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            rules = self._role_rules(ref, binding_namespace, errors)
            if rules is None:
                continue
            name = binding["metadata"]["name"]
            kind = "RoleBinding" if binding_namespace else "ClusterRoleBinding"
            if binding_namespace:
                name = f"{name}/{binding_namespace}"
            source = (
                f"{kind} {go_quote(name)} of {ref.get('kind', '')} {go_quote(ref.get('name', ''))}"
                f" to {_describe_subject(subject, binding_namespace)}"
            )
            yield source, rules

    def _role_rules(
        self, ref: Mapping[str, Any], namespace: str, errors: list[str]
    ) -> Sequence[Rule] | None:
        """``GetRoleReferenceRules`` (rule.go); a missing role is the listers' NotFound, named by
        the singular resource (``role.rbac.authorization.k8s.io "x" not found``)."""
        kind, name = ref.get("kind"), ref.get("name", "")
        if kind not in ("Role", "ClusterRole"):
            errors.append(f"unsupported role reference kind: {go_quote(str(kind))}")
            return None
        roles = (
            self._objects("roles", namespace)
            if kind == "Role"
            else self._objects("clusterroles", None)
        )
        for role in roles:
            if role["metadata"]["name"] == name:
                rules: Sequence[Rule] = role.get("rules") or []
                return rules
        errors.append(f"{kind.lower()}.{RBAC_GROUP} {go_quote(name)} not found")
        return None


_SANITIZE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def forbidden(attributes: Attributes, reason: str) -> ApiError:
    """``responsewriters.Forbidden``'s answer: ``forbiddenMessage`` (HTML-escaped), ``: reason``
    when there is one, in an ``errors.NewForbidden`` of the request's group, resource and name
    (k8s.io/apimachinery/pkg/api/errors/errors.go)."""
    user = go_quote(attributes.user.name)
    if not attributes.resource_request:
        message = f"User {user} cannot {attributes.verb} path {go_quote(attributes.path)}"
    else:
        resource = attributes.resource
        if attributes.subresource:
            resource = f"{resource}/{attributes.subresource}"
        scope = (
            f"in the namespace {go_quote(attributes.namespace)}"
            if attributes.namespace
            else "at the cluster scope"
        )
        message = (
            f"User {user} cannot {attributes.verb} resource {go_quote(resource)} in API group "
            f"{go_quote(attributes.group)} {scope}"
        )
    error = message.translate(_SANITIZE) + (f": {reason}" if reason else "")
    group, plural, name = attributes.group, attributes.resource, attributes.name
    qualified = f"{plural}.{group}" if group else plural
    if not group and not plural:
        text = f"forbidden: {error}"
    elif not name:
        text = f"{qualified} is forbidden: {error}"
    else:
        text = f"{qualified} {go_quote(name)} is forbidden: {error}"
    details = {
        key: value for key, value in (("name", name), ("group", group), ("kind", plural)) if value
    }
    return ApiError(403, "Forbidden", text, details=details)


UNAUTHORIZED = ApiError(401, "Unauthorized", "Unauthorized")


class HeaderLookup(Protocol):
    """What :meth:`Access.impersonate` reads of a request's headers (``email.message.Message``,
    as ``http.server`` holds them)."""

    def get(self, name: str, failobj: None = None) -> str | None: ...

    def get_all(self, name: str, failobj: None = None) -> list[str] | None: ...

    def keys(self) -> list[str]: ...


@dataclass
class Access:
    """An emulator's users (by token) and its authorizer; ``enabled`` when made with
    ``rbac=True`` (else nothing is checked: every request is allowed, as today)."""

    authorizer: Authorizer
    enabled: bool = False
    _tokens: dict[str, User] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_user(self, name: str, groups: Iterable[str] = (), token: str | None = None) -> str:
        """A bearer token for ``name`` in ``groups`` (and ``system:authenticated``)."""
        token = token or f"emulator-{secrets.token_hex(12)}"
        user_groups = tuple(groups)
        if AUTHENTICATED not in user_groups:
            user_groups += (AUTHENTICATED,)
        with self._lock:
            self._tokens[token] = User(name, user_groups)
        return token

    def authenticate(self, authorization: str | None) -> User:
        if not authorization:
            return ADMIN
        scheme, _, token = authorization.strip().partition(" ")
        with self._lock:
            user = self._tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise UNAUTHORIZED
        return user

    def authorize(self, attributes: Attributes) -> Decision:
        if not self.enabled:
            return Decision(True)  # the AlwaysAllow authorizer's answer
        return self.authorizer.authorize(attributes)

    def require(self, attributes: Attributes) -> None:
        """Nothing when ``attributes`` are allowed; else the 403 a real server answers."""
        decision = self.authorize(attributes)
        if not decision.allowed:
            raise forbidden(attributes, decision.reason)

    def impersonate(self, requester: User, headers: HeaderLookup) -> User:
        """The user the request acts as: ``requester``, or whom its impersonation headers name
        once each is allowed (see the module's docstring)."""
        requested = headers.get("Impersonate-User") or ""
        groups_given = list(headers.get_all("Impersonate-Group") or [])
        extras = [
            (key[len("Impersonate-Extra-") :].lower(), value)
            for key in dict.fromkeys(headers.keys())
            if key.lower().startswith("impersonate-extra-")
            for value in headers.get_all(key) or []
        ]
        uid = headers.get("Impersonate-Uid") or ""
        if not requested:
            if groups_given or extras or uid:
                raise ApiError(
                    500, "InternalError", "requested groups, extras or a uid without a user"
                )
            return requester
        checks: list[Attributes] = []
        groups: list[str] = []
        service_account = _split_service_account(requested)
        if service_account is not None:
            namespace, name = service_account
            checks.append(
                Attributes(
                    requester,
                    "impersonate",
                    resource="serviceaccounts",
                    namespace=namespace,
                    name=name,
                )
            )
            if not groups_given:
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
        else:
            checks.append(Attributes(requester, "impersonate", resource="users", name=requested))
        for group in groups_given:
            checks.append(Attributes(requester, "impersonate", resource="groups", name=group))
            groups.append(group)
        for key, value in extras:
            checks.append(
                Attributes(
                    requester,
                    "impersonate",
                    group=AUTHENTICATION_GROUP,
                    resource="userextras",
                    subresource=key,
                    name=value,
                )
            )
        if uid:
            checks.append(
                Attributes(
                    requester, "impersonate", group=AUTHENTICATION_GROUP, resource="uids", name=uid
                )
            )
        for check in checks:
            self.require(check)
        if requested != ANONYMOUS:
            if AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
                groups.append(AUTHENTICATED)
        elif UNAUTHENTICATED not in groups:
            groups.append(UNAUTHENTICATED)
        return User(requested, tuple(groups))

    def review(self, user: User, path: str, review: Any) -> dict[str, Any]:
        """A SelfSubjectAccessReview (for ``user``) or a SubjectAccessReview (for its
        ``spec.user`` and ``spec.groups``, nothing added) answered with its ``status``
        (``allowed``; ``denied`` never, RBAC having no deny; ``reason`` when there is one), as
        k8s.io/kubernetes/pkg/registry/authorization/{self,}subjectaccessreview/rest.go do."""
        kind = (
            "SelfSubjectAccessReview"
            if path == SELF_SUBJECT_ACCESS_REVIEWS
            else "SubjectAccessReview"
        )
        if not isinstance(review, dict):
            raise ApiError(400, "BadRequest", f"the body of a {kind} is not an object")
        given = review.get("spec")
        spec: dict[str, Any] = given if isinstance(given, dict) else {}
        if kind == "SubjectAccessReview":
            user = User(spec.get("user") or "", tuple(spec.get("groups") or ()))
            if not user.name and not user.groups:
                raise _invalid(
                    kind,
                    'spec.user: Invalid value: "": at least one of user or group must be specified',
                )
        resource: dict[str, str] | None = spec.get("resourceAttributes")
        non_resource: dict[str, str] | None = spec.get("nonResourceAttributes")
        if resource is not None:
            attributes = Attributes(
                user,
                resource.get("verb", ""),
                group=resource.get("group", ""),
                resource=resource.get("resource", ""),
                subresource=resource.get("subresource", ""),
                namespace=resource.get("namespace", ""),
                name=resource.get("name", ""),
            )
        elif non_resource is not None:
            attributes = Attributes(
                user,
                non_resource.get("verb", ""),
                resource_request=False,
                path=non_resource.get("path", ""),
            )
        else:
            raise _invalid(
                kind,
                'spec.resourceAttributes: Invalid value: "null": exactly one of '
                "nonResourceAttributes or resourceAttributes must be specified",
            )
        decision = self.authorize(attributes)
        status: dict[str, Any] = {"allowed": decision.allowed}
        if decision.reason:
            status["reason"] = decision.reason
        return {
            **review,
            "kind": kind,
            "apiVersion": f"{AUTHORIZATION_GROUP}/v1",
            "metadata": review.get("metadata") or {},
            "spec": spec,
            "status": status,
        }

    def token_request(
        self, namespace: str, name: str, request: Any, now: datetime
    ) -> dict[str, Any]:
        """A ServiceAccount's TokenRequest (``POST .../serviceaccounts/<name>/token``) answered
        with a bearer token for ``system:serviceaccount:<namespace>:<name>`` in
        ``system:serviceaccounts`` and ``system:serviceaccounts:<namespace>``, the groups the
        service account token authenticator gives (``serviceaccount.MakeGroupNames``,
        k8s.io/apiserver/pkg/authentication/serviceaccount/util.go). The token is opaque (a real
        one is a JWT, which clients do not read either)."""
        spec = dict((request or {}).get("spec") or {}) if isinstance(request, dict) else {}
        spec.setdefault("audiences", list(TOKEN_AUDIENCES))
        spec.setdefault("expirationSeconds", TOKEN_SECONDS)
        spec.setdefault("boundObjectRef", None)
        token = self.add_user(
            f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}"),
        )
        expiry = now + timedelta(seconds=int(spec["expirationSeconds"]))
        return {
            "kind": "TokenRequest",
            "apiVersion": f"{AUTHENTICATION_GROUP}/v1",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
            "status": {
                "token": token,
                "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        }


def _invalid(kind: str, problem: str) -> ApiError:
    """A review the validation refuses (``ValidateSubjectAccessReview``,
    k8s.io/kubernetes/pkg/apis/authorization/validation/validation.go)."""
    return ApiError(422, "Invalid", f'{kind}.{AUTHORIZATION_GROUP} "" is invalid: {problem}')


def _split_service_account(username: str) -> tuple[str, str] | None:
    """``serviceaccount.SplitUsername``: (namespace, name) of a service account's user name."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    parts = username[len(SERVICE_ACCOUNT_PREFIX) :].split(":")
    if len(parts) != 2 or not all(parts):
        return None
    return parts[0], parts[1]
