"""``podwright install`` and ``podwright uninstall``: podwright's objects in a cluster, put in place
and taken away.

``install`` applies what :mod:`podwright.core.install_manifests` makes (``deploy/install.yaml``
is the same, for ``kubectl apply --server-side -f``) with server-side apply, as field manager
``podwright-install`` taking over conflicting fields (as ``--force-conflicts`` does): the CRDs
first, waiting until the API server serves them (``Established``), then the rest in order; then
it waits until the operator is ready: its Deployment has every replica updated, ready and
available, and the webhook configurations carry the CA bundle the operator writes into them
(until then the API server refuses Workloads and policies). ``--dry-run`` sends every object as
a server-side dry run (``dryRun=All``): the API server checks it, admission included, and stores
nothing; ``-o yaml|json`` prints the objects without a cluster.

``uninstall`` never strands a finalizer. It deletes the webhook configurations first (so that
nothing refuses the writes that follow), then every Workload, and waits while the operator
finalizes them (aborting their tasks, removing what they launched). The Workloads still there
when ``--timeout`` ends, or at once when no operator replica is available, lose podwright's
finalizer (``podwright.dev/workload``, by a JSON merge patch conditional on the version read),
and so do the resources they own, of podwright's (``podwright.dev/finalizer``): nobody is left
to finalize them. Then the operator's Deployment, Service and RBAC objects, the PriorityClasses
it installed, the FUSE proxy, its namespace, and last the CRDs (unless ``--keep-crds``) go.

Exit status: 0 done; 2 bad input (an option, the kubeconfig); 5 the API server refused an
object, or what was waited for did not happen within ``--timeout`` (the message names what is
not ready, or not gone); 6 the API server gave no answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

import click

from podwright.adapters.documents import dump_yaml
from podwright.adapters.kubernetes import KubernetesClient
from podwright.api.backends import ClusterAccess, cluster_client
from podwright.cli.common import SINGLE_WEBHOOK_HELP, BadInput, Unavailable, kubeconfig_options
from podwright.cli.executor_command import DURATION
from podwright.core.cluster_resources import API_VERSION, WORKLOAD_FINALIZER, WORKLOAD_KIND
from podwright.core.install_manifests import (
    DEFAULT_IMAGE,
    DEFAULT_NAMESPACE,
    OPERATOR,
    PART_OF,
    PART_OF_LABEL,
    InstallSettings,
    InstallSettingsError,
    install_manifests,
    is_custom_resource_definition,
)
from podwright.core.lifecycle.objects import integer, items, section, text
from podwright.core.render.priority_classes import MANAGED_BY_LABEL
from podwright.core.webhook_configurations import (
    MUTATING_KIND,
    PODWRIGHT_WEBHOOKS,
    VALIDATING_KIND,
)
from podwright.engine.config import FINALIZER, MANAGED_BY
from podwright.engine.kubernetes_port import (
    ApiConnectionError,
    ConflictError,
    KubernetesError,
    NamespaceNotFoundError,
    NotFoundError,
    ObjectRef,
    PatchType,
)
from podwright.engine.plugins import default_plugins
from podwright.engine.workload_tasks import without_finalizer_patch

FIELD_MANAGER = "podwright-install"
"""The field manager of what ``podwright install`` applies (kubectl's is ``kubectl``)."""
POLL_SECONDS = 0.5
"""How often a wait looks again."""
_OPTIONS = {
    "namespace": "--namespace",
    "image": "--image",
    "replicas": "--replicas",
    "fuse_proxy_namespace": "--namespace",
    "image_pull_policy": "--image-pull-policy",
    "single_webhook": "--single-webhook",
    "console_auth_proxy": "--console-auth-proxy",
}
"""The option that gives each setting."""
_CRD_API_VERSION = "apiextensions.k8s.io/v1"
_COMPANION_KINDS = (("v1", "Service"), ("v1", "PersistentVolumeClaim"))
"""Kinds a Workload's task makes beside its plugins' (a workspace's Service, its claims)."""


def _settings(**options: Any) -> InstallSettings:
    try:
        return InstallSettings(**options)
    except InstallSettingsError as error:
        raise BadInput(f"{_OPTIONS[error.field]}: {error.problem}") from error


def _namespace_option(
    help_text: str, default: str | None = DEFAULT_NAMESPACE
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    return click.option(
        "-n",
        "--namespace",
        metavar="NS",
        default=default,
        show_default=default is not None,
        help=help_text,
    )


def _timeout_option(
    default: str, help_text: str
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    return click.option(
        "--timeout",
        type=DURATION,
        default=default,
        show_default=True,
        help=f"{help_text} (a Go duration: 90s, 5m).",
    )


# install --------------------------------------------------------------------------------------


@click.command("install")
@kubeconfig_options
@click.option(
    "--dry-run",
    is_flag=True,
    help="Send every object as a server-side dry run (dryRun=All): the API server checks it, "
    "admission included, and stores nothing.",
)
@click.option(
    "--with-fuse-proxy",
    is_flag=True,
    help="Install the FUSE proxy too: a privileged DaemonSet on every Linux node, in a "
    "namespace of its own, that lets unprivileged pods mount FUSE file systems.",
)
@click.option(
    "--image",
    metavar="IMAGE",
    default=DEFAULT_IMAGE,
    show_default=True,
    help="podwright's image, for the operator and the FUSE proxy.",
)
@click.option(
    "--image-pull-policy",
    type=click.Choice(["Always", "IfNotPresent", "Never"]),
    default="IfNotPresent",
    show_default=True,
    help="The containers' imagePullPolicy.",
)
@click.option(
    "--replicas",
    type=int,
    default=2,
    show_default=True,
    help="Operator replicas: each serves the webhooks, the leader reconciles.",
)
@click.option("--single-webhook", is_flag=True, help=SINGLE_WEBHOOK_HELP)
@click.option(
    "--console",
    is_flag=True,
    help="The operator serves the web console behind the Service podwright-console, read-only "
    "for the token of the Secret podwright-console (key token).",
)
@click.option(
    "--console-auth-proxy",
    is_flag=True,
    help="With --console: trust the identity an authenticating proxy sends with the Secret's "
    "proxy-secret (oauth2-proxy: see the README), acting as that person.",
)
@_namespace_option("The operator's namespace, podwright's own (uninstall deletes it).")
@_timeout_option("5m", "How long to wait for the CRDs, then for the operator, to be ready")
@click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Wait until the operator is ready: every replica available, its CA in the webhook "
    "configurations.",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["yaml", "json"]),
    default=None,
    help="Print the objects (YAML documents, or a JSON v1 List) instead of applying them; no "
    "cluster is needed.",
)
def install_command(
    *,
    kubeconfig: str | None,
    context: str | None,
    dry_run: bool,
    with_fuse_proxy: bool,
    image: str,
    image_pull_policy: str,
    replicas: int,
    single_webhook: bool,
    console: bool,
    console_auth_proxy: bool,
    namespace: str,
    timeout: timedelta,
    wait: bool,
    output: str | None,
) -> None:
    """Install podwright in a cluster and wait until its operator is ready.

    Applies, with server-side apply (field manager podwright-install), the CRDs of podwright.dev
    (then waits until they are Established), the operator's namespace, ServiceAccount, RBAC
    (and the podwright-viewer, -editor and -admin roles aggregated into view, edit and admin),
    the default profile's PriorityClasses, the webhook Service, the operator's Deployment and
    the webhook configurations; with --with-fuse-proxy, the FUSE proxy's DaemonSet. The same
    objects as deploy/install.yaml. Until the operator writes its CA into the webhook
    configurations, the API server refuses Workloads and policies.
    """
    settings = _settings(
        namespace=namespace,
        image=image,
        replicas=replicas,
        with_fuse_proxy=with_fuse_proxy,
        image_pull_policy=image_pull_policy,
        single_webhook=single_webhook,
        console=console,
        console_auth_proxy=console_auth_proxy,
    )
    manifests = install_manifests(settings)
    if output is not None:
        if dry_run or kubeconfig or context:
            raise click.UsageError(
                "-o prints the objects without a cluster: --dry-run, --kubeconfig and --context "
                "go without it"
            )
        _print(manifests, output)
        return
    with cluster_client(ClusterAccess(kubeconfig, context)) as client:
        if dry_run:
            _check(client, manifests)
            return
        crds = [manifest for manifest in manifests if is_custom_resource_definition(manifest)]
        for manifest in crds:
            _apply(client, manifest)
        _wait_for(
            timeout,
            lambda: _crds_not_established(client, crds),
            "the CRDs to be Established",
        )
        for manifest in manifests:
            if not is_custom_resource_definition(manifest):
                _apply(client, manifest)
        if not wait:
            return
        _wait_for(
            timeout,
            _progress(lambda: _operator_not_ready(client, settings)),
            "the operator to be ready",
        )
        click.echo(
            f"podwright is ready: deployment.apps/{OPERATOR} in {settings.namespace} has "
            f"{settings.replicas} of {settings.replicas} replicas available, and the webhook "
            "configurations trust its CA"
        )


def _print(manifests: list[dict[str, Any]], output: str) -> None:
    if output == "json":
        listing = {"apiVersion": "v1", "kind": "List", "items": manifests}
        click.echo(json.dumps(listing, indent=2))
    else:
        click.echo("---\n".join(dump_yaml(manifest) for manifest in manifests), nl=False)


def shown(obj: Mapping[str, Any]) -> str:
    """An object as kubectl names it: ``deployment.apps/podwright-operator``."""
    kind, name = text(obj, "kind").lower(), text(section(obj, "metadata"), "name")
    group = text(obj, "apiVersion").rpartition("/")[0]
    return f"{kind}.{group}/{name}" if group else f"{kind}/{name}"


def _apply(client: KubernetesClient, manifest: dict[str, Any]) -> None:
    try:
        client.apply(manifest, field_manager=FIELD_MANAGER)
    except KubernetesError as error:
        if isinstance(error, ApiConnectionError):
            raise
        raise Unavailable(f"{shown(manifest)}: the API server refused it: {error.message}") from (
            error
        )
    click.echo(f"{shown(manifest)} applied")


def _check(client: KubernetesClient, manifests: list[dict[str, Any]]) -> None:
    """Every object as a server-side dry run; every refusal listed, then exit status 5."""
    refusals = []
    for manifest in manifests:
        try:
            client.apply(manifest, field_manager=FIELD_MANAGER, dry_run=True)
        except NamespaceNotFoundError:
            click.echo(
                f"{shown(manifest)} not checked (dry run): its namespace "
                f"{text(section(manifest, 'metadata'), 'namespace')} does not exist yet "
                "(install creates it first)"
            )
            continue
        except KubernetesError as error:
            if isinstance(error, ApiConnectionError):
                raise
            refusals.append(f"{shown(manifest)}: {error.message}")
            continue
        click.echo(f"{shown(manifest)} checked (dry run)")
    if refusals:
        raise Unavailable("\n".join([*refusals, "the API server would refuse these (dry run)"]))


def _wait_for(timeout: timedelta, problems: Callable[[], list[str]], what: str) -> None:
    """Wait until ``problems()`` names none, or ``timeout`` ends (then :class:`Unavailable`
    naming them)."""
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        found = problems()
        if not found:
            return
        if time.monotonic() >= deadline:
            raise Unavailable(
                "\n".join([f"after {_duration(timeout)}, still waiting for {what}:", *found])
            )
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))


