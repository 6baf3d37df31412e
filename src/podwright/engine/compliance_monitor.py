"""Keeps every Workload's ``PolicyCompliant`` condition and compliance findings current.

A policy change never changes an admitted workload; it may make the cluster's policies disagree
with one. Beside the webhooks (``podwright webhook``, later the operator), the monitor re-assesses
the Workloads a change concerns and writes each changed status through the status subresource:
the decisions are the core's (:mod:`podwright.core.compliance`), the policies the webhooks' own
prepared ones (:meth:`AdmissionService.policies_of_namespace`), so the status says exactly what
the validating webhook would say now.

Level-triggered: a round compares what it reads, never the event that woke it. A Workload is
settled once its status was found (or written) right for its resourceVersion and the policy
state's version; a new resourceVersion (its spec or status changed, by anyone) or a new policy
version makes it due again. A round handles at most ``batch`` due Workloads, the next starting at
once while some remain. A refused or failed write is retried with a jittered, growing delay;
a conflict means the Workload changed since it was read, and it is re-assessed from the watch's
newer copy. Nothing the cluster answers stops the monitor: every failure is logged and retried.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from podwright.core.compliance import Assessment, assess, status_patch, unreadable_policies
from podwright.core.lifecycle.objects import JsonObject, section, text
from podwright.core.problems import ProblemsError
from podwright.engine.admission_service import NamespacePolicies, PolicyState
from podwright.engine.backoff import jittered_delay
from podwright.engine.kubernetes_port import (
    KubernetesError,
    NotFoundError,
    ObjectRef,
    PatchType,
    ThrottledError,
)

logger = logging.getLogger(__name__)


class StatusWriter(Protocol):
    """Where the statuses go: the Kubernetes adapter's client."""

    def patch_status(self, ref: ObjectRef, body: Any, patch_type: PatchType) -> dict[str, Any]:
        """Patch the object's status subresource; returns the object as stored."""


class WorkloadSource(Protocol):
    """The Workloads as last seen (a watch cache)."""

    def values(self) -> list[JsonObject]: ...


class NamespaceGovernance(Protocol):
    """What governs each namespace's workloads (the :class:`AdmissionService`)."""

    def policies_of_namespace(self, namespace: str) -> NamespacePolicies: ...


@dataclasses.dataclass(frozen=True)
class ComplianceSettings:
    """How the monitor paces itself."""

    poll_interval: timedelta = timedelta(seconds=5)
    """The longest wait between rounds when nothing wakes the monitor (a change of the Workloads
    or of the policy state wakes it at once, when its source says so through :meth:`notify`)."""
    batch: int = 50
    """The most Workloads assessed (and written) in one round."""
    retry_base: timedelta = timedelta(milliseconds=500)
    """The delay before a failed write is first tried again; it doubles with each failure."""
    retry_cap: timedelta = timedelta(minutes=1)
    """The longest delay between attempts."""

    def __post_init__(self) -> None:
        if self.batch < 1:
            raise ValueError(f"batch: must be at least 1, got {self.batch}")
        for name in ("poll_interval", "retry_base", "retry_cap"):
            if getattr(self, name) <= timedelta(0):
                raise ValueError(f"{name}: must be positive, got {getattr(self, name)}")
        if self.retry_cap < self.retry_base:
            raise ValueError(
                f"retry_cap: must be at least retry_base ({self.retry_base}), got {self.retry_cap}"
            )


@dataclasses.dataclass(frozen=True)
class RoundReport:
    """What one round did."""

    due: int
    """Workloads that needed assessing (more than ``batch`` leaves the rest to the next round)."""
    assessed: int
    written: int
    failed: int


_Key = tuple[str, str]
"""A Workload's namespace and name."""
_Outcome = Literal["unchanged", "written", "failed"]


@dataclasses.dataclass
class _Retry:
    failures: int
    at: datetime


