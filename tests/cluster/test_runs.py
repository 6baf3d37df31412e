"""``podwright run --backend kubernetes`` as a user runs it, from submission to the task's end:

* the workspace example (a Pod, its Service and its claims) and the training example (a Job, whose
  pod the Job controller makes) to Success, with what they created named per task, a persistent
  claim outliving the task while the Service and an ephemeral claim go with the pod;
* a failure with the reason the container's end gives: a non-zero exit code, an OOM kill, an
  image that cannot be pulled;
* ``podwright abort``; the task's pod deleted by someone else; a ResourceQuota that refuses the
  pod (its amounts, or containers that leave out what it tracks: a workspace's pod, and a
  training Job's, which its controller creates), and one a workload with data sources fits.

Every task ends with podwright's finalizer removed from what it created: nothing is left
Terminating.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from podwright.engine.config import FINALIZER
from tests.cluster.nodes import RUNS_UNTIL_DELETED, PodOutcome
from tests.cluster.support import EXAMPLES, ClusterUnderTest, podwright_command, task_id_of
from tests.kube.support import eventually

WORKSPACE = "workload-workspace.yaml"
SMALL = {"cpuCoreRequest": 0.1, "cpuMemoryRequest": "64Mi", "cpuMemoryLimit": "128Mi"}
"""A workspace's compute without the example's half GPU (a fraction needs the KAI scheduler)."""
EXIT_CODE_FAILED = 3


def lifecycle(directory: Path, **settings: object) -> Path:
    """A lifecycle configuration with podwright's finalizer and ``settings``."""
    path = directory / "lifecycle.yaml"
    lines = [f"{key}: {value}" for key, value in {"injectFinalizer": "true", **settings}.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def assert_nothing_held(kube_cluster: ClusterUnderTest, task_id: str) -> None:
    """No object of the task keeps podwright's finalizer, and none is left Terminating."""

    def released() -> bool:
        for kind in ("Pod", "Service", "PersistentVolumeClaim"):
            for obj in kube_cluster.task_objects(task_id, kind):
                metadata = obj["metadata"]
                assert FINALIZER not in (metadata.get("finalizers") or []), obj
                assert not metadata.get("deletionTimestamp"), obj
        return True

    eventually(released)


def test_a_workspace_runs_to_success_and_its_persistent_claim_outlives_it(
    kube_cluster: ClusterUnderTest,
) -> None:
    storage = yaml.safe_load((EXAMPLES / WORKSPACE).read_text())["spec"]["storage"]
    scratch = {
        "name": "scratch",
        "path": "/scratch",
        "ephemeral": True,
        "claimInfo": {"size": "1Gi"},
    }
    storage["pvc"].append(scratch)
    example = kube_cluster.workload(
        WORKSPACE, compute=SMALL, restartPolicy="Never", storage=storage
    )
    config = lifecycle(kube_cluster.directory, deleteResourceOnFinalize="true")
    result = kube_cluster.run(example, "--lifecycle-config", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].endswith("s  Success"), result.stdout
    task_id = task_id_of(result.stdout)
    # Finalized with deleteResourceOnFinalize: the pod is deleted, its Service with it (owned by
    # it, the garbage collector's work); the claim, owned by nobody, stays.
    eventually(lambda: not kube_cluster.task_objects(task_id, "Pod"))
    eventually(lambda: not kube_cluster.task_objects(task_id, "Service"))
    (claim,) = kube_cluster.task_objects(task_id, "PersistentVolumeClaim")
    assert claim["metadata"]["name"] == "notebook-ada-work"
    assert "ownerReferences" not in claim["metadata"]
    # The ephemeral claim (made by the cluster's ephemeral volume controller, owned by the pod,
    # pkg/controller/volume/ephemeral) goes with the pod.
    eventually(lambda: not kube_cluster.has("PersistentVolumeClaim", f"{task_id}-pvc-scratch"))
    assert_nothing_held(kube_cluster, task_id)


def test_a_workspace_names_its_pod_and_service_after_the_task_and_owns_the_service(
    kube_cluster: ClusterUnderTest,
) -> None:
    example = kube_cluster.workload(WORKSPACE, RUNS_UNTIL_DELETED, compute=SMALL)
    runner = kube_cluster.start_run(example)
    assert runner.stdout is not None
    task_id = task_id_of(runner.stdout.readline())
    eventually(lambda: kube_cluster.podwright.reached(task_id, "Running"), timeout=60)
    (pod,) = kube_cluster.task_objects(task_id, "Pod")
    (service,) = eventually(lambda: kube_cluster.task_objects(task_id, "Service"))
    (claim,) = kube_cluster.task_objects(task_id, "PersistentVolumeClaim")
    assert (pod["metadata"]["name"], service["metadata"]["name"]) == (task_id, task_id)
    assert claim["metadata"]["name"] == "notebook-ada-work"
    owner = {"apiVersion": "v1", "kind": "Pod", "name": task_id, "uid": pod["metadata"]["uid"]}
    assert service["metadata"]["ownerReferences"] == [owner]
    assert service["spec"]["selector"]["podwright.dev/task-id"] == task_id
    assert FINALIZER in pod["metadata"]["finalizers"]

    aborted = kube_cluster.podwright.abort(task_id)
    assert aborted.returncode == 0, aborted.stderr
    output, errors = runner.communicate(timeout=120)
    assert runner.returncode == 4, output + errors
    assert output.splitlines()[-1].endswith("s  Aborted  aborted on request"), output
    assert_nothing_held(kube_cluster, task_id)


def test_a_training_job_runs_to_success(kube_cluster: ClusterUnderTest) -> None:
    """The Job controller makes the Job's pod (``pkg/controller/job``): nothing of podwright's
    creates it."""
    example = kube_cluster.workload("workload-training.yaml", image="busybox:1", compute=SMALL)
    result = kube_cluster.run(example)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].endswith("s  Success"), result.stdout
    task_id = task_id_of(result.stdout)
    (job,) = kube_cluster.task_objects(task_id, "Job", "batch/v1")
    assert job["metadata"]["name"] == task_id
    assert FINALIZER not in (job["metadata"].get("finalizers") or [])