def _progress(problems: Callable[[], list[str]]) -> Callable[[], list[str]]:
    """``problems``, whose first one is printed whenever it changes (what is waited for)."""
    last: list[str] = []

    def checked() -> list[str]:
        found = problems()
        if found and found[:1] != last[:1]:
            click.echo(f"waiting: {found[0]}")
        last[:] = found
        return found

    return checked


def _duration(timeout: timedelta) -> str:
    seconds = int(timeout.total_seconds())
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes}m{seconds}s" if minutes else f"{seconds}s"


def _crds_not_established(client: KubernetesClient, crds: Sequence[Mapping[str, Any]]) -> list[str]:
    problems = []
    for crd in crds:
        name = text(section(crd, "metadata"), "name")
        try:
            stored = client.get(ObjectRef(_CRD_API_VERSION, "CustomResourceDefinition", "", name))
        except NotFoundError:
            problems.append(f"{shown(crd)}: not found")
            continue
        established = _condition(stored, "Established")
        if text(established, "status") != "True":
            reason = text(established, "message") or "no Established condition yet"
            problems.append(f"{shown(crd)}: not Established: {reason}")
    return problems


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    for condition in items(section(obj, "status"), "conditions"):
        if condition.get("type") == kind:
            return condition
    return {}


def rollout_problem(deployment: Mapping[str, Any]) -> str | None:
    """Why a Deployment is not rolled out and ready yet (None: it is), as ``kubectl rollout
    status`` judges it (``DeploymentStatusViewer`` in kubectl ``pkg/polymorphichelpers/
    rollout_status.go``), and every wanted replica ready too."""
    metadata, spec, status = (section(deployment, key) for key in ("metadata", "spec", "status"))
    wanted = integer(spec, "replicas")
    wanted = 1 if wanted is None else wanted
    observed = integer(status, "observedGeneration") or 0
    if (integer(metadata, "generation") or 0) > observed:
        return "the deployment controller has not seen the latest spec yet"
    progressing = _condition(deployment, "Progressing")
    if text(progressing, "reason") == "ProgressDeadlineExceeded":
        return f"its rollout exceeded its progress deadline: {text(progressing, 'message')}"
    updated = integer(status, "updatedReplicas") or 0
    if updated < wanted:
        return f"{updated} of {wanted} replicas updated"
    total = integer(status, "replicas") or 0
    if total > updated:
        return f"{total - updated} old replicas pending termination"
    available = integer(status, "availableReplicas") or 0
    if available < updated:
        return f"{available} of {updated} updated replicas available"
    ready = integer(status, "readyReplicas") or 0
    if ready < wanted:
        return f"{ready} of {wanted} replicas ready"
    return None


