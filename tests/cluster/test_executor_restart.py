"""An executor killed with SIGKILL while its task runs, and another started: the new one goes on
with the task from its record, on the same pod (same uid, none created twice), and ends it with
nothing leaked."""

from __future__ import annotations

import os
import signal

from tests.cli.background import serving_executors, wait_until_gone
from tests.cluster.nodes import RUNS_UNTIL_DELETED
from tests.cluster.support import ClusterUnderTest, task_id_of
from tests.cluster.test_runs import SMALL, WORKSPACE, assert_nothing_held
from tests.kube.support import eventually


def test_a_new_executor_continues_the_task_of_one_killed_with_no_duplicate_and_no_leak(
    kube_cluster: ClusterUnderTest,
) -> None:
    podwright = kube_cluster.podwright
    example = kube_cluster.workload(WORKSPACE, RUNS_UNTIL_DELETED, compute=SMALL)
    submitted = kube_cluster.run(example, "--detach")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    task_id = task_id_of(submitted.stdout)
    eventually(lambda: podwright.reached(task_id, "Running"), timeout=60)
    (pod,) = kube_cluster.task_objects(task_id, "Pod")
    ((backend, killed),) = serving_executors(podwright.store).items()
    os.kill(killed, signal.SIGKILL)
    assert wait_until_gone(killed)

    # A new executor takes the task over from its record.
    executor = podwright.executor("--until-idle")
    try:
        eventually(lambda: serving_executors(podwright.store).get(backend) == executor.pid)
        uids = [p["metadata"]["uid"] for p in kube_cluster.task_objects(task_id, "Pod")]
        assert uids == [pod["metadata"]["uid"]]
        aborted = podwright.abort(task_id)
        assert aborted.returncode == 0, aborted.stderr
        assert f"the executor (pid {executor.pid}) stops it" in aborted.stdout
        assert executor.wait(60) == 0
    finally:
        if executor.poll() is None:
            executor.kill()
            executor.wait()
    assert podwright.phase(task_id).startswith("Aborted")
    eventually(lambda: not kube_cluster.task_objects(task_id, "Pod"))
    eventually(lambda: not kube_cluster.task_objects(task_id, "Service"))
    assert_nothing_held(kube_cluster, task_id)
