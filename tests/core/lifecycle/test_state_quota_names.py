"""Plugin state encoding, quota refusals (a create's, a controller's event), and task object
names (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.k8s_names import dns1123_label_problem
from podwright.core.lifecycle import (
    CorruptedPluginStateError,
    ManagerPhase,
    Phase,
    PhaseInfo,
    PluginState,
    decode_state,
    encode_state,
    phases,
)
from podwright.core.lifecycle.names import task_object_name
from podwright.core.lifecycle.quota import (
    parse_quota_refusal,
    parse_unspecified_resources,
    pod_creation_refused,
    quota_failure,
)

times = st.none() | st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
states = st.builds(
    PluginState,
    manager_phase=st.sampled_from(ManagerPhase),
    phase=st.sampled_from(Phase),
    phase_version=st.integers(0, 10**6),
    reason=st.text(max_size=40),
    last_event_created=times,
    last_event_recorded=times,
    launch_failures=st.integers(0, 10),
    maybe_created=st.booleans(),
    needs_created=st.booleans(),
    dependents_created=st.booleans(),
    aborting_since=times,
)


@given(states)
def test_state_round_trips_through_its_encoding(state: PluginState) -> None:
    assert decode_state(encode_state(state)) == state


@pytest.mark.parametrize("empty", [None, {}])
def test_empty_state_is_not_started(empty: dict[str, object] | None) -> None:
    assert decode_state(empty) == PluginState()


@pytest.mark.parametrize(
    "data",
    [
        {"version": 2, "managerPhase": "Started"},
        {"version": "1"},
        {"managerPhase": "Started"},
        {"version": 1, "managerPhase": "Sideways"},
        {"version": 1, "managerPhase": "Started", "plugin": {}, "lastEvent": {}},
        {**encode_state(PluginState()), "launchFailures": -1},
        {**encode_state(PluginState()), "lastEvent": {"created": "yesterday", "recorded": None}},
        {**encode_state(PluginState()), "maybeCreated": "no"},
        {**encode_state(PluginState()), "abortingSince": "soon"},
    ],
)
def test_unknown_version_or_malformed_state_is_corrupted(data: dict[str, object]) -> None:
    with pytest.raises(CorruptedPluginStateError):
        decode_state(data)


MESSAGE = (
    'pods "t-1" is forbidden: exceeded quota: compute, requested: limits.cpu=3,requests.cpu=500m, '
    "used: limits.cpu=1,requests.cpu=1, limited: limits.cpu=2,requests.cpu=4"
)


def test_quota_refusal_names_what_exceeds_the_hard_limit() -> None:
    refusal = parse_quota_refusal(MESSAGE)
    assert refusal is not None
    assert refusal.quota == "compute"
    assert refusal.requested == {"limits.cpu": "3", "requests.cpu": "500m"}
    assert refusal.exceeds_hard_limit() == ["limits.cpu: requested 3, limit 2"]


def test_quota_refusal_that_could_fit_later() -> None:
    refusal = parse_quota_refusal(MESSAGE.replace("limits.cpu=3,", "limits.cpu=1,"))
    assert refusal is not None
    assert refusal.exceeds_hard_limit() == []


def test_message_without_a_quota_refusal() -> None:
    assert parse_quota_refusal("forbidden: User cannot create pods") is None
    assert parse_unspecified_resources("forbidden: User cannot create pods") is None
    assert parse_unspecified_resources(MESSAGE) is None


MUST_SPECIFY = (
    'pods "t-1" is forbidden: failed quota: tiny: must specify limits.memory for: '
    "clone-git-course,fuse-s3-datasets; requests.cpu for: clone-git-course"
)
"""What a real v1.36 server answered (issue 30), one container less under requests.cpu."""


def test_a_must_specify_refusal_names_each_container_and_what_it_leaves_out() -> None:
    refusal = parse_unspecified_resources(MUST_SPECIFY)
    assert refusal is not None
    assert refusal.quota == "tiny"
    assert refusal.containers == {
        "clone-git-course": ["limits.memory", "requests.cpu"],
        "fuse-s3-datasets": ["limits.memory"],
    }
    assert parse_quota_refusal(MUST_SPECIFY) is None
    assert (
        "ResourceQuota tiny needs every container to specify the resources it tracks, and these "
        "do not: clone-git-course (limits.memory, requests.cpu); fuse-s3-datasets (limits.memory)"
    ) in refusal.explain()


NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def test_a_quota_failure_is_permanent_only_when_no_wait_can_mend_it() -> None:
    unspecified = quota_failure(MUST_SPECIFY, NOW)
    assert unspecified is not None
    assert unspecified.phase is Phase.PERMANENT_FAILURE
    assert unspecified.reason == "ResourcesNotSpecified"
    assert unspecified.error is not None
    refusal = parse_unspecified_resources(MUST_SPECIFY)
    assert refusal is not None
    assert unspecified.error.message == f"{refusal.explain()} ({MUST_SPECIFY})"
    over = quota_failure(MESSAGE, NOW)
    assert over is not None
    assert over.reason == "ResourceRequestsExceedLimits"
    assert over.error is not None
    assert over.error.message == (
        f"the request exceeds the quota's hard limit (limits.cpu: requested 3, limit 2): {MESSAGE}"
    )
    assert quota_failure(MESSAGE.replace("limits.cpu=3,", "limits.cpu=1,"), NOW) is None
    assert quota_failure("forbidden: User cannot create pods", NOW) is None


@dataclass(frozen=True)
class _Event:
    reason: str
    note: str
    type: str = "Warning"


def _failed_create(message: str, reason: str = "FailedCreate") -> _Event:
    return _Event(reason, f"Error creating: {message}")


WAITING = phases.queued(NOW, "job started, but has no pod (see the job's events)")
FITS_LATER = MESSAGE.replace("limits.cpu=3,", "limits.cpu=1,")


@pytest.mark.parametrize(
    ("events", "deciding"),
    [
        pytest.param([_failed_create(MUST_SPECIFY)], MUST_SPECIFY, id="must-specify"),
        pytest.param(
            [_failed_create(MUST_SPECIFY, "FailedCreatePod")], MUST_SPECIFY, id="kubeflow-reason"
        ),
        pytest.param([_failed_create(MESSAGE)], MESSAGE, id="over-the-hard-limit"),
        pytest.param(
            [_failed_create(FITS_LATER), _failed_create(MUST_SPECIFY), _Event("Other", "x")],
            MUST_SPECIFY,
            id="the-latest-refusal",
        ),
    ],
)
def test_a_controllers_pod_create_refused_for_good_fails_the_task_with_cleanup(
    events: list[_Event], deciding: str
) -> None:
    """The refusal reaches podwright only as the controller's Warning on its object; the task
    fails as the same refusal of a create of its own would, and the resource goes (its
    controller would retry for ever)."""
    info = pod_creation_refused(WAITING, lambda: events, NOW)
    expected = quota_failure(f"Error creating: {deciding}", NOW)
    assert expected is not None
    assert info.phase is Phase.PERMANENT_FAILURE
    assert (info.reason, info.error) == (expected.reason, expected.error)
    assert info.cleanup_on_failure


@pytest.mark.parametrize(
    ("info", "events"),
    [
        pytest.param(WAITING, [], id="no-event"),
        pytest.param(WAITING, [_failed_create(FITS_LATER)], id="may-fit-later"),
        pytest.param(
            WAITING,
            [_failed_create(MUST_SPECIFY), _failed_create(FITS_LATER)],
            id="latest-may-fit-later",
        ),
        pytest.param(WAITING, [_Event("FailedCreate", MUST_SPECIFY, "Normal")], id="not-warning"),
        pytest.param(WAITING, [_Event("FailedScheduling", MUST_SPECIFY)], id="other-reason"),
        pytest.param(
            phases.initializing(NOW, "1 pod(s) starting"),
            [_failed_create(MUST_SPECIFY)],
            id="pods-started",
        ),
        pytest.param(phases.running(NOW), [_failed_create(MUST_SPECIFY)], id="running"),
    ],
)
def test_a_refusal_that_may_pass_or_one_once_pods_started_leaves_the_phase(
    info: PhaseInfo, events: list[_Event]
) -> None:
    assert pod_creation_refused(info, lambda: events, NOW) is info


def test_the_events_of_a_resource_whose_pods_started_are_not_read() -> None:
    def unread() -> list[_Event]:
        raise AssertionError("the events were read")

    running = phases.running(NOW)
    assert pod_creation_refused(running, unread, NOW) is running


@given(st.text(min_size=1, max_size=200), st.integers(12, 63))
def test_task_object_names_are_dns1035_labels_within_the_length(task_id: str, length: int) -> None:
    name = task_object_name(task_id, length)
    assert dns1123_label_problem(name) is None
    assert name[0].isalpha()
    assert len(name) <= length
    assert task_object_name(task_id, length) == name


@given(st.lists(st.text(min_size=1, max_size=80), min_size=2, max_size=2, unique=True))
def test_distinct_task_ids_get_distinct_names(ids: list[str]) -> None:
    assert task_object_name(ids[0], 40) != task_object_name(ids[1], 40)


def test_clean_task_id_is_kept_as_is() -> None:
    assert task_object_name("train-42", 63) == "train-42"
    assert task_object_name("42-train", 63).startswith("t-42-train-")


def test_name_too_short_to_be_collision_safe_is_refused() -> None:
    with pytest.raises(ValueError, match="max_length"):
        task_object_name("task", 8)


def test_state_times_keep_their_zone() -> None:
    moment = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=5)
    state = PluginState(last_event_created=moment, last_event_recorded=moment)
    assert decode_state(encode_state(state)).last_event_created == moment


@pytest.mark.parametrize(
    ("manager_phase", "maybe_created", "dependents_created"),
    [(ManagerPhase.NOT_STARTED, True, False), (ManagerPhase.STARTED, True, True)],
)
def test_a_state_written_before_the_launch_keys_assumes_least(
    manager_phase: ManagerPhase, maybe_created: bool, dependents_created: bool
) -> None:
    older = encode_state(PluginState(manager_phase))
    for key in ("maybeCreated", "needsCreated", "dependentsCreated", "abortingSince"):
        del older[key]
    state = decode_state(older)
    assert (state.maybe_created, state.needs_created, state.dependents_created) == (
        maybe_created,
        False,
        dependents_created,
    )
    assert state.aborting_since is None


@pytest.mark.parametrize(
    ("state", "never_created"),
    [
        (PluginState(), True),
        (PluginState(launch_failures=3), True),
        (PluginState(maybe_created=True), False),
        (PluginState(ManagerPhase.STARTED), False),
    ],
)
def test_only_a_task_whose_creates_never_landed_provably_has_no_resource(
    state: PluginState, never_created: bool
) -> None:
    assert state.never_created is never_created