class ComplianceMonitor:
    """Writes the compliance status of every Workload ``workloads`` holds, on a thread of its
    own (:meth:`start`, :meth:`stop`), or a round at a time (:meth:`run_round`)."""

    def __init__(
        self,
        writer: StatusWriter,
        state: PolicyState,
        governance: NamespaceGovernance,
        workloads: WorkloadSource,
        *,
        clock: Callable[[], datetime],
        settings: ComplianceSettings | None = None,
        ready: Callable[[], bool] = lambda: True,
        rng: random.Random | None = None,
    ) -> None:
        """``ready`` says whether ``state`` holds the cluster's policies yet: until it does, a
        Workload would be judged by none, and rounds do nothing."""
        self._writer = writer
        self._state = state
        self._governance = governance
        self._workloads = workloads
        self._clock = clock
        self._ready = ready
        self.settings = settings or ComplianceSettings()
        self._rng = rng or random.Random()
        self._settled: dict[_Key, tuple[str, int]] = {}
        """Each Workload's resourceVersion and the policy version its status was right for."""
        self._retries: dict[_Key, _Retry] = {}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # The thread ---------------------------------------------------------------------------

    def start(self) -> ComplianceMonitor:
        if self._thread is not None:
            raise RuntimeError("the compliance monitor was started already")
        self._thread = threading.Thread(target=self._run, name="compliance-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the Workload being written, if any (within ``timeout`` seconds)."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def notify(self) -> None:
        """Something changed (a Workload, a policy, a namespace, an asset): run a round soon."""
        self._wake.set()

    def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                report = self.run_round()
            except Exception as error:
                # The policy state failed to read the cluster (a namespace it had not seen), or
                # podwright has a fault: the webhooks beside keep serving; the round is retried.
                delay = self._delay(failures)
                failures += 1
                if isinstance(error, KubernetesError):
                    logger.warning("compliance round failed (%s); trying again in %s", error, delay)
                else:
                    logger.exception("compliance round failed; trying again in %s", delay)
                self._stopping.wait(delay.total_seconds())
                continue
            failures = 0
            if report.due == report.assessed:
                self._wake.wait(self.seconds_until_due())

    # Rounds -------------------------------------------------------------------------------

    def seconds_until_due(self) -> float:
        """How long until a retry is due; at most the poll interval."""
        now = self._clock()
        waits = [(retry.at - now).total_seconds() for retry in self._retries.values()]
        return max(0.0, min([self.settings.poll_interval.total_seconds(), *waits]))

    def run_round(self) -> RoundReport:
        """Assess the due Workloads (at most ``batch``) and write the statuses that change."""
        if not self._ready():
            return RoundReport(due=0, assessed=0, written=0, failed=0)
        now = self._clock()
        version = self._state.snapshot().version
        present: dict[_Key, JsonObject] = {}
        due: list[tuple[_Key, JsonObject]] = []
        for obj in self._workloads.values():
            metadata = section(obj, "metadata")
            key = (text(metadata, "namespace"), text(metadata, "name"))
            present[key] = obj
            retry = self._retries.get(key)
            if self._settled.get(key) == (text(metadata, "resourceVersion"), version) or (
                retry is not None and retry.at > now
            ):
                continue
            due.append((key, obj))
        for gone in (set(self._settled) | set(self._retries)) - set(present):
            self._settled.pop(gone, None)
            self._retries.pop(gone, None)
        written = failed = 0
        chosen = due[: self.settings.batch]
        for key, obj in chosen:
            if self._stopping.is_set():
                break
            outcome = self._reconcile(key, obj, version, now)
            written += outcome == "written"
            failed += outcome == "failed"
        return RoundReport(due=len(due), assessed=len(chosen), written=written, failed=failed)

    def _reconcile(self, key: _Key, obj: JsonObject, version: int, now: datetime) -> _Outcome:
        namespace, name = key
        try:
            assessment = self._assess(obj, namespace)
        except LookupError:
            # Its namespace is gone, and the Workload with it: nothing to say of it.
            return self._failed(key, now, f"namespace {namespace} not found")
        except KubernetesError as error:
            # The policy state read a namespace it had not seen yet, and failed.
            return self._failed(key, now, str(error))
        patch = status_patch(obj, assessment, now)
        resource_version = text(section(obj, "metadata"), "resourceVersion")
        if patch is None:
            self._settle(key, resource_version, version)
            return "unchanged"
        ref = ObjectRef(str(obj.get("apiVersion")), str(obj.get("kind")), namespace, name)
        body = {"metadata": {"resourceVersion": resource_version}, **patch}
        try:
            stored = self._writer.patch_status(ref, body, PatchType.MERGE)
        except NotFoundError:
            self._settle(key, resource_version, version)  # deleted; the watch says so soon
            return "unchanged"
        except KubernetesError as error:
            retry_after = error.retry_after if isinstance(error, ThrottledError) else None
            return self._failed(key, now, str(error), retry_after)
        self._settle(key, text(section(stored, "metadata"), "resourceVersion"), version)
        logger.info("%s: %s %s", ref, assessment.reason.value, assessment.message)
        return "written"

    def _assess(self, obj: JsonObject, namespace: str) -> Assessment:
        return assess_in_namespace(self._state, self._governance, obj, namespace)

    def _settle(self, key: _Key, resource_version: str, version: int) -> None:
        self._settled[key] = (resource_version, version)
        self._retries.pop(key, None)

    def _failed(
        self, key: _Key, now: datetime, why: str, retry_after: float | None = None
    ) -> _Outcome:
        retry = self._retries.get(key)
        failures = 0 if retry is None else retry.failures
        delay = self._delay(failures)
        if retry_after is not None:
            delay = max(delay, timedelta(seconds=retry_after))
        self._retries[key] = _Retry(failures + 1, now + delay)
        logger.warning(
            "Workload %s/%s: the compliance status was not written (%s); trying again in %s",
            *key,
            why,
            delay,
        )
        return "failed"

    def _delay(self, failures: int) -> timedelta:
        return jittered_delay(
            failures, self.settings.retry_base, self.settings.retry_cap, self._rng
        )


def assess_in_namespace(
    state: PolicyState, governance: NamespaceGovernance, obj: JsonObject, namespace: str
) -> Assessment:
    """What the current policies of ``namespace`` say of the Workload ``obj`` (LookupError: no
    such namespace): the status writer's and ``policy report``'s one judgement."""
    scope = state.namespace_scope(namespace)
    try:
        governing = governance.policies_of_namespace(namespace)
    except ProblemsError as error:
        # The namespace's assets cannot be read: its scope's policies cannot be applied.
        return unreadable_policies(scope, error.problems)
    return assess(obj, scope, governing.policy_for, governing.catalogue)
