"""The resource kind of each workload type, and :func:`render`, the renderer's entry point.

- workspace → a Pod (and a Service per service type its ports ask for);
- training → a batch/v1 Job;
- distributed → the Kubeflow training operator's v1 job of the framework: PyTorchJob, MPIJob,
  TFJob, XGBoostJob or JAXJob, with the master and worker sections as their replica templates;
- inference → a Knative Service.

New claims come first in the output (a pod waits for its claim), then the workload's resource,
then its Services. The output depends only on the inputs, in a stable order, so it diffs cleanly.

The workload's ``labels`` go on every object rendered for it: the resource, its pod templates,
its Services and its new claims (for distributed training, the job and the claims carry both
roles' labels, which must agree on a key both give; each role's pods and Services carry its
own). Its ``annotations`` go on the pods only: they are the pod's, as in the workload spec, and
annotations steer controllers per kind (a load balancer's, an autoscaler's), so copying a pod's
onto a Service or a claim could turn on what nobody asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from podwright.core.assets import EMPTY_CATALOGUE, AssetCatalogue
from podwright.core.k8s_names import dns1123_label_problem
from podwright.core.pod_template import PodTemplate
from podwright.core.render.fields import Problems, Values
from podwright.core.render.pods import (
    RoleContext,
    RolePod,
    check_url_access,
    identity_labels,
    render_role,
)
from podwright.core.render.profile import DEFAULT_PROFILE, ClusterProfile
from podwright.core.render.storage import Manifest, add_claim
from podwright.core.workload_fields import FRAMEWORK_FIELD, WorkloadType
from podwright.core.workloads import check_runnable, check_spec, workload_name_problem

MAIN_ROLE = "main"
"""The role name of the single pod template of a workspace, training or inference workload."""

KUBEFLOW_API_VERSION = "kubeflow.org/v1"
KNATIVE_API_VERSION = "serving.knative.dev/v1"
KNATIVE_VISIBILITY_LABEL = "networking.knative.dev/visibility"
KNATIVE_AUTOSCALING = "autoscaling.knative.dev/"
KNATIVE_PROGRESS_DEADLINE = "serving.knative.dev/progress-deadline"


@dataclasses.dataclass(frozen=True)
class Framework:
    """How the training operator names a framework's job, replicas and container."""

    kind: str
    replica_specs: str
    master_replica: str | None
    """The replica type the ``master`` section becomes; None when the job has no such replica."""
    container: str


FRAMEWORKS: Mapping[str, Framework] = {
    "PyTorch": Framework("PyTorchJob", "pytorchReplicaSpecs", "Master", "pytorch"),
    "MPI": Framework("MPIJob", "mpiReplicaSpecs", "Launcher", "mpi"),
    "TF": Framework("TFJob", "tfReplicaSpecs", "Chief", "tensorflow"),
    "XGBoost": Framework("XGBoostJob", "xgbReplicaSpecs", "Master", "xgboost"),
    "JAX": Framework("JAXJob", "jaxReplicaSpecs", None, "jax"),
}

KNATIVE_METRICS = {"throughput": "rps", "concurrency": "concurrency"}
"""The workload spec's autoscaling metrics that Knative's autoscaler (KPA) scales on."""


@dataclasses.dataclass(frozen=True)
class Rendering:
    """Everything a platform applies for one workload."""

    workload_type: WorkloadType
    name: str
    pod_templates: Mapping[str, PodTemplate]
    """Each role's pod template: ``main``, or ``master`` and ``worker`` for distributed."""
    manifests: tuple[Manifest, ...]


def render(
    workload_type: WorkloadType,
    name: str,
    workload: Mapping[str, object],
    *,
    profile: ClusterProfile = DEFAULT_PROFILE,
    catalogue: AssetCatalogue = EMPTY_CATALOGUE,
    namespace: str | None = None,
) -> Rendering:
    """Render an effective workload (as :func:`~podwright.core.evaluation.evaluate` returns it,
    or a workload as written), without the instances it excludes.

    Raises :class:`~podwright.core.workloads.WorkloadInputError` when ``workload`` is not a valid
    workload of its type or cannot run as it is (a limit below its request: the checks of
    :func:`~podwright.core.workloads.inconsistencies`, which evaluation under policies makes
    too), and :class:`~podwright.core.render.fields.RenderError` with every field the profile
    cannot honour.
    """
    checked = check_spec(workload, workload_type, (), running=True)
    manifests, templates = _rendered(
        workload_type, name, checked, profile=profile, catalogue=catalogue, namespace=namespace
    )
    if namespace is not None:
        for manifest in manifests:
            metadata = manifest["metadata"]
            assert isinstance(metadata, dict)
            metadata["namespace"] = namespace
    return Rendering(workload_type, name, templates, tuple(manifests))