def pod_problems(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """What keeps each pod that is not ready from being so: its phase, and each container's
    waiting or termination reason."""
    problems = []
    for pod in pods:
        status = section(pod, "status")
        if text(_condition(pod, "Ready"), "status") == "True":
            continue
        reasons = []
        for container in items(status, "containerStatuses"):
            state = section(container, "state")
            for kind in ("waiting", "terminated"):
                if state.get(kind) is not None:
                    detail = section(state, kind)
                    why = text(detail, "reason") or kind
                    message = text(detail, "message")
                    reasons.append(
                        f"{text(container, 'name')} {why}" + (f": {message}" if message else "")
                    )
        scheduled = _condition(pod, "PodScheduled")
        if text(scheduled, "status") == "False":
            reasons.append(
                f"unscheduled: {text(scheduled, 'message') or text(scheduled, 'reason')}"
            )
        phase = text(status, "phase") or "Pending"
        listed = f" ({'; '.join(reasons)})" if reasons else ""
        problems.append(f"pod/{text(section(pod, 'metadata'), 'name')}: {phase}, not ready{listed}")
    return problems


def _operator_not_ready(client: KubernetesClient, settings: InstallSettings) -> list[str]:
    name = f"deployment.apps/{OPERATOR}"
    try:
        deployment = client.get(ObjectRef("apps/v1", "Deployment", settings.namespace, OPERATOR))
    except NotFoundError:
        return [f"{name}: not found in {settings.namespace}"]
    problem = rollout_problem(deployment)
    if problem is not None:
        selector = ",".join(
            f"{key}={value}"
            for key, value in section(deployment, "spec", "selector", "matchLabels").items()
        )
        pods, _version = client.list_objects(
            "v1", "Pod", namespace=settings.namespace, label_selector=selector
        )
        return [f"{name}: {problem}", *pod_problems(pods)]
    return _bundles_missing(client)


def _bundles_missing(client: KubernetesClient) -> list[str]:
    """The podwright webhooks that do not trust a CA yet (the operator writes its bundle)."""
    problems = []
    for kind in (MUTATING_KIND, VALIDATING_KIND):
        ref = ObjectRef("admissionregistration.k8s.io/v1", kind, "", "podwright")
        try:
            configuration = client.get(ref)
        except NotFoundError:
            problems.append(f"{kind.lower()}.admissionregistration.k8s.io/podwright: not found")
            continue
        for hook in items(configuration, "webhooks"):
            if text(hook, "name") in PODWRIGHT_WEBHOOKS and not text(
                section(hook, "clientConfig"), "caBundle"
            ):
                problems.append(
                    f"{shown(configuration)}: webhook {text(hook, 'name')} has no CA bundle yet "
                    "(the operator writes its CA's once it serves)"
                )
    return problems


# uninstall ------------------------------------------------------------------------------------


@click.command("uninstall")
@kubeconfig_options
@_namespace_option(
    "The operator's namespace, deleted if install made it podwright's (default: its "
    f"ServiceAccount's, as the ClusterRoleBinding {OPERATOR} names it; else {DEFAULT_NAMESPACE}).",
    default=None,
)
@_timeout_option(
    "2m",
    "How long the operator may take to finalize the Workloads, and the namespace and CRDs to go",
)
@click.option(
    "--keep-crds",
    is_flag=True,
    help="Keep the CRDs, and with them every policy, asset and cluster profile.",
)
@click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Wait until the namespace and the CRDs are gone.",
)
def uninstall_command(
    *,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    timeout: timedelta,
    keep_crds: bool,
    wait: bool,
) -> None:
    """Remove podwright from a cluster, leaving no Workload or resource held by its finalizers.

    The webhook configurations go first; then every Workload, which the operator finalizes
    (aborting its task) within --timeout: those still there after it, or at once when no
    operator replica is available, lose podwright's finalizer, and so do the resources they
    own. Then the operator, its Service and RBAC objects, the PriorityClasses install made, the
    FUSE proxy, the namespace, and last the CRDs, with every policy, asset and profile (unless
    --keep-crds).
    """
    if namespace is not None:  # a bad one is refused before the cluster is reached
        _settings(namespace=namespace, with_fuse_proxy=True)
    with cluster_client(ClusterAccess(kubeconfig, context)) as client:
        settings = _settings(
            namespace=namespace or _installed_namespace(client), with_fuse_proxy=True
        )
        manifests = install_manifests(settings)
        configurations = [m for m in manifests if m["kind"] in (MUTATING_KIND, VALIDATING_KIND)]
        crds = [m for m in manifests if is_custom_resource_definition(m)]
        found = [_delete(client, configuration) for configuration in configurations]
        found.append(_remove_workloads(client, settings, timeout))
        namespaces = []
        for manifest in _removal_order(manifests):
            if manifest["kind"] == "Namespace":
                namespace_found = _found(client, manifest)
                found.append(namespace_found is not None)
                if namespace_found is not None and _is_podwrights(namespace_found):
                    namespaces.append(manifest)
                    _delete(client, manifest)
            elif manifest["kind"] == "PriorityClass":
                found.append(_delete_priority_class(client, manifest))
            else:
                found.append(_delete(client, manifest))
        if not keep_crds:
            found.extend(_delete(client, crd) for crd in crds)
        # A replica that was starting while its Deployment went may have applied them again.
        for configuration in configurations:
            _delete(client, configuration)
        if not any(found):
            click.echo("nothing of podwright's was found")
        if wait:
            waited = namespaces + ([] if keep_crds else crds)
            _wait_for(timeout, lambda: _still_there(client, waited), "podwright's objects to go")