def test_without_namespace_a_run_goes_to_the_kubeconfig_contexts_namespace(
    kube_cluster: ClusterUnderTest,
) -> None:
    """As kubectl chooses it: the current context's namespace (what ``kubectl config set-context
    --current --namespace`` writes), in a copy of the test's kubeconfig."""
    config = yaml.safe_load(kube_cluster.podwright.kubeconfig.read_text())
    for context in config["contexts"]:
        if context["name"] == config["current-context"]:
            context["context"]["namespace"] = kube_cluster.namespace
    kubeconfig = kube_cluster.directory / "kubeconfig-with-namespace"
    kubeconfig.write_text(yaml.safe_dump(config))
    example = kube_cluster.workload("workload-training.yaml", image="busybox:1", compute=SMALL)
    kube_cluster.installs.priority_classes(kube_cluster.profile)
    result = podwright_command(
        *("run", "--workload", str(example), "--backend", "kubernetes"),
        *("--kubeconfig", str(kubeconfig), "--home", str(kube_cluster.podwright.home)),
        *("--profile", str(kube_cluster.profile)),
        cwd=kube_cluster.directory,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (job,) = kube_cluster.task_objects(task_id_of(result.stdout), "Job", "batch/v1")
    assert job["metadata"]["namespace"] == kube_cluster.namespace


@pytest.mark.parametrize(
    ("outcome", "settings", "ending"),
    [
        pytest.param(
            PodOutcome(exit_code=EXIT_CODE_FAILED),
            {},
            f"[main] terminated with exit code {EXIT_CODE_FAILED}, reason Error",
            id="exit-code",
        ),
        pytest.param(
            PodOutcome(oom_killed=True),
            {},
            "[main] terminated with exit code 137, reason OOMKilled",
            id="oom-killed",
        ),
        pytest.param(
            PodOutcome(image_pull_error=True),
            {"gracePeriods": "{imagePullBackOff: 0s}"},
            "[main] ImagePullBackOff",
            id="image-pull",
        ),
    ],
)
def test_a_workspace_that_fails_ends_with_the_reason_its_container_gives(
    kube_cluster: ClusterUnderTest, outcome: PodOutcome, settings: dict[str, str], ending: str
) -> None:
    example = kube_cluster.workload(WORKSPACE, outcome, compute=SMALL, restartPolicy="Never")
    config = lifecycle(kube_cluster.directory, **settings)
    result = kube_cluster.run(example, "--lifecycle-config", str(config))
    assert result.returncode == 3, result.stdout + result.stderr
    # The pod's failure, or its primary container's, whichever the executor saw first: both
    # name the container and why it ended.
    assert "  RetryableFailure  " in result.stdout, result.stdout
    assert ending in result.stdout, result.stdout
    assert_nothing_held(kube_cluster, task_id_of(result.stdout))


def test_a_pod_deleted_by_someone_else_ends_its_task_as_the_platforms_failure(
    kube_cluster: ClusterUnderTest,
) -> None:
    """``kubectl delete pod``: the task is not the user's failure (SystemRetryableFailure,
    UnexpectedObjectDeletion), and podwright's finalizer, which held the pod for it to see,
    is removed."""
    example = kube_cluster.workload(WORKSPACE, RUNS_UNTIL_DELETED, compute=SMALL)
    runner = kube_cluster.start_run(example)
    assert runner.stdout is not None
    task_id = task_id_of(runner.stdout.readline())
    eventually(lambda: kube_cluster.podwright.reached(task_id, "Running"), timeout=60)
    kube_cluster.client.delete(kube_cluster.ref("Pod", task_id))
    output, errors = runner.communicate(timeout=120)
    assert runner.returncode == 3, output + errors
    # Seen before or after the kubelet stopped its containers, the message names the pod and
    # its deletion either way.
    ending = f"SystemRetryableFailure  Pod {kube_cluster.namespace}/{task_id} "
    (line,) = [line for line in output.splitlines() if ending in line]
    assert "deleted" in line.removeprefix(ending), output
    eventually(lambda: not kube_cluster.task_objects(task_id, "Pod"))


def quota(kube_cluster: ClusterUnderTest, name: str, hard: dict[str, str]) -> None:
    """A ResourceQuota in the test's namespace, once its status says what it tracks (the
    admission plugin constrains pods by ``status.hard``, which the quota controller writes)."""
    kube_cluster.client.create(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": kube_cluster.namespace},
            "spec": {"hard": hard},
        }
    )
    eventually(
        lambda: (
            kube_cluster.client.get(kube_cluster.ref("ResourceQuota", name))
            .get("status", {})
            .get("hard")
        )
    )