def check_renders(
    workload_type: WorkloadType,
    name: str,
    workload: Mapping[str, object],
    *,
    profile: ClusterProfile,
    catalogue: AssetCatalogue,
    namespace: str | None,
) -> None:
    """Raise what :func:`render` raises for an evaluation's workload (``workload``, every value of
    which was checked already: the submission's as it came, the policies' as they loaded, what
    ``defaultFrom`` computes as it is computed), without building what it would render: the
    validating webhook's question, asked of every Workload created. The same code decides; only
    the pod templates' validation, which refuses nothing a user gives, and the manifests are
    left out."""
    _rendered(
        workload_type,
        name,
        workload,
        profile=profile,
        catalogue=catalogue,
        namespace=namespace,
        packaged=False,
    )


def _rendered(
    workload_type: WorkloadType,
    name: str,
    checked: Mapping[str, object],
    *,
    profile: ClusterProfile,
    catalogue: AssetCatalogue,
    namespace: str | None,
    packaged: bool = True,
) -> tuple[list[Manifest], dict[str, PodTemplate]]:
    check_runnable(workload_type, checked)
    problems = Problems()
    if problem := workload_name_problem(name, workload_type, checked):
        problems.add("name", f"{name!r} {problem}")
    if namespace is not None and (problem := dns1123_label_problem(namespace)):
        problems.add("namespace", f"{namespace!r} {problem}")
    problems.raise_if_any()  # every object's name and labels derive from these
    renderer = _KINDS[workload_type]
    job = _Job(name, profile, catalogue, problems, packaged)
    manifests, templates = renderer(Values(checked), job)
    problems.raise_if_any()
    return manifests, templates


@dataclasses.dataclass(frozen=True)
class _Job:
    name: str
    profile: ClusterProfile
    catalogue: AssetCatalogue
    problems: Problems
    packaged: bool = True
    """False: only checked (:func:`check_renders`): each kind stops where nothing is left that
    could refuse the workload, before it builds its templates and manifests."""

    def role(
        self, values: Values, workload_type: WorkloadType, role: str | None, container: str
    ) -> RolePod | None:
        context = RoleContext(
            workload_type, self.name, role, container, self.profile, self.catalogue
        )
        return render_role(values, context, self.problems, packaged=self.packaged)

    def metadata(
        self, workload_type: WorkloadType, labels: Mapping[str, str], **annotations: str
    ) -> Manifest:
        """The resource's metadata: its name, podwright's labels and the workload's."""
        metadata: Manifest = {
            "name": self.name,
            "labels": {**identity_labels(self.profile, self.name, workload_type), **labels},
        }
        if annotations:
            metadata["annotations"] = annotations
        return metadata

    def lifecycle_annotations(self, values: Values, *fields: str) -> dict[str, str]:
        """Fields the resource kind has no place for, which podwright's lifecycle engine honours."""
        names = {
            "backoffLimit": "backoff-limit",
            "autoDeletionTimeAfterCompletionSeconds": "ttl-seconds-after-finished",
            "terminateAfterPreemption": "terminate-after-preemption",
        }
        annotations = {}
        for field in fields:
            value = values.data.get(field)
            if value is not None:
                text = str(value).lower() if isinstance(value, bool) else str(value)
                annotations[self.profile.label(names[field])] = text
        return annotations


RenderKind = Callable[[Values, _Job], tuple[list[Manifest], dict[str, PodTemplate]]]


def _pod_template_spec(template: PodTemplate) -> Manifest:
    """A PodTemplateSpec (metadata and spec) for a controller's template."""
    pod = template.to_k8s_pod()
    return {"metadata": pod["metadata"], "spec": pod["spec"]}