def _installed_namespace(client: KubernetesClient) -> str:
    """The namespace of the operator's ServiceAccount, as its ClusterRoleBinding names it (where
    podwright was installed), else the default one."""
    ref = ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", OPERATOR)
    try:
        binding = client.get(ref)
    except NotFoundError:
        return DEFAULT_NAMESPACE
    for subject in items(binding, "subjects"):
        if (text(subject, "kind"), text(subject, "name")) == ("ServiceAccount", OPERATOR):
            return text(subject, "namespace") or DEFAULT_NAMESPACE
    return DEFAULT_NAMESPACE


def _removal_order(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects between the Workloads and the CRDs, in the order they go: the operator first
    and the FUSE proxy's DaemonSet, then the Service, the role bindings and roles, the
    ServiceAccounts, the PriorityClasses, and the namespaces."""
    order = {
        "Deployment": 0,
        "DaemonSet": 0,
        "Service": 1,
        "RoleBinding": 2,
        "ClusterRoleBinding": 2,
        "Role": 3,
        "ClusterRole": 3,
        "ServiceAccount": 4,
        "PriorityClass": 5,
        "Namespace": 6,
    }
    kept = [m for m in manifests if m["kind"] in order]
    return sorted(kept, key=lambda manifest: order[manifest["kind"]])


def _ref(manifest: Mapping[str, Any]) -> ObjectRef:
    return ObjectRef.of(manifest)


def _delete(client: KubernetesClient, manifest: Mapping[str, Any]) -> bool:
    """Delete the object (in the background: its dependents after it); whether it was there."""
    try:
        client.delete(_ref(manifest))
    except NotFoundError:
        return False
    click.echo(f"{shown(manifest)} deleted")
    return True


def _found(client: KubernetesClient, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The object as the cluster has it, or None."""
    try:
        return client.get(_ref(manifest))
    except NotFoundError:
        return None


def _is_podwrights(namespace: Mapping[str, Any]) -> bool:
    """Whether the namespace is podwright's own (labelled so by install); says so when not."""
    if section(namespace, "metadata", "labels").get(PART_OF_LABEL) == PART_OF:
        return True
    click.echo(
        f"{shown(namespace)} kept: it is not podwright's own (no label "
        f"{PART_OF_LABEL}={PART_OF}); podwright's objects in it were deleted"
    )
    return False


def _delete_priority_class(client: KubernetesClient, manifest: Mapping[str, Any]) -> bool:
    """Delete a PriorityClass install made (labelled as podwright's); one of the same name made
    by someone else stays. Whether there was one."""
    found = _found(client, manifest)
    if found is None:
        return False
    if section(found, "metadata", "labels").get(MANAGED_BY_LABEL) == MANAGED_BY:
        _delete(client, manifest)
    else:
        click.echo(f"{shown(manifest)} kept: it is not podwright's ({MANAGED_BY_LABEL})")
    return True


def _workloads(client: KubernetesClient) -> list[dict[str, Any]]:
    """Every Workload in the cluster (none when the kind is not served)."""
    try:
        found, _version = client.list_objects(API_VERSION, WORKLOAD_KIND)
    except NotFoundError:
        return []
    return found


def _workload_name(workload: Mapping[str, Any]) -> str:
    metadata = section(workload, "metadata")
    return f"workload.podwright.dev/{text(metadata, 'name')} in {text(metadata, 'namespace')}"


def _remove_workloads(
    client: KubernetesClient, settings: InstallSettings, timeout: timedelta
) -> bool:
    """Delete every Workload; let the operator finalize them within ``timeout`` (when one
    runs), then remove podwright's finalizers from what is left. Whether there were any."""
    workloads = _workloads(client)
    if not workloads:
        return False
    for workload in workloads:
        try:
            client.delete(ObjectRef.of(workload))
        except NotFoundError:
            continue
    click.echo(f"{len(workloads)} Workload{'' if len(workloads) == 1 else 's'} deleted")
    running = _operator_available(client, settings)
    if running:
        click.echo(f"waiting up to {_duration(timeout)} while the operator finalizes them")
        deadline = time.monotonic() + timeout.total_seconds()
        while _workloads(client) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
    remaining = _workloads(client)
    for workload in remaining:
        others = [name for name in _finalizers(workload) if name != WORKLOAD_FINALIZER]
        if others:
            click.echo(
                f"{_workload_name(workload)}: held by the finalizers {', '.join(others)}, which "
                "are not podwright's (deleting its CRD waits for them)"
            )
    left = [w for w in remaining if WORKLOAD_FINALIZER in _finalizers(w)]
    if not left:
        if running:
            click.echo("the operator finalized every Workload")
        return True
    why = (
        f"the operator did not finalize it within {_duration(timeout)}"
        if running
        else "no operator replica is available to finalize it"
    )
    owners = set()
    for workload in left:
        if _release(client, workload, WORKLOAD_FINALIZER):
            owners.add(text(section(workload, "metadata"), "uid"))
            click.echo(f"{_workload_name(workload)}: finalizer {WORKLOAD_FINALIZER} removed: {why}")
    for resource in _owned_resources(client, owners):
        if _release(client, resource, FINALIZER):
            metadata = section(resource, "metadata")
            click.echo(
                f"{shown(resource)} in {text(metadata, 'namespace')}: finalizer {FINALIZER} "
                "removed: its Workload went without the operator"
            )
    return True


def _finalizers(obj: Mapping[str, Any]) -> list[str]:
    return [str(name) for name in section(obj, "metadata").get("finalizers") or []]


def _release(client: KubernetesClient, obj: Mapping[str, Any], finalizer: str) -> bool:
    """Remove ``finalizer`` from the object (read again after a conflict); whether it was
    removed (False: the object or its finalizer went meanwhile)."""
    current: Mapping[str, Any] = obj
    while True:
        if finalizer not in _finalizers(current):
            return False
        if finalizer == WORKLOAD_FINALIZER:
            patch = without_finalizer_patch(current)
        else:
            metadata = section(current, "metadata")
            kept = [name for name in _finalizers(current) if name != finalizer]
            patch = {
                "metadata": {
                    "resourceVersion": text(metadata, "resourceVersion"),
                    "finalizers": kept or None,
                }
            }
        ref = ObjectRef.of(current)
        try:
            client.patch(ref, patch, PatchType.MERGE)
        except NotFoundError:
            return False
        except ConflictError:
            try:
                current = client.get(ref)
            except NotFoundError:
                return False
            continue
        return True


def _owned_resources(client: KubernetesClient, owners: set[str]) -> Iterator[dict[str, Any]]:
    """The resources podwright launched (its label) for the Workloads of uids ``owners`` that
    still carry podwright's finalizer."""
    if not owners:
        return
    kinds = [*default_plugins(), *_COMPANION_KINDS]
    for api_version, kind in kinds:
        try:
            found, _version = client.list_objects(
                api_version, kind, label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}"
            )
        except NotFoundError:
            continue  # a kind this cluster does not serve (Kubeflow's, Knative's)
        for resource in found:
            references = items(section(resource, "metadata"), "ownerReferences")
            if FINALIZER in _finalizers(resource) and any(
                text(reference, "uid") in owners for reference in references
            ):
                yield resource


def _operator_available(client: KubernetesClient, settings: InstallSettings) -> bool:
    """Whether an operator replica is available to finalize Workloads."""
    try:
        deployment = client.get(ObjectRef("apps/v1", "Deployment", settings.namespace, OPERATOR))
    except NotFoundError:
        return False
    return (integer(section(deployment, "status"), "availableReplicas") or 0) > 0


def _still_there(client: KubernetesClient, manifests: Sequence[Mapping[str, Any]]) -> list[str]:
    problems = []
    for manifest in manifests:
        try:
            found = client.get(_ref(manifest))
        except NotFoundError:
            continue
        state = (
            "being deleted" if section(found, "metadata").get("deletionTimestamp") else "present"
        )
        finalizers = _finalizers(found) + [
            str(name) for name in section(found, "spec").get("finalizers") or []
        ]
        held = f", held by the finalizers {', '.join(finalizers)}" if finalizers else ""
        problems.append(f"{shown(manifest)}: {state}{held}")
    return problems
