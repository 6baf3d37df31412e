"""The benchmark measures what the issue asks for: its scenario is checked here, not timed."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks import policy_bench, render_bench

from podwright.core.effective_policy import effective_policy
from podwright.core.evaluation import evaluate, prepare
from podwright.core.render import profile_from_data, render
from podwright.core.workloads import submission_from_data


def test_the_policy_benchmark_scenario_is_realistic_and_accepted() -> None:
    tree = policy_bench.realistic_tree()
    assert [str(policy.scope) for policy in tree] == [
        "cluster prod",
        "department research",
        "project vision",
    ]
    assert policy_bench.count_rules(tree) >= 40
    effective = effective_policy(tree, policy_bench.PROJECT, policy_bench.TRAINING)
    sizes = [len(instances) for instances in effective.instances.values()]
    assert sum(size >= 5 for size in sizes) >= 3
    submission = submission_from_data(policy_bench.realistic_submission())
    evaluation = evaluate(
        prepare(effective, policy_bench.CATALOGUE),
        submission,
        policy_bench.TRAINING,
        policy_bench.CATALOGUE,
    )
    assert evaluation.accepted, evaluation.violations
    assert evaluation == evaluate(
        effective, submission, policy_bench.TRAINING, policy_bench.CATALOGUE
    )


def test_the_scaling_scenarios_grow_as_labelled() -> None:
    prepared, submission = policy_bench.scaled_fields(10)
    assert len(prepared.policy.rules) == 10
    evaluation = evaluate(prepared, submission, policy_bench.TRAINING, policy_bench.CATALOGUE)
    assert evaluation.accepted
    assert len(evaluation.values) == 11


def test_the_render_benchmark_renders_every_example() -> None:
    profile = profile_from_data(render_bench.example_profile_data())
    submissions = render_bench.example_submissions()
    assert len(submissions) == 10  # examples/workload-*.yaml
    for submission in submissions.values():
        assert submission.name is not None
        rendering = render(
            submission.workload_type, submission.name, submission.spec, profile=profile
        )
        assert rendering.manifests


def test_the_lifecycle_benchmark_scenario_runs_every_task_to_the_end() -> None:
    from benchmarks import lifecycle_bench

    from tests.k8s_emulator import Emulator

    with Emulator() as emulator:
        results = lifecycle_bench.run(emulator.url, 20)
    assert results["steady_state_requests"] == 0
    assert results["requests_per_task_by_verb"] == {"create": 1.0, "delete": 1.0, "patch": 1.0}


def test_the_fuse_proxy_benchmark_runs_its_scenario_without_errors() -> None:
    """A short run of every part (latency, concurrency, read throughput, pings during a flood,
    SIGTERM to exit), in its own namespace."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from tests.fuse_proxy_real.harness import require_real_fuse

    require_real_fuse()
    bench = Path(__file__).resolve().parent.parent / "benchmarks" / "fuse_proxy_bench.py"
    completed = subprocess.run(
        [
            *(sys.executable, str(bench), "--cycles", "5", "--callers", "5", "--file-mib", "2"),
            *("--pings", "20", "--stop-runs", "1"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    figures = json.loads(completed.stdout[: completed.stdout.rindex("}") + 1])
    assert figures["concurrent_errors"] == 0
    assert figures["through_proxy"]["p50_ms"] > 0
    assert figures["read_proxied_mib_s"] > 0
    assert figures["flood_connections"] > 300
    assert figures["ping_during_flood_from_another_uid"]["p50_ms"] > 0
    assert figures["sigterm_exit_statuses"] == [0]
    assert "mount+unmount p50: direct fusermount3" in completed.stdout


def test_the_executor_benchmark_runs_every_task_to_success_on_both_backends(
    tmp_path: Path,
) -> None:
    from benchmarks import executor_bench

    cluster = executor_bench.bench_cluster(20, tmp_path)
    assert cluster["phases"] == {"Success": 20}
    assert cluster["requests_per_task_by_verb"]["create"] == 1.0
    assert cluster["requests_per_task_by_verb"]["delete"] == 1.0
    local = executor_bench.bench_local(3, tmp_path)
    assert local["phases"] == {"Success": 3}
    assert local["running_p50_seconds"] > 0


def test_the_startup_benchmark_starts_every_command_it_times() -> None:
    from benchmarks import startup_bench

    figures = startup_bench.measure(1)
    for name in startup_bench.COMMANDS:
        row = figures[name]
        assert isinstance(row, dict)
        assert row["median_ms"] > 0
    assert figures[startup_bench.BASELINE]["ratio"] == 1.0  # type: ignore[index]


def test_the_webhook_benchmark_scenario_is_fifty_policies_over_four_scopes_without_conflicts() -> (
    None
):
    from collections import Counter

    from benchmarks import webhook_bench

    from podwright.core.admission import conflicts

    policies = webhook_bench.admission_service()._state.snapshot().policies
    assert len(policies) == 50
    assert Counter(policy.scope.level for policy in policies) == {
        "tenant": 4,
        "cluster": 4,
        "department": 12,
        "project": 30,
    }
    assert {policy.workload_type.value for policy in policies} == set(webhook_bench.TYPES)
    for policy in policies:
        assert conflicts(policy, [other for other in policies if other is not policy]) == []


@pytest.mark.parametrize("single_webhook", [False, True], ids=["two-calls", "one-call"])
def test_the_webhook_benchmark_gets_the_right_answer_to_every_review_and_create(
    single_webhook: bool,
) -> None:
    """About a second of reviews: every answer checked (allowed or refused as it should be,
    defaults patched in, every issue named)."""
    from benchmarks import webhook_bench

    latency = webhook_bench.bench_latency(
        seconds=1, rate=100, connections=2, single_webhook=single_webhook, answer_inline=True
    )
    assert latency["first_wrong_answers"] == []
    assert latency["reviews"] == 100
    assert latency["p99_ms"] > 0


def test_the_webhook_benchmark_admits_every_create_through_the_emulator_both_ways() -> None:
    from benchmarks import webhook_bench

    end_to_end = webhook_bench.bench_end_to_end(
        workloads=20, clients=2, cost_model=None, answer_inline=True
    )
    assert end_to_end["first_wrong_answers"] == []
    assert end_to_end["wrong_answers"] == 0
    for calls in ("two_calls", "one_call"):
        assert end_to_end[f"creates_per_second_podwright_{calls}"] > 0


def test_the_operator_benchmark_workload_is_admitted_and_runs_on_the_simulated_nodes() -> None:
    """The Workload the operator benchmark creates passes the CRD's schema, renders with the
    default profile onto the simulated nodes (their label), with a PriorityClass the benchmark
    creates and the annotations that make the simulator run its pod a second; and the round
    latency quantiles interpolate as Prometheus' histogram_quantile does."""
    import math

    import yaml
    from benchmarks import operator_bench

    from podwright.adapters.kubernetes import KubernetesClient
    from podwright.core.cluster_resources import submission_from_resource
    from podwright.core.render import DEFAULT_PROFILE
    from tests.k8s_emulator import Emulator

    with Emulator() as emulator:
        client = KubernetesClient.for_host(emulator.url)
        try:
            operator_bench.install(client, "bench")
            stored = client.create(operator_bench.workload("bench", "bench-00000"))
        finally:
            client.close()
    submission = submission_from_resource(stored)
    rendering = render(
        submission.workload_type,
        "bench-00000",
        submission.spec,
        profile=DEFAULT_PROFILE,
        namespace="bench",
    )
    (job,) = rendering.manifests
    template = job["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    assert annotations["sim.podwright.dev/run-seconds.main"] == operator_bench.RUN_SECONDS
    node_labels = operator_bench.node_shapes(1)[0]["labels"]
    assert template["spec"]["nodeSelector"].items() <= node_labels.items()
    classes = yaml.safe_load_all(operator_bench.PRIORITY_CLASSES.read_text())
    assert template["spec"]["priorityClassName"] in {c["metadata"]["name"] for c in classes}
    buckets = [(0.1, 0.0), (1.0, 10.0), (math.inf, 10.0)]
    assert operator_bench.histogram_quantile(0.5, buckets) == 0.55
    assert operator_bench.histogram_quantile(0.99, [(0.1, 5.0), (math.inf, 10.0)]) == 0.1


def test_the_operator_benchmark_floor_runs_its_jobs_through_the_emulator_with_the_cost_model() -> (
    None
):
    """The floor: the Job ``podwright render`` makes of the benchmark's Workload, created
    straight through an emulator that charges a (tiny) cost model, each timed to Running and to
    finished on the node simulator; and the ratios beside the operator's figures."""
    from benchmarks import operator_bench
    from kubernetes import client as k8s_client

    from podwright.adapters.kubernetes import KubernetesClient
    from tests.k8s_emulator import Emulator
    from tests.k8s_emulator.cost_model import CostModel
    from tests.node_sim import NodeShape, NodeSimulator

    job = operator_bench.floor_job("bench", "floor-00000")
    assert (job["kind"], job["metadata"]["name"]) == ("Job", "floor-00000")
    selector = job["spec"]["template"]["spec"]["nodeSelector"]
    assert selector.items() <= operator_bench.node_shapes(1)[0]["labels"].items()

    cost = CostModel(
        write_latency=0.001, max_writes_in_flight=2, controller_qps=200, controller_burst=5
    )
    with Emulator(cost_model=cost) as emulator:
        client = KubernetesClient.for_host(emulator.url)
        raw = k8s_client.ApiClient(k8s_client.Configuration(host=emulator.url))
        try:
            operator_bench.install(client, "bench")
            nodes = [
                NodeShape(shape["capacity"], shape["labels"])
                for shape in operator_bench.node_shapes(3)
            ]
            with NodeSimulator(client, raw, nodes=nodes, namespace="bench"):
                figures = operator_bench.floor(client, "bench", count=3, clients=2, timeout=60)
        finally:
            raw.close()
            client.close()
    assert figures["jobs"] == 3
    assert 0 < figures["create_seconds"] <= figures["all_running_seconds"]
    assert figures["all_running_seconds"] <= figures["all_finished_seconds"] < 60
    assert operator_bench.ratio(30.0, 20.0) == 1.5
    assert operator_bench.ratio(30.0, None) is None


def test_the_console_benchmark_writes_statuses_the_api_reads_as_the_intended_tasks(
    tmp_path: Path,
) -> None:
    """The console benchmark's Workloads, created with the statuses it writes as the operator
    does (a few, through an emulator without its cost model), read back through podwright.api
    on the operator backend as tasks in the intended phases, the ended ones finalized; a phase
    change it writes reads back too; and the console's requests are told from the benchmark's
    by their tokens."""
    from benchmarks import console_bench

    from podwright import api
    from podwright.adapters.kubernetes import KubernetesClient, connect
    from tests.k8s_emulator import Emulator

    count = len(console_bench.MIX)
    with Emulator() as emulator:
        writer = tmp_path / "writer"
        writer.write_text(console_bench.kubeconfig_text(emulator.url, console_bench.WRITER_TOKEN))
        reader = tmp_path / "reader"
        reader.write_text(console_bench.kubeconfig_text(emulator.url, console_bench.CONSOLE_TOKEN))
        client = KubernetesClient(connect(str(writer)))
        try:
            console_bench.install(client, console_bench.NAMESPACE)
            workloads = console_bench.Workloads(client, console_bench.NAMESPACE)
            workloads.populate(count, threads=2)
            with api.Client(
                "operator", kubeconfig=str(reader), namespace=console_bench.NAMESPACE
            ) as tasks:
                records = {record.task.name: record for record in tasks.list()}
                assert {name: record.phase for name, record in records.items()} == {
                    console_bench.workload(console_bench.NAMESPACE, index)["metadata"]["name"]: (
                        console_bench.phase_of(index)
                    )
                    for index in range(count)
                }
                for record in records.values():
                    assert record.finalized == record.phase.is_terminal
                    assert record.task.manifests[0]["kind"] == "Job"
                    steps = console_bench.STEPS[record.phase]
                    history = [entry.phase for entry in tasks.get(record.task_id).history]
                    assert history == list(steps)
                queued = next(name for name, r in records.items() if r.phase is api.Phase.QUEUED)
                running = next(name for name, r in records.items() if r.phase is api.Phase.RUNNING)
                changes = [workloads.change(queued), workloads.change(running)]
                after = {record.task.name: record for record in tasks.list()}
            assert [change.phase for change in changes] == ["Initializing", "Queued"]
            assert after[queued].phase is api.Phase.INITIALIZING
            assert after[running].phase is api.Phase.QUEUED
            assert [change.task_id for change in changes] == [
                after[queued].task_id,
                after[running].task_id,
            ]
        finally:
            client.close()
        assert emulator.requests(token=console_bench.CONSOLE_TOKEN) > 0
        writes = emulator.requests("update", token=console_bench.WRITER_TOKEN)
        assert writes == count + len(changes)  # one status update each, one a change