def _with_restart_policy(template: PodTemplate, policy: str) -> PodTemplate:
    assert template.pod_spec is not None
    spec = template.pod_spec.model_copy(update={"restart_policy": policy})
    return dataclasses.replace(template, pod_spec=spec)


def _render_workspace(values: Values, job: _Job) -> tuple[list[Manifest], dict[str, PodTemplate]]:
    role = job.role(values, WorkloadType.WORKSPACE, None, "main")
    if role is None or role.template is None:
        return [], {}
    template = role.template
    policy = values.text("restartPolicy")
    if policy:
        template = _with_restart_policy(template, policy)
    annotations = job.lifecycle_annotations(
        values, "backoffLimit", "autoDeletionTimeAfterCompletionSeconds", "terminateAfterPreemption"
    )
    if annotations:
        template = dataclasses.replace(
            template, annotations={**(template.annotations or {}), **annotations}
        )
    pod = template.to_k8s_pod(name=job.name)
    claims = _labelled(role.claims, role.user_labels)
    return [*claims, pod, *role.services], {MAIN_ROLE: template}


def _render_training(values: Values, job: _Job) -> tuple[list[Manifest], dict[str, PodTemplate]]:
    role = job.role(values, WorkloadType.TRAINING, None, "main")
    if role is None:
        return [], {}
    policy = values.text("restartPolicy") or "Never"
    if policy == "Always":
        job.problems.add(
            values.path("restartPolicy"), "a Job's pods restart Never or OnFailure, not Always"
        )
        return [], {}
    spec: Manifest = {}
    for field, target in (
        ("completions", "completions"),
        ("parallelism", "parallelism"),
        ("backoffLimit", "backoffLimit"),
        ("autoDeletionTimeAfterCompletionSeconds", "ttlSecondsAfterFinished"),
    ):
        if values.has(field):
            spec[target] = values.count(field)
    if values.has("terminateAfterPreemption"):
        if policy != "Never":
            job.problems.add(
                values.path("terminateAfterPreemption"),
                "needs restartPolicy Never: a Job tells preemption from failure by a pod "
                "failure policy, which Kubernetes allows only then",
            )
        action = "FailJob" if values.flag("terminateAfterPreemption") else "Ignore"
        spec["podFailurePolicy"] = {
            "rules": [
                {
                    "action": action,
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                }
            ]
        }
    if role.template is None:
        return [], {}
    template = _with_restart_policy(role.template, policy)
    spec["template"] = _pod_template_spec(template)
    manifest: Manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": job.metadata(WorkloadType.TRAINING, role.user_labels),
        "spec": spec,
    }
    claims = _labelled(role.claims, role.user_labels)
    return [*claims, manifest, *role.services], {MAIN_ROLE: template}


