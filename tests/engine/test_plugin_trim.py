"""What the watch cache keeps of a Job (``JobPlugin.trim``) is enough for every decision the
plugin manager makes on it: the phase, when it failed, whether it stopped, how a deletion is
judged. A property over generated Jobs, plus what the trim drops."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from podwright.core.lifecycle import Phase, PluginState
from podwright.core.lifecycle.deletion import deletion_of
from podwright.core.lifecycle.plugin_state import ManagerPhase
from podwright.engine.config import LifecycleConfig
from podwright.engine.plugins import JobPlugin

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
CONDITIONS = ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet", "Suspended")


def _stamp(seconds: int) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    conditions = [
        {
            "type": kind,
            "status": draw(st.sampled_from(["True", "False"])),
            "reason": draw(st.sampled_from(["", "BackoffLimitExceeded", "DeadlineExceeded"])),
            "message": draw(st.sampled_from(["", "queued by KAI"])),
            "lastTransitionTime": _stamp(draw(st.integers(0, 600))),
        }
        for kind in draw(st.lists(st.sampled_from(CONDITIONS), unique=True, max_size=3))
    ]
    counts = {
        name: draw(st.integers(0, 3))
        for name in draw(
            st.lists(st.sampled_from(["active", "ready", "failed", "succeeded", "terminating"]))
        )
    }
    metadata: dict[str, Any] = {
        "name": "train-1",
        "namespace": "ml",
        "uid": "0f6e",
        "resourceVersion": "7",
        "finalizers": ["podwright.dev/finalizer"],
        "managedFields": [{"manager": "podwright", "operation": "Update"}],
    }
    if draw(st.booleans()):
        metadata["deletionTimestamp"] = _stamp(-30)
        metadata["deletionGracePeriodSeconds"] = 30
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "backoffLimit": draw(st.integers(0, 4)),
            "completions": draw(st.sampled_from([None, 1, 2])),
            "suspend": draw(st.booleans()),
            "template": {
                "metadata": {"labels": {"app": "train"}},
                "spec": {
                    "restartPolicy": draw(st.sampled_from(["Never", "OnFailure"])),
                    "containers": [{"name": "main", "image": "busybox:1.36"}],
                },
            },
        },
        "status": {"conditions": conditions, **counts},
    }


@given(jobs(), st.sampled_from([Phase.QUEUED, Phase.INITIALIZING, Phase.RUNNING]))
def test_a_trimmed_job_is_judged_as_the_whole_one(job: dict[str, Any], reached: Phase) -> None:
    plugin = JobPlugin()
    state = PluginState(ManagerPhase.STARTED, reached, 3, "")
    trimmed = plugin.trim(job)
    config = LifecycleConfig()
    assert plugin.phase(trimmed, state, NOW, config) == plugin.phase(job, state, NOW, config)
    assert plugin.failed_at(trimmed) == plugin.failed_at(job)
    assert plugin.stopped(trimmed) == plugin.stopped(job)
    assert deletion_of(trimmed, "Job") == deletion_of(job, "Job")


def test_the_trim_keeps_the_restart_policy_of_the_pod_template_and_drops_the_rest() -> None:
    job = {
        "metadata": {"name": "train-1", "managedFields": [{"manager": "kubectl"}]},
        "spec": {
            "parallelism": 1,
            "template": {
                "metadata": {"labels": {"app": "train"}},
                "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "main"}]},
            },
        },
        "status": {"active": 1},
    }
    assert JobPlugin().trim(job) == {
        "metadata": {"name": "train-1"},
        "spec": {"parallelism": 1, "template": {"spec": {"restartPolicy": "OnFailure"}}},
        "status": {"active": 1},
    }
