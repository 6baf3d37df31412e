"""Who may do what: authentication, impersonation and RBAC as a real API server applies them, and
as the emulator does with ``rbac=True`` (``tests/k8s_emulator/rbac.py``), which a web console
reading the cluster *as* a user relies on.

The users are made up and impersonated from the admin's credentials (``Impersonate-User``), or a
ServiceAccount authenticating with a token of its TokenRequest; the Roles and RoleBindings live in
the test's namespaces, the ClusterRoles and ClusterRoleBindings are deleted afterwards. A real
server's RBAC authorizer reads the bindings from an informer's cache, so the first request that
a new binding allows is retried until it is (:func:`_once_allowed`); what no binding allows is
refused at once.

* The authorizer (k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/rbac.go, the rules matched by
  pkg/apis/rbac/v1/evaluation_helpers.go) allows a request when a rule of a role bound to the
  user allows its verb, group, resource (``resource/subresource``) and name: a RoleBinding in its
  namespace (to a Role, or to a ClusterRole), a ClusterRoleBinding anywhere.
* A refusal is 403 Forbidden, its message ``responsewriters.Forbidden``'s
  (k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go, ``forbiddenMessage``) in
  an ``errors.NewForbidden`` (k8s.io/apimachinery/pkg/api/errors/errors.go): ``<resource>[.<group>]
  ["<name>"] is forbidden: User "<user>" cannot <verb> resource "<resource>[/<subresource>]" in API
  group "<group>" in the namespace "<namespace>"`` (``at the cluster scope`` without one); its
  details name the group, the resource (as ``kind``) and the name.
* The verb is the request's (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go): a GET
  without a name is ``list``, ``watch`` with ``?watch=true``, and a ``metadata.name=`` field
  selector names the object.
* Impersonation (k8s.io/apiserver/pkg/endpoints/filters/impersonation.go) needs the verb
  ``impersonate`` on ``users`` and ``groups`` of the core group, by name; a refusal names the
  first one refused. (Kubernetes 1.35's alpha ``ConstrainedImpersonation`` gate, off by default,
  changes the verbs and so the message.)
* A token no authenticator knows is 401 Unauthorized (``filters.Unauthorized``,
  k8s.io/apiserver/pkg/endpoints/filters/authentication.go).
* A SelfSubjectAccessReview, which the bootstrap ``system:basic-user`` role lets every user
  create, says whether the user may; a SubjectAccessReview, whether another may, and needs
  ``create`` on subjectaccessreviews (k8s.io/kubernetes/pkg/registry/authorization/).
* Discovery and ``/version`` are open to every authenticated user (the bootstrap
  ``system:discovery`` and ``system:public-info-viewer`` roles,
  plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go).
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from podwright.core.cluster_resources import GROUP, VERSION
from tests.kube.support import (
    ApiServer,
    cluster_namespace,
    config_map,
    emulated,
    eventually,
    impersonating,
    pod,
    real,
    with_token,
)
from tests.node_sim.rest import RawAnswer, send

RBAC = "/apis/rbac.authorization.k8s.io/v1"
REVIEWS = "/apis/authorization.k8s.io/v1"


@pytest.fixture(params=["emulator", pytest.param("cluster", marks=pytest.mark.cluster)])
def api(request: pytest.FixtureRequest) -> Iterator[ApiServer]:
    """The emulator with RBAC on (``rbac=True``), or the real cluster."""
    if request.param == "cluster":
        request.getfixturevalue("real_cluster")
        yield from real()
    else:
        yield from emulated(rbac=True)


@pytest.fixture
def other_namespace(api: ApiServer) -> Iterator[str]:
    """A second namespace of the test's own, where its users are granted nothing."""
    yield from cluster_namespace(api.client)


def _name() -> str:
    return f"podwright-test-{uuid.uuid4().hex[:8]}"


def _created(api: ApiServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = api.send("POST", path, body)
    assert answer.status == 201, answer.body
    created: dict[str, Any] = answer.body
    return created


def _role(api: ApiServer, namespace: str, rules: list[dict[str, Any]]) -> str:
    name = _name()
    _created(
        api,
        f"{RBAC}/namespaces/{namespace}/roles",
        {"metadata": {"name": name}, "rules": rules},
    )
    return name


def _user(name: str) -> dict[str, str]:
    return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def _binding(
    api: ApiServer, namespace: str, role: str, subject: dict[str, str], kind: str = "Role"
) -> str:
    name = _name()
    _created(
        api,
        f"{RBAC}/namespaces/{namespace}/rolebindings",
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [subject],
        },
    )
    return name