def _render_distributed(values: Values, job: _Job) -> tuple[list[Manifest], dict[str, PodTemplate]]:
    master, worker = values.section("master"), values.section("worker")
    framework_name = worker.text(FRAMEWORK_FIELD)
    if framework_name is None:
        job.problems.add(
            worker.path(FRAMEWORK_FIELD),
            f"required: the framework ({', '.join(FRAMEWORKS)}) decides the job's kind",
        )
        return [], {}
    framework = FRAMEWORKS[framework_name]
    if framework.master_replica is None and master.data:
        job.problems.add(
            master.path(),
            f"a {framework.kind} runs workers only (worker 0 coordinates); "
            f"remove the master section ({', '.join(master.data)})",
        )
        return [], {}
    roles: dict[str, RolePod] = {}
    for name, section in (("master", master), ("worker", worker)):
        if name == "master" and framework.master_replica is None:
            continue
        role = job.role(section, WorkloadType.DISTRIBUTED, name, framework.container)
        if role is not None:
            roles[name] = role
    workers = worker.count("numWorkers")
    if workers is None or workers < 1:
        job.problems.add(worker.path("numWorkers"), "required: at least 1 worker")
    spec: Manifest = {}
    run_policy = _run_policy(master, worker, framework, job)
    if run_policy:
        spec["runPolicy"] = run_policy
    spec.update(_framework_fields(worker, framework, workers or 0, job))
    labels = _job_labels(roles, {"master": master, "worker": worker}, job)
    if job.problems or workers is None:
        return [], {}
    claims = [claim for role in roles.values() for claim in role.claims]
    if not job.packaged:
        _unique_claims(claims, job)
        return [], {}
    replicas: Manifest = {}
    templates: dict[str, PodTemplate] = {}
    for name, role in roles.items():
        replica_type = framework.master_replica if name == "master" else "Worker"
        assert replica_type is not None
        section = master if name == "master" else worker
        replica: Manifest = {"replicas": 1 if name == "master" else workers}
        if section.has("restartPolicy"):
            replica["restartPolicy"] = section.text("restartPolicy")
        assert role.template is not None
        replica["template"] = _pod_template_spec(role.template)
        replicas[replica_type] = replica
        templates[name] = role.template
    spec[framework.replica_specs] = replicas
    annotations = {}
    for section in (worker, master):
        annotations.update(job.lifecycle_annotations(section, "terminateAfterPreemption"))
    manifest: Manifest = {
        "apiVersion": KUBEFLOW_API_VERSION,
        "kind": framework.kind,
        "metadata": job.metadata(WorkloadType.DISTRIBUTED, labels, **annotations),
        "spec": spec,
    }
    services = [service for role in roles.values() for service in role.services]
    return [*_labelled(_unique_claims(claims, job), labels), manifest, *services], templates


def _job_labels(
    roles: Mapping[str, RolePod], sections: Mapping[str, Values], job: _Job
) -> dict[str, str]:
    """The labels of a distributed job: both roles', which must agree on a key both give."""
    labels: dict[str, str] = {}
    given_by: dict[str, str] = {}
    for name, role in sorted(roles.items(), key=lambda item: item[0] != "worker"):
        for key, value in role.user_labels.items():
            if key not in labels:
                labels[key], given_by[key] = value, name
            elif labels[key] != value:
                job.problems.add(
                    sections[name].path(f"labels[{key}]"),
                    f"the job carries one value of label {key!r}: {given_by[key]} gives "
                    f"{labels[key]!r} and {name} {value!r}; give both roles the same value, or "
                    "the label to one role only",
                )
    return labels


def _run_policy(master: Values, worker: Values, framework: Framework, job: _Job) -> Manifest:
    """The job-wide run policy; a field set differently on master and worker is an error."""
    run_policy: Manifest = {}
    for field, target in (
        ("cleanPodPolicy", "cleanPodPolicy"),
        ("backoffLimit", "backoffLimit"),
        ("autoDeletionTimeAfterCompletionSeconds", "ttlSecondsAfterFinished"),
    ):
        given = {
            section.path(field): section.data[field]
            for section in (worker, master)
            if section.data.get(field) is not None
            and (section is worker or framework.master_replica is not None)
        }
        if len(set(map(str, given.values()))) > 1:
            job.problems.add(
                next(iter(given)),
                f"the job has one {target}, but master and worker give "
                + " and ".join(str(value) for value in given.values()),
            )
        elif given:
            run_policy[target] = next(iter(given.values()))
    return run_policy


def _framework_fields(worker: Values, framework: Framework, workers: int, job: _Job) -> Manifest:
    fields: Manifest = {}
    if framework.kind == "PyTorchJob":
        minimum, maximum = worker.count("minReplicas"), worker.count("maxReplicas")
        if minimum is not None or maximum is not None:
            lower = minimum if minimum is not None else workers
            upper = maximum if maximum is not None else max(workers, lower)
            if not lower <= workers <= upper:
                job.problems.add(
                    worker.path("numWorkers"),
                    f"{workers} workers lie outside the elastic range {lower}..{upper} "
                    "(minReplicas..maxReplicas)",
                )
            fields["elasticPolicy"] = {
                "rdzvBackend": "c10d",
                "minReplicas": lower,
                "maxReplicas": upper,
            }
    if framework.kind == "MPIJob":
        fields["mainContainer"] = framework.container
        if worker.has("slotsPerWorker"):
            fields["slotsPerWorker"] = worker.count("slotsPerWorker")
        if worker.has("sshAuthMountPath"):
            job.problems.add(
                worker.path("sshAuthMountPath"),
                "the training operator's kubeflow.org/v1 MPIJob starts ranks with kubectl exec, "
                "not ssh, and mounts no SSH keys",
            )
        if worker.text("mpiLauncherCreationPolicy") == "AtStartup":
            job.problems.add(
                worker.path("mpiLauncherCreationPolicy"),
                "the kubeflow.org/v1 MPIJob always holds the launcher (its kubectl-delivery init "
                "container) until the workers run, which is WaitForWorkersReady",
            )
    return fields


