"""The plugins podwright ships: one per resource kind the renderer produces.

Each maps its kind's status to a phase (and a failure to when it happened), and a deleted object
to whether it stopped, through the pure decisions of ``podwright.core.lifecycle``, and finds the
pod templates inside its kind (a Pod's metadata is its own; a Job's and a Knative Service's
``spec.template``; a Kubeflow job's ``spec.<framework>ReplicaSpecs.<replica type>.template``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from podwright.core.lifecycle import Phase, PhaseInfo, PluginState
from podwright.core.lifecycle.objects import integer, section, text
from podwright.core.lifecycle.pod_status import pod_failed_at, pod_phase, preemption_ends_task
from podwright.core.lifecycle.resource_status import (
    failed_at,
    job_phase,
    knative_service_phase,
    kubeflow_job_phase,
)
from podwright.core.lifecycle.termination import job_stopped, pod_stopped
from podwright.engine.config import LifecycleConfig
from podwright.engine.kubernetes_port import JsonObject
from podwright.engine.plugin import (
    Plugin,
    PluginError,
    PluginProperties,
    without_managed_fields,
)


class PodPlugin(Plugin):
    """A bare Pod: a workspace, or any single-pod task."""

    api_version = "v1"
    kind = "Pod"
    # A pod has no dependents to wait for: the kubelet's confirmation is what an abort waits for.
    properties = PluginProperties(abort_propagation="Background")
    stop_subject = "the pod's containers"

    def phase(
        self,
        observed: JsonObject,
        state: PluginState,
        now: datetime,
        config: LifecycleConfig,
        pods: Sequence[JsonObject] = (),
    ) -> PhaseInfo:
        info = pod_phase(observed, now, config.pod)
        return preemption_ends_task(observed, info, now, config.label_domain)

    def failed_at(self, observed: JsonObject) -> datetime | None:
        return pod_failed_at(observed)

    def pod_templates(self, resource: JsonObject) -> list[dict[str, Any]]:
        return [resource] if isinstance(resource, dict) else []

    def stopped(self, observed: JsonObject) -> bool:
        return pod_stopped(observed)

    def trim(self, observed: JsonObject) -> dict[str, Any]:
        # Pods are the most numerous objects in the cache: keep the metadata the manager reads,
        # the whole status, and of the spec what tells which containers the kubelet restarts
        # (the pod's restartPolicy, the containers' names and own restartPolicy: a sidecar's).
        metadata = section(observed, "metadata")
        spec = section(observed, "spec")
        trimmed: dict[str, Any] = {
            key: [
                {field: c[field] for field in ("name", "restartPolicy") if field in c}
                for c in spec[key] or []
                if isinstance(c, Mapping)
            ]
            for key in ("initContainers", "containers")
            if key in spec
        }
        if "restartPolicy" in spec:
            trimmed["restartPolicy"] = spec["restartPolicy"]
        return {
            "metadata": without_managed_fields(metadata),
            "spec": trimmed,
            "status": dict(section(observed, "status")),
        }


class JobPlugin(Plugin):
    """A ``batch/v1`` Job: a training task."""

    api_version = "batch/v1"
    kind = "Job"
    stop_subject = "the job's pods"
    follows_pods = True

    def phase(
        self,
        observed: JsonObject,
        state: PluginState,
        now: datetime,
        config: LifecycleConfig,
        pods: Sequence[JsonObject] = (),
    ) -> PhaseInfo:
        return job_phase(observed, now, ran=state.phase is Phase.RUNNING, pods=pods)

    def failed_at(self, observed: JsonObject) -> datetime | None:
        return failed_at(observed)

    def pod_templates(self, resource: JsonObject) -> list[dict[str, Any]]:
        return _spec_template(resource)

    def stopped(self, observed: JsonObject) -> bool:
        return job_stopped(observed)

    def trim(self, observed: JsonObject) -> dict[str, Any]:
        # A cached Job is read for its status and its spec's counts and limits; its pod
        # template, most of its size, only for the pods' restartPolicy (what a Job's failing
        # container does).
        spec = dict(section(observed, "spec"))
        template = spec.pop("template", None)
        restart_policy = text(section(template or {}, "spec"), "restartPolicy")
        if restart_policy:
            spec["template"] = {"spec": {"restartPolicy": restart_policy}}
        return {
            **super().trim(observed),
            "spec": spec,
        }


class KubeflowJobPlugin(Plugin):
    """A Kubeflow training operator job (``kubeflow.org/v1``): a distributed training task."""

    api_version = "kubeflow.org/v1"
    # The operator names pods <job>-<replica type>-<index>, and services after them.
    properties = PluginProperties(
        generated_name_max_length=48,
        served_by="the Kubeflow training operator (its kubeflow.org/v1 CRDs)",
    )

    stop_subject = "the job's pods"

    def __init__(self, kind: str) -> None:
        if kind not in KUBEFLOW_KINDS:
            raise PluginError(f"kind: {kind!r} is not a Kubeflow job; allowed: {KUBEFLOW_KINDS}")
        self.kind = kind

    def phase(
        self,
        observed: JsonObject,
        state: PluginState,
        now: datetime,
        config: LifecycleConfig,
        pods: Sequence[JsonObject] = (),
    ) -> PhaseInfo:
        return kubeflow_job_phase(observed, now)

    def failed_at(self, observed: JsonObject) -> datetime | None:
        return failed_at(observed)

    def pod_templates(self, resource: JsonObject) -> list[dict[str, Any]]:
        templates = []
        for key, replicas in section(resource, "spec").items():
            if not key.endswith("ReplicaSpecs") or not isinstance(replicas, Mapping):
                continue
            for replica in replicas.values():
                template = replica.get("template") if isinstance(replica, Mapping) else None
                if isinstance(template, dict):
                    templates.append(template)
        return templates


class KnativeServicePlugin(Plugin):
    """A Knative Service (``serving.knative.dev/v1``): an inference task."""

    api_version = "serving.knative.dev/v1"
    kind = "Service"
    # Knative names revisions <service>-00001 and their deployments <revision>-deployment.
    properties = PluginProperties(
        generated_name_max_length=40, served_by="Knative Serving (its serving.knative.dev CRDs)"
    )
    stop_subject = "the service's pods"

    def phase(
        self,
        observed: JsonObject,
        state: PluginState,
        now: datetime,
        config: LifecycleConfig,
        pods: Sequence[JsonObject] = (),
    ) -> PhaseInfo:
        return knative_service_phase(observed, now)

    def pod_templates(self, resource: JsonObject) -> list[dict[str, Any]]:
        return _spec_template(resource)

    def stop_grace(self, resource: JsonObject) -> timedelta:
        # Knative gives a revision's pods its request timeout as their termination grace period,
        # so requests in flight can finish (300 s unless the template's timeoutSeconds says).
        specs = [section(template, "spec") for template in self.pod_templates(resource)]
        seconds = [integer(spec, "timeoutSeconds") or KNATIVE_DEFAULT_TIMEOUT for spec in specs]
        return timedelta(seconds=max(seconds, default=KNATIVE_DEFAULT_TIMEOUT))


KNATIVE_DEFAULT_TIMEOUT = 300


def _spec_template(resource: JsonObject) -> list[dict[str, Any]]:
    template = section(resource, "spec").get("template")
    return [template] if isinstance(template, dict) else []


KUBEFLOW_KINDS = ("PyTorchJob", "MPIJob", "TFJob", "XGBoostJob", "JAXJob")


def default_plugins() -> dict[tuple[str, str], Plugin]:
    """Every shipped plugin, by (apiVersion, kind)."""
    plugins: list[Plugin] = [
        PodPlugin(),
        JobPlugin(),
        KnativeServicePlugin(),
        *(KubeflowJobPlugin(kind) for kind in KUBEFLOW_KINDS),
    ]
    return {(plugin.api_version, plugin.kind): plugin for plugin in plugins}


def plugin_for(resource: JsonObject, plugins: Mapping[tuple[str, str], Plugin]) -> Plugin:
    """The plugin that launches ``resource``."""
    key = (str(resource.get("apiVersion")), str(resource.get("kind")))
    plugin = plugins.get(key)
    if plugin is None:
        known = ", ".join(f"{v}/{k}" for v, k in sorted(plugins))
        raise PluginError(f"no plugin launches {key[0]}/{key[1]}; plugins exist for {known}")
    return plugin