def test_a_resource_quota_that_refuses_the_pod_fails_the_task_naming_it(
    kube_cluster: ClusterUnderTest,
) -> None:
    """The quota admission plugin refuses a pod whose requests alone exceed the quota's hard
    limit (403, ``exceeded quota: <name>, requested: ...``; plugin/pkg/admission/resourcequota):
    it can never be admitted, and the task fails permanently. The workspace's git clone and S3
    adapter state cpu and memory (the profile's helperResources), so the quota compares amounts
    rather than refusing them as containers that leave out what it tracks."""
    quota(kube_cluster, "tiny", {"requests.cpu": "50m", "limits.memory": "1Gi"})
    example = kube_cluster.workload(WORKSPACE, compute=SMALL, restartPolicy="Never")
    result = kube_cluster.run(example)
    assert result.returncode == 3, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert "PermanentFailure  the request exceeds the quota's hard limit" in last, result.stdout
    assert "exceeded quota: tiny" in last, result.stdout
    assert not kube_cluster.task_objects(task_id_of(result.stdout), "Pod")


STATED = {**SMALL, "cpuCoreLimit": 0.5}
"""``SMALL`` with a cpu limit: cpu and memory requested and limited."""


def test_a_workload_with_data_sources_runs_under_a_quota_that_tracks_cpu_and_memory(
    kube_cluster: ClusterUnderTest,
) -> None:
    """A quota on requests and limits of cpu and memory needs every container, init containers
    included, to state them (pkg/quota/v1/evaluator/core/pods.go, ``podEvaluator.Constraints``):
    the workspace's clone and S3 adapter do, so a workload that states its own runs."""
    quota(
        kube_cluster,
        "compute",
        {
            "requests.cpu": "2",
            "requests.memory": "2Gi",
            "limits.cpu": "4",
            "limits.memory": "4Gi",
        },
    )
    example = kube_cluster.workload(WORKSPACE, compute=STATED, restartPolicy="Never")
    result = kube_cluster.run(example)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].endswith("s  Success"), result.stdout
    (pod,) = kube_cluster.task_objects(task_id_of(result.stdout), "Pod")
    assert [c["name"] for c in pod["spec"]["initContainers"]] == [
        "clone-git-course",
        "fuse-s3-datasets",
    ]


def test_containers_that_leave_out_what_a_quota_tracks_fail_the_task_naming_them(
    kube_cluster: ClusterUnderTest,
) -> None:
    """A quota on ``limits.cpu`` refuses a pod whose workload container states no cpu limit
    (403 ``failed quota: <name>: must specify limits.cpu for: main``), before it compares any
    amount: no retry can mend it, so the task fails permanently, naming the container."""
    quota(kube_cluster, "strict", {"limits.cpu": "4"})
    example = kube_cluster.workload(WORKSPACE, compute=SMALL, restartPolicy="Never")
    result = kube_cluster.run(example)
    assert result.returncode == 3, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert "PermanentFailure  ResourceQuota strict needs every container to specify" in last, (
        result.stdout
    )
    assert "these do not: main (limits.cpu)" in last, result.stdout
    assert "failed quota: strict: must specify limits.cpu for: main" in last, result.stdout
    assert not kube_cluster.task_objects(task_id_of(result.stdout), "Pod")


def test_a_training_job_whose_container_leaves_out_what_a_quota_tracks_fails_naming_it(
    kube_cluster: ClusterUnderTest,
) -> None:
    """The Job controller creates the training pod, so the quota's refusal reaches podwright only
    as the controller's Warning on the Job, ``FailedCreate``, ``Error creating: pods "..." is
    forbidden: failed quota: strict: must specify limits.cpu for: main``
    (``RealPodControl.createPods`` in pkg/controller/controller_utils.go), while the controller
    tries again and again: the task fails permanently all the same, naming the container, and
    the Job is deleted."""
    quota(kube_cluster, "strict", {"limits.cpu": "4"})
    example = kube_cluster.workload("workload-training.yaml", image="busybox:1", compute=SMALL)
    result = kube_cluster.run(example)
    assert result.returncode == 3, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert "PermanentFailure  ResourceQuota strict needs every container to specify" in last, (
        result.stdout
    )
    assert "these do not: main (limits.cpu)" in last, result.stdout
    assert "Error creating: pods" in last, result.stdout
    assert "failed quota: strict: must specify limits.cpu for: main" in last, result.stdout
    task_id = task_id_of(result.stdout)
    eventually(lambda: not kube_cluster.task_objects(task_id, "Job", "batch/v1"))
    assert not kube_cluster.task_objects(task_id, "Pod")