def _labelled(claims: Sequence[Manifest], labels: Mapping[str, str]) -> list[Manifest]:
    """New claims carrying the workload's labels."""
    if not labels:
        return list(claims)
    labelled = []
    for claim in claims:
        metadata = claim["metadata"]
        assert isinstance(metadata, dict)
        labelled.append({**claim, "metadata": {**metadata, "labels": dict(labels)}})
    return labelled


def _unique_claims(claims: list[Manifest], job: _Job) -> list[Manifest]:
    """New claims of both roles, once each; one name asked twice differently is an error."""
    unique: list[Manifest] = []
    for claim in claims:
        if not add_claim(unique, claim):
            metadata = claim["metadata"]
            assert isinstance(metadata, dict)
            job.problems.add(
                "storage.pvc",
                f"master and worker ask for claim {metadata['name']!r} with different specs",
            )
    return unique


def _render_inference(values: Values, job: _Job) -> tuple[list[Manifest], dict[str, PodTemplate]]:
    role = job.role(values, WorkloadType.INFERENCE, None, "main")
    if any(True for _ in values.instances("ports")):
        job.problems.add(
            values.path("ports"),
            "a Knative Service serves one port, the servingPort; it exposes no other ports",
        )
    serving = values.section("servingPort")
    annotations, labels = _inference_access(serving, job)
    template_annotations = _autoscaling(values.section("autoscaling"), job)
    configuration = values.section("servingConfiguration")
    if configuration.has("initializationTimeoutSeconds"):
        template_annotations[KNATIVE_PROGRESS_DEADLINE] = (
            f"{configuration.count('initializationTimeoutSeconds')}s"
        )
    if role is None:
        return [], {}
    for feature, field in role.knative_features.items():
        if feature not in job.profile.knative_features:
            job.problems.add(
                field,
                f"needs Knative's {feature} feature, which the cluster profile does not enable "
                "(knative.features)",
            )
    for field, reason in role.knative_refusals.items():
        job.problems.add(field, reason)
    port = serving.count("container")
    containers = role.pod_spec["containers"]  # as built: checked before they are packaged
    assert isinstance(containers, list)
    built = next(c for c in containers if c["name"] == "main")
    probe_port = built.get("readinessProbe", {}).get("httpGet", {}).get("port")
    if probe_port is not None and probe_port != (port or 8080):
        job.problems.add(
            values.path("probes.readiness.handler.httpGet.port"),
            f"Knative probes the serving port ({port or 8080}), not {probe_port}",
        )
    if role.template is None:
        return [], {}
    pod = _pod_template_spec(role.template)
    pod_spec = pod["spec"]
    pod_metadata = pod["metadata"]
    assert isinstance(pod_spec, dict)
    assert isinstance(pod_metadata, dict)
    container = next(c for c in pod_spec["containers"] if c["name"] == "main")
    if port is not None:
        name = "h2c" if serving.text("protocol") == "grpc" else "http1"
        container["ports"] = [{"name": name, "containerPort": port}]
    autoscaling = values.section("autoscaling")
    if autoscaling.has("concurrencyHardLimit"):
        pod_spec["containerConcurrency"] = autoscaling.count("concurrencyHardLimit")
    if configuration.has("requestTimeoutSeconds"):
        pod_spec["timeoutSeconds"] = configuration.count("requestTimeoutSeconds")
    pod_metadata.setdefault("annotations", {}).update(template_annotations)
    metadata = job.metadata(WorkloadType.INFERENCE, role.user_labels, **annotations)
    metadata_labels = metadata["labels"]
    assert isinstance(metadata_labels, dict)
    metadata_labels.update(labels)
    manifest: Manifest = {
        "apiVersion": KNATIVE_API_VERSION,
        "kind": "Service",
        "metadata": metadata,
        "spec": {"template": pod},
    }
    return [*_labelled(role.claims, role.user_labels), manifest], {MAIN_ROLE: role.template}


