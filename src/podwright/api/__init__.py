"""podwright's public Python API: load documents, evaluate them under policies, render them,
and run them as tasks; read the policies a cluster holds, and which Workloads they would refuse.

The command line is built on this package (an import-linter contract keeps its workload and
task commands to it), so a notebook, a pipeline or a portal gets exactly what ``podwright``
does::

    import podwright

    workload = podwright.load("examples/workload-local.yaml")
    policies = podwright.load_policies("examples/policies/local-dev.yaml")
    manifests = podwright.render(workload, policies)
    with podwright.Client(backend="local") as client:
        task = client.submit(podwright.prepare(workload, policies))
        for change in client.watch(task.task_id):
            print(change)

Everything it raises on purpose is a :class:`PodwrightError` (see :mod:`podwright.api.errors`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from podwright.api.errors import (
    AdmissionDeniedError,
    BackendError,
    BackendUnreachableError,
    InvalidInputError,
    PodwrightError,
    PolicyViolationError,
    TaskNotFoundError,
    TaskStoreUnavailableError,
)

if TYPE_CHECKING:
    from podwright.api.backends import ClusterAccess, Identity
    from podwright.api.client import (
        Client,
        SubmittedTask,
        TaskChange,
        TaskFeed,
        TaskOutcome,
        TaskStatus,
        select_tasks,
    )
    from podwright.api.cluster_policies import (
        ClusterPolicies,
        ComplianceReport,
        ReportEntry,
        compliance_report,
        read_cluster_policies,
    )
    from podwright.api.forms import (
        SubmissionForm,
        submission_form,
        workload_from_form,
    )
    from podwright.api.loading import (
        Policies,
        Workload,
        load,
        load_assets,
        load_policies,
        load_profile,
        load_workloads,
        to_yaml,
    )
    from podwright.api.pipeline import (
        Evaluation,
        Prepared,
        check_policies,
        effective,
        evaluate,
        prepare,
        render,
    )
    from podwright.core.assets import AssetCatalogue
    from podwright.core.evaluation import Violation
    from podwright.core.lifecycle.phases import Phase
    from podwright.core.policies import Scope
    from podwright.core.submission_form import FormField, FormInstance, FormPolicy, ImposedAsset
    from podwright.core.workload_fields import WorkloadType
    from podwright.engine.task_store import AttachedEvent, HistoryEntry, TaskRecord
    from podwright.engine.task_views import SortKey

_LAZY = {
    "podwright.api.backends": ("ClusterAccess", "Identity"),
    "podwright.api.client": (
        "Client",
        "SubmittedTask",
        "TaskChange",
        "TaskFeed",
        "TaskOutcome",
        "TaskStatus",
        "select_tasks",
    ),
    "podwright.api.cluster_policies": (
        "ClusterPolicies",
        "ComplianceReport",
        "ReportEntry",
        "compliance_report",
        "read_cluster_policies",
    ),
    "podwright.api.forms": ("SubmissionForm", "submission_form", "workload_from_form"),
    "podwright.api.loading": (
        "Policies",
        "Workload",
        "load",
        "load_assets",
        "load_policies",
        "load_profile",
        "load_workloads",
        "to_yaml",
    ),
    "podwright.api.pipeline": (
        "Evaluation",
        "Prepared",
        "check_policies",
        "effective",
        "evaluate",
        "prepare",
        "render",
    ),
    "podwright.core.assets": ("AssetCatalogue",),
    "podwright.core.evaluation": ("Violation",),
    "podwright.core.policies": ("Scope",),
    "podwright.core.submission_form": ("FormField", "FormInstance", "FormPolicy", "ImposedAsset"),
    "podwright.core.lifecycle.phases": ("Phase",),
    "podwright.core.workload_fields": ("WorkloadType",),
    "podwright.engine.task_store": ("AttachedEvent", "HistoryEntry", "TaskRecord"),
    "podwright.engine.task_views": ("SortKey",),
}
"""What is loaded on first use (PEP 562): the exceptions are light, and ``podwright --help``
imports them without the policy engine."""

__all__ = [
    "AdmissionDeniedError",
    "AssetCatalogue",
    "AttachedEvent",
    "BackendError",
    "BackendUnreachableError",
    "Client",
    "ClusterAccess",
    "ClusterPolicies",
    "ComplianceReport",
    "Evaluation",
    "FormField",
    "FormInstance",
    "FormPolicy",
    "HistoryEntry",
    "Identity",
    "ImposedAsset",
    "InvalidInputError",
    "Phase",
    "PodwrightError",
    "Policies",
    "PolicyViolationError",
    "Prepared",
    "ReportEntry",
    "Scope",
    "SortKey",
    "SubmissionForm",
    "SubmittedTask",
    "TaskChange",
    "TaskFeed",
    "TaskNotFoundError",
    "TaskOutcome",
    "TaskRecord",
    "TaskStatus",
    "TaskStoreUnavailableError",
    "Violation",
    "Workload",
    "WorkloadType",
    "check_policies",
    "compliance_report",
    "effective",
    "evaluate",
    "load",
    "load_assets",
    "load_policies",
    "load_profile",
    "load_workloads",
    "prepare",
    "read_cluster_policies",
    "render",
    "select_tasks",
    "submission_form",
    "to_yaml",
    "workload_from_form",
]


def __getattr__(name: str) -> Any:
    for module, names in _LAZY.items():
        if name in names:
            return getattr(import_module(module), name)
    raise AttributeError(f"module 'podwright.api' has no attribute {name!r}")