@contextlib.contextmanager
def _cluster_wide(api: ApiServer, plural: str, body: dict[str, Any]) -> Iterator[str]:
    """A ClusterRole or ClusterRoleBinding of a unique name, deleted afterwards."""
    name = _name()
    _created(api, f"{RBAC}/{plural}", {**body, "metadata": {"name": name}})
    try:
        yield name
    finally:
        api.send("DELETE", f"{RBAC}/{plural}/{name}")


def _once_allowed(request: Callable[[], RawAnswer]) -> RawAnswer:
    """``request()``'s answer once RBAC no longer refuses it (a real server's authorizer and
    token authenticator read from caches a moment behind the writes)."""

    def answered() -> RawAnswer:
        answer = request()
        assert answer.status not in (401, 403), answer.body
        return answer

    return eventually(answered)


def _forbidden(message: str, **details: str) -> dict[str, Any]:
    """The Status of a 403 as a real server writes it."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }


def _cannot(user: str, verb: str, resource: str, group: str, namespace: str | None) -> str:
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return f'User "{user}" cannot {verb} resource "{resource}" in API group "{group}" {scope}'


def _as(api: ApiServer, user: str, *groups: str) -> Callable[..., RawAnswer]:
    """Requests made by the admin impersonating ``user`` in ``groups``."""
    headers = impersonating(user, *groups)

    def request(method: str, path: str, body: Any = None, **options: Any) -> RawAnswer:
        return api.send(method, path, body, headers=headers, **options)

    return request


def _configmaps(namespace: str | None) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" if namespace else "/api/v1/configmaps"


def test_a_role_lets_its_user_list_in_its_namespace_and_nowhere_else(
    api: ApiServer, other_namespace: str
) -> None:
    """The Role's namespace lists; another namespace and the cluster scope are 403 with the
    real messages; a verb the Role does not grant (get) is refused too, naming the object."""
    user = _name()
    role = _role(
        api, api.namespace, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]
    )
    _binding(api, api.namespace, role, _user(user))
    as_user = _as(api, user)

    listed = _once_allowed(lambda: as_user("GET", _configmaps(api.namespace)))
    assert listed.status == 200
    assert listed.body["kind"] == "ConfigMapList"

    elsewhere = as_user("GET", _configmaps(other_namespace))
    assert (elsewhere.status, elsewhere.body) == (
        403,
        _forbidden(
            "configmaps is forbidden: " + _cannot(user, "list", "configmaps", "", other_namespace),
            kind="configmaps",
        ),
    )
    everywhere = as_user("GET", _configmaps(None))
    assert (everywhere.status, everywhere.body) == (
        403,
        _forbidden(
            "configmaps is forbidden: " + _cannot(user, "list", "configmaps", "", None),
            kind="configmaps",
        ),
    )
    got = as_user("GET", f"{_configmaps(api.namespace)}/kube-root-ca.crt")
    assert (got.status, got.body) == (
        403,
        _forbidden(
            'configmaps "kube-root-ca.crt" is forbidden: '
            + _cannot(user, "get", "configmaps", "", api.namespace),
            name="kube-root-ca.crt",
            kind="configmaps",
        ),
    )


def test_workloads_of_a_namespace_not_granted_are_forbidden(
    api: ApiServer, podwright_crds: None, other_namespace: str
) -> None:
    """podwright's Workloads, a custom resource, are authorized by their group: what a console
    listing them as the user meets."""
    user = _name()
    role = _role(
        api,
        api.namespace,
        [{"apiGroups": [GROUP], "resources": ["workloads"], "verbs": ["get", "list", "watch"]}],
    )
    _binding(api, api.namespace, role, _user(user))
    as_user = _as(api, user)
    workloads = f"/apis/{GROUP}/{VERSION}/namespaces/{{}}/workloads"

    listed = _once_allowed(lambda: as_user("GET", workloads.format(api.namespace)))
    assert (listed.status, listed.body["items"]) == (200, [])
    refused = as_user("GET", workloads.format(other_namespace))
    assert (refused.status, refused.body) == (
        403,
        _forbidden(
            f"workloads.{GROUP} is forbidden: "
            + _cannot(user, "list", "workloads", GROUP, other_namespace),
            group=GROUP,
            kind="workloads",
        ),
    )


def test_a_cluster_role_bound_by_a_role_binding_grants_in_the_bindings_namespace_only(
    api: ApiServer, other_namespace: str
) -> None:
    user = _name()
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]
    with _cluster_wide(api, "clusterroles", {"rules": rules}) as cluster_role:
        _binding(api, api.namespace, cluster_role, _user(user), kind="ClusterRole")
        as_user = _as(api, user)
        assert _once_allowed(lambda: as_user("GET", _configmaps(api.namespace))).status == 200
        assert as_user("GET", _configmaps(other_namespace)).status == 403
        assert as_user("GET", _configmaps(None)).status == 403


def test_a_cluster_role_binding_grants_in_every_namespace(
    api: ApiServer, other_namespace: str
) -> None:
    """And a Group subject applies to every user of the group."""
    user, group = _name(), _name()
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]
    with (
        _cluster_wide(api, "clusterroles", {"rules": rules}) as cluster_role,
        _cluster_wide(
            api,
            "clusterrolebindings",
            {
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": cluster_role,
                },
                "subjects": [
                    {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": group}
                ],
            },
        ),
    ):
        in_group = _as(api, user, group)
        for path in (_configmaps(api.namespace), _configmaps(other_namespace), _configmaps(None)):
            assert _once_allowed(functools.partial(in_group, "GET", path)).status == 200
        assert _as(api, user)("GET", _configmaps(other_namespace)).status == 403


def test_resource_names_and_subresources_narrow_a_rule(api: ApiServer) -> None:
    """``resourceNames`` allows the objects named (a list too, when a ``metadata.name`` field
    selector names one of them); ``pods/status`` allows the status and not the pod, nor its
    log."""
    user = _name()
    api.client.create(config_map("one", api.namespace))
    api.client.create(config_map("two", api.namespace))
    api.client.create(pod("runner", api.namespace))
    role = _role(
        api,
        api.namespace,
        [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["one"],
                "verbs": ["get", "list"],
            },
            {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get"]},
        ],
    )
    _binding(api, api.namespace, role, _user(user))
    as_user = _as(api, user)
    configmaps, pods = _configmaps(api.namespace), f"/api/v1/namespaces/{api.namespace}/pods"

    assert _once_allowed(lambda: as_user("GET", f"{configmaps}/one")).status == 200
    two = as_user("GET", f"{configmaps}/two")
    assert (two.status, two.body["message"]) == (
        403,
        'configmaps "two" is forbidden: ' + _cannot(user, "get", "configmaps", "", api.namespace),
    )
    assert as_user("GET", configmaps).status == 403
    named = as_user("GET", configmaps, query={"fieldSelector": "metadata.name=one"})
    assert (named.status, [c["metadata"]["name"] for c in named.body["items"]]) == (200, ["one"])

    assert as_user("GET", f"{pods}/runner/status").status == 200
    for path, resource in ((f"{pods}/runner", "pods"), (f"{pods}/runner/log", "pods/log")):
        refused = as_user("GET", path)
        assert (refused.status, refused.body["message"]) == (
            403,
            'pods "runner" is forbidden: ' + _cannot(user, "get", resource, "", api.namespace),
        )


def test_a_watch_is_authorized_as_watch(api: ApiServer) -> None:
    """Listing does not let a user watch; once the Role has ``watch``, the watch is served."""
    user = _name()
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}
    role = _role(api, api.namespace, [rule])
    _binding(api, api.namespace, role, _user(user))
    as_user = _as(api, user)
    configmaps = _configmaps(api.namespace)
    listed = _once_allowed(lambda: as_user("GET", configmaps))

    refused = as_user("GET", configmaps, query={"watch": "true"})
    assert (refused.status, refused.body["message"]) == (
        403,
        "configmaps is forbidden: " + _cannot(user, "watch", "configmaps", "", api.namespace),
    )
    role_path = f"{RBAC}/namespaces/{api.namespace}/roles/{role}"
    updated = api.send(
        "PATCH",
        role_path,
        [{"op": "replace", "path": "/rules/0/verbs", "value": ["list", "watch"]}],
        content_type="application/json-patch+json",
    )
    assert updated.status == 200, updated.body
    after = {
        "watch": "true",
        "resourceVersion": listed.body["metadata"]["resourceVersion"],
        "timeoutSeconds": "1",
    }
    watched = _once_allowed(lambda: as_user("GET", configmaps, query=after))
    assert watched.status == 200


def test_impersonation_needs_the_impersonate_verb_on_each_user_and_group(api: ApiServer) -> None:
    """A ServiceAccount, with a token of its TokenRequest, allowed to impersonate one user (by
    ``resourceNames``): as that user it has the user's rights; another user, or a group it may
    not impersonate, is refused with the real message; as itself it has none of them."""
    user, stranger, group = _name(), _name(), _name()
    account = _name()
    _created(
        api, f"/api/v1/namespaces/{api.namespace}/serviceaccounts", {"metadata": {"name": account}}
    )
    requested = _created(
        api,
        f"/api/v1/namespaces/{api.namespace}/serviceaccounts/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    assert requested["kind"] == "TokenRequest"
    token = requested["status"]["token"]
    account_user = f"system:serviceaccount:{api.namespace}:{account}"
    role = _role(
        api, api.namespace, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]
    )
    _binding(api, api.namespace, role, _user(user))
    rules = [
        {
            "apiGroups": [""],
            "resources": ["users"],
            "resourceNames": [user],
            "verbs": ["impersonate"],
        }
    ]
    subject = {"kind": "ServiceAccount", "name": account, "namespace": api.namespace}
    configmaps = _configmaps(api.namespace)
    with (
        _cluster_wide(api, "clusterroles", {"rules": rules}) as cluster_role,
        _cluster_wide(
            api,
            "clusterrolebindings",
            {
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": cluster_role,
                },
                "subjects": [subject],
            },
        ),
        contextlib.closing(with_token(api.api_client, token)) as account_client,
    ):

        def request(headers: Sequence[tuple[str, str]]) -> RawAnswer:
            return send(account_client, "GET", configmaps, headers=headers)

        assert _once_allowed(lambda: request(impersonating(user))).status == 200

        as_itself = request(())
        assert (as_itself.status, as_itself.body["message"]) == (
            403,
            "configmaps is forbidden: "
            + _cannot(account_user, "list", "configmaps", "", api.namespace),
        )
        as_stranger = request(impersonating(stranger))
        assert (as_stranger.status, as_stranger.body) == (
            403,
            _forbidden(
                f'users "{stranger}" is forbidden: '
                + _cannot(account_user, "impersonate", "users", "", None),
                name=stranger,
                kind="users",
            ),
        )
        in_group = request(impersonating(user, group))
        assert (in_group.status, in_group.body) == (
            403,
            _forbidden(
                f'groups "{group}" is forbidden: '
                + _cannot(account_user, "impersonate", "groups", "", None),
                name=group,
                kind="groups",
            ),
        )


def test_a_token_no_one_issued_is_401_unauthorized(api: ApiServer) -> None:
    with contextlib.closing(with_token(api.api_client, f"{_name()}-no-such-token")) as client:
        answer = send(client, "GET", _configmaps(api.namespace))
    assert (answer.status, answer.body) == (
        401,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        },
    )


def _access(namespace: str, verb: str = "list") -> dict[str, str]:
    return {"namespace": namespace, "verb": verb, "group": GROUP, "resource": "workloads"}


def test_a_self_subject_access_review_says_what_the_user_may_do(
    api: ApiServer, other_namespace: str
) -> None:
    """What a console asks, as the user, to know where it may list Workloads: allowed with the
    binding that allows it as the reason, else not allowed (and no reason: RBAC has no
    opinion rather than a denial)."""
    user = _name()
    role = _role(
        api, api.namespace, [{"apiGroups": [GROUP], "resources": ["workloads"], "verbs": ["list"]}]
    )
    binding = _binding(api, api.namespace, role, _user(user))
    as_user = _as(api, user)

    def review(attributes: dict[str, str]) -> dict[str, Any]:
        answer = as_user(
            "POST",
            f"{REVIEWS}/selfsubjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes},
            },
        )
        assert answer.status == 201, answer.body
        assert answer.body["kind"] == "SelfSubjectAccessReview"
        status: dict[str, Any] = answer.body["status"]
        return status

    assert eventually(lambda: review(_access(api.namespace))["allowed"])
    assert review(_access(api.namespace)) == {
        "allowed": True,
        "reason": f'RBAC: allowed by RoleBinding "{binding}/{api.namespace}" of Role "{role}" '
        f'to User "{user}"',
    }
    assert review(_access(other_namespace)) == {"allowed": False}
    assert review(_access(api.namespace, "watch")) == {"allowed": False}
    assert review(_access("")) == {"allowed": False}


def test_a_subject_access_review_asks_for_another_and_needs_create_on_it(
    api: ApiServer, other_namespace: str
) -> None:
    """The admin may ask for any user (the groups given, and no ``system:authenticated``
    added); a user without ``create`` on subjectaccessreviews may not ask."""
    user = _name()
    role = _role(
        api, api.namespace, [{"apiGroups": [GROUP], "resources": ["workloads"], "verbs": ["list"]}]
    )
    _binding(api, api.namespace, role, _user(user))
    path = f"{REVIEWS}/subjectaccessreviews"

    def review(namespace: str) -> dict[str, Any]:
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "resourceAttributes": _access(namespace)},
        }
        answer = api.send("POST", path, body)
        assert answer.status == 201, answer.body
        status: dict[str, Any] = answer.body["status"]
        return status

    assert eventually(lambda: review(api.namespace)["allowed"])
    assert review(other_namespace) == {"allowed": False}
    refused = _as(api, user)(
        "POST", path, {"spec": {"user": user, "resourceAttributes": _access(api.namespace)}}
    )
    assert (refused.status, refused.body["message"]) == (
        403,
        "subjectaccessreviews.authorization.k8s.io is forbidden: "
        + _cannot(user, "create", "subjectaccessreviews", "authorization.k8s.io", None),
    )


def test_discovery_and_version_are_open_to_every_user(api: ApiServer) -> None:
    as_user = _as(api, _name())
    for path in ("/version", "/api", "/apis", "/api/v1"):
        assert as_user("GET", path).status == 200, path


def test_the_admin_may_do_anything(api: ApiServer) -> None:
    """The tests' own credentials (the emulator's admin; a real cluster's kubeconfig) are not
    narrowed: they list everywhere and review as allowed."""
    assert api.send("GET", _configmaps(None)).status == 200
    answer = api.send(
        "POST",
        f"{REVIEWS}/selfsubjectaccessreviews",
        {"spec": {"resourceAttributes": {"verb": "*", "group": "*", "resource": "*"}}},
    )
    assert (answer.status, answer.body["status"]["allowed"]) == (201, True)


def test_a_service_account_subject_without_a_namespace_is_in_the_bindings(
    api: ApiServer, other_namespace: str
) -> None:
    """``system:serviceaccount:<namespace>:<name>`` (impersonated: the admin may) is the
    ServiceAccount a RoleBinding of that namespace names without a namespace (``appliesToUser``,
    pkg/registry/rbac/validation/rule.go); the same name in another namespace is not it."""
    account = _name()
    role = _role(
        api, api.namespace, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]
    )
    _binding(api, api.namespace, role, {"kind": "ServiceAccount", "name": account})
    ours = _as(api, f"system:serviceaccount:{api.namespace}:{account}")
    assert _once_allowed(lambda: ours("GET", _configmaps(api.namespace))).status == 200
    theirs = f"system:serviceaccount:{other_namespace}:{account}"
    refused = _as(api, theirs)("GET", _configmaps(api.namespace))
    assert (refused.status, refused.body["message"]) == (
        403,
        "configmaps is forbidden: " + _cannot(theirs, "list", "configmaps", "", api.namespace),
    )


def test_a_binding_to_a_missing_role_adds_the_error_to_the_refusal(api: ApiServer) -> None:
    """The authorizer's reason for a refusal: the errors it met resolving the user's bindings
    (``RBAC: <aggregate>``, rbac.go), here the listers' NotFound of the singular resource."""
    user, missing = _name(), _name()
    _binding(api, api.namespace, missing, _user(user))
    refused = _as(api, user)("GET", _configmaps(api.namespace))
    assert (refused.status, refused.body["message"]) == (
        403,
        "configmaps is forbidden: "
        + _cannot(user, "list", "configmaps", "", api.namespace)
        + f': RBAC: role.rbac.authorization.k8s.io "{missing}" not found',
    )