def _inference_access(serving: Values, job: _Job) -> tuple[dict[str, str], dict[str, str]]:
    """Annotations that ask the gateway for the serving port's access rule; visibility label."""
    labels = {}
    if serving.flag("clusterLocalAccessOnly"):
        labels[KNATIVE_VISIBILITY_LABEL] = "cluster-local"
    check_url_access(serving, job.profile, job.problems, "the service")
    kind = serving.text("authorizationType") or "public"
    users, groups = serving.texts("authorizedUsers"), serving.texts("authorizedGroups")
    annotations = {}
    if kind != "public":
        annotations[job.profile.label("authorization-type")] = kind
        if users:
            annotations[job.profile.label("authorized-users")] = ",".join(users)
        if groups:
            annotations[job.profile.label("authorized-groups")] = ",".join(groups)
    return annotations, labels


def _autoscaling(autoscaling: Values, job: _Job) -> dict[str, str]:
    """Knative autoscaling annotations, with the workload spec's defaults made explicit."""
    minimum = autoscaling.count("minReplicas")
    minimum = 1 if minimum is None else minimum
    maximum = autoscaling.count("maxReplicas")
    maximum = (minimum or 1) if maximum is None else maximum
    annotations = {
        f"{KNATIVE_AUTOSCALING}min-scale": str(minimum),
        f"{KNATIVE_AUTOSCALING}max-scale": str(maximum),
    }
    for field, key in (
        ("initialReplicas", "initial-scale"),
        ("activationReplicas", "activation-scale"),
    ):
        if autoscaling.has(field):
            annotations[f"{KNATIVE_AUTOSCALING}{key}"] = str(autoscaling.count(field))
    metric = autoscaling.text("metric")
    if metric is None and minimum < maximum and (minimum, maximum) != (0, 1):
        job.problems.add(
            autoscaling.path("metric"),
            "required when minReplicas < maxReplicas: throughput or concurrency",
        )
    if metric is not None:
        if metric not in KNATIVE_METRICS:
            job.problems.add(
                autoscaling.path("metric"),
                f"Knative's autoscaler scales on throughput or concurrency; {metric!r} "
                "cannot be honoured",
            )
        else:
            annotations[f"{KNATIVE_AUTOSCALING}metric"] = KNATIVE_METRICS[metric]
        threshold = autoscaling.amount("metricThreshold")
        if threshold is None:
            job.problems.add(
                autoscaling.path("metricThreshold"), f"required with metric {metric!r}"
            )
        else:
            annotations[f"{KNATIVE_AUTOSCALING}target"] = format(threshold.normalize(), "f")
    elif autoscaling.has("metricThreshold"):
        job.problems.add(autoscaling.path("metricThreshold"), "applies only with a metric")
    if autoscaling.has("metricThresholdPercentage"):
        percentage = autoscaling.amount("metricThresholdPercentage")
        assert percentage is not None
        annotations[f"{KNATIVE_AUTOSCALING}target-utilization-percentage"] = format(
            percentage.normalize(), "f"
        )
    retention = autoscaling.count("scaleToZeroRetentionSeconds")
    if retention is not None:
        if minimum != 0:
            job.problems.add(
                autoscaling.path("scaleToZeroRetentionSeconds"),
                "applies only when minReplicas is 0 (scale to zero)",
            )
        annotations[f"{KNATIVE_AUTOSCALING}scale-to-zero-pod-retention-period"] = f"{retention}s"
    delay = autoscaling.count("scaleDownDelaySeconds")
    if delay is not None:
        annotations[f"{KNATIVE_AUTOSCALING}scale-down-delay"] = f"{delay}s"
    return annotations


_KINDS: Mapping[WorkloadType, RenderKind] = {
    WorkloadType.WORKSPACE: _render_workspace,
    WorkloadType.TRAINING: _render_training,
    WorkloadType.DISTRIBUTED: _render_distributed,
    WorkloadType.INFERENCE: _render_inference,
}
