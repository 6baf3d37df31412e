"""podwright: run AI workloads on Kubernetes, governed by policies, with least-privilege pods.

The public Python API (:mod:`podwright.api`, whose names are offered here too, and the
``PodTemplate`` API). Everything not listed in ``__all__`` is internal and may change.
``PodTemplate`` and ``__version__`` are looked up on first use (PEP 562), so that processes
which never build a pod (the FUSE proxy daemon, which forks for every mount) load neither the
Kubernetes models nor package metadata.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from podwright.api import (
        AdmissionDeniedError,
        AssetCatalogue,
        AttachedEvent,
        BackendError,
        BackendUnreachableError,
        Client,
        ClusterAccess,
        ClusterPolicies,
        ComplianceReport,
        Evaluation,
        FormField,
        FormInstance,
        FormPolicy,
        HistoryEntry,
        Identity,
        ImposedAsset,
        InvalidInputError,
        Phase,
        PodwrightError,
        Policies,
        PolicyViolationError,
        Prepared,
        ReportEntry,
        Scope,
        SortKey,
        SubmissionForm,
        SubmittedTask,
        TaskChange,
        TaskFeed,
        TaskNotFoundError,
        TaskOutcome,
        TaskRecord,
        TaskStatus,
        TaskStoreUnavailableError,
        Violation,
        Workload,
        WorkloadType,
        check_policies,
        compliance_report,
        effective,
        evaluate,
        load,
        load_assets,
        load_policies,
        load_profile,
        load_workloads,
        prepare,
        read_cluster_policies,
        render,
        select_tasks,
        submission_form,
        to_yaml,
        workload_from_form,
    )
    from podwright.core.pod_template import PodTemplate, PodTemplateError

    __version__: str

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
    "PodTemplate",
    "PodTemplateError",
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
    "__version__",
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

_API = frozenset(__all__) - {"PodTemplate", "PodTemplateError", "__version__"}
"""The names of :mod:`podwright.api`, offered here too: ``podwright.load(...)``."""

_LAZY = {"PodTemplate", "PodTemplateError"}


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(import_module("podwright.api"), name)
    if name in _LAZY:
        return getattr(import_module("podwright.core.pod_template"), name)
    if name == "__version__":
        return import_module("podwright._version").__version__
    raise AttributeError(f"module 'podwright' has no attribute {name!r}")
