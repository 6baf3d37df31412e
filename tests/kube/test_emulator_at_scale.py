"""The emulator stays fast as the store grows: what it reads per request and per controller pass is
what that request or controller needs, not every object stored. The benchmark
(``benchmarks/lifecycle_bench.py``, 5,000 pods) times it; these tests pin the properties that make
it so, without a clock: a controller's view holds only the objects it acts on and, brought up to
date from the change history, equals one read whole; a watch that falls behind the history ends
rather than skip events. Emulator internals: there is no real server to hold them to."""

from __future__ import annotations

import copy
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.k8s_emulator.controllers import (
    GarbageCollector,
    JobBackoff,
    JobController,
    NamespaceController,
    View,
)
from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.openapi_schema import apply_defaults
from tests.k8s_emulator.store import ApiStore, resource_type

PODS = resource_type("", "pods")
JOBS = resource_type("batch", "jobs")
EVENTS = resource_type("events.k8s.io", "events")
CONFIG_MAPS = resource_type("", "configmaps")


def _pod(name: str, **metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, **metadata},
        "spec": {"containers": [{"name": "main", "image": "registry.invalid/none:1"}]},
    }


def _views(store: ApiStore) -> dict[str, View]:
    controllers = [
        GarbageCollector(store),
        JobController(store, JobBackoff()),
        NamespaceController(store),
    ]
    views = {controller.name: View(store, controller.keeps) for controller in controllers}
    for view in views.values():
        view.refresh()
    return views


def test_a_controller_view_holds_only_what_the_controller_acts_on() -> None:
    store = ApiStore()
    for number in range(300):
        store.create(PODS, "default", _pod(f"plain-{number}"))
        store.create(
            EVENTS,
            "default",
            {"metadata": {"name": f"event-{number}"}, "reason": "Started", "type": "Normal"},
        )
    job = store.create(JOBS, "default", {"metadata": {"name": "train"}, "spec": {"template": {}}})
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "train",
        "uid": job["metadata"]["uid"],
    }
    store.create(
        PODS, "default", _pod("train-abcde", ownerReferences=[{**owner, "controller": True}])
    )
    store.create(CONFIG_MAPS, "default", {"metadata": {"name": "settings"}})

    views = _views(store)

    def held(name: str) -> set[tuple[str, str]]:
        return {(resource.kind, key_name) for resource, _ns, key_name in views[name].objects}

    assert held("garbage-collector") == {("Pod", "train-abcde")}
    assert held("job-controller") == {("Job", "train"), ("Pod", "train-abcde")}
    namespaces = {"default", "kube-system", "kube-public", "kube-node-lease"}
    assert held("namespace-controller") == {("Namespace", name) for name in namespaces}
    # Every object's uid is known, for the garbage collector's "is the owner still there?".
    assert job["metadata"]["uid"] in views["garbage-collector"].uids
    assert len(views["garbage-collector"].uids) == 300 + 300 + 1 + 1 + 1 + len(namespaces)


WRITES = st.lists(
    st.tuples(
        st.sampled_from(["create", "own", "disown", "finalize", "delete"]),
        st.integers(min_value=0, max_value=2),
    ),
    max_size=20,
)


@settings(max_examples=60, deadline=None)
@given(before=WRITES, after=WRITES)
@example(before=[("create", 0), ("own", 0)], after=[("disown", 0)])
@example(before=[("create", 0), ("finalize", 0), ("own", 0)], after=[("delete", 0)])
def test_a_view_brought_up_to_date_from_the_history_equals_one_read_whole(
    before: list[tuple[str, int]], after: list[tuple[str, int]]
) -> None:
    store = ApiStore()
    anchor = store.create(CONFIG_MAPS, "default", {"metadata": {"name": "anchor"}})
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "anchor"}
    reference["uid"] = anchor["metadata"]["uid"]

    def write(operation: str, number: int) -> None:
        name = f"pod-{number}"
        try:
            if operation == "create":
                store.create(PODS, "default", _pod(name))
            elif operation in ("own", "disown", "finalize"):
                value = {
                    "own": {"ownerReferences": [reference]},
                    "disown": {"ownerReferences": None},
                    "finalize": {"finalizers": ["example.com/hold"]},
                }[operation]
                current = store.get(PODS, "default", name)
                value["resourceVersion"] = current["metadata"]["resourceVersion"]
                store.patch(
                    PODS, "default", name, {"metadata": value}, "application/merge-patch+json"
                )
            else:
                store.delete(PODS, "default", name, grace_period_seconds=0)
        except ApiError as error:  # a write the state refuses (no such pod, or one already)
            if error.code not in (404, 409):
                raise

    for operation, number in before:
        write(operation, number)
    incremental = _views(store)
    for operation, number in after:
        write(operation, number)
    for view in incremental.values():
        view.refresh()
    whole = _views(store)
    for name, view in incremental.items():
        assert view.objects == whole[name].objects, name
        assert view.uids == whole[name].uids, name
        assert view.revision == whole[name].revision == store.resource_version


def test_a_view_whose_history_was_compacted_reads_the_store_whole_again() -> None:
    store = ApiStore(history_limit=5)
    view = _views(store)["job-controller"]
    for number in range(20):
        store.create(JOBS, "default", {"metadata": {"name": f"job-{number}"}, "spec": {}})
    assert store.changes(view.revision) is None
    assert view.refresh()
    assert [resource for resource, _obj in view.objects.values()] == [JOBS] * 20


def test_a_watch_that_falls_behind_the_history_ends_rather_than_skip_events() -> None:
    store = ApiStore(history_limit=5)
    stop = threading.Event()
    watch = store.watch(
        CONFIG_MAPS,
        "default",
        since=store.resource_version,
        selects=lambda _obj: True,
        stop=stop,
        # Were it to go on, it would end here, having sent what is left of the history.
        deadline=datetime.now(UTC) + timedelta(seconds=2),
        bookmark_every=None,
    )
    store.create(CONFIG_MAPS, "default", {"metadata": {"name": "first"}})
    assert next(watch)["object"]["metadata"]["name"] == "first"
    # The watcher reads nothing while more changes than the history holds are made.
    for number in range(20):
        store.create(CONFIG_MAPS, "default", {"metadata": {"name": f"later-{number}"}})
    assert list(watch) == []  # ended: its client resumes from "first", gets 410, and lists


class _WriteAsTheWaitTimesOut(threading.Condition):
    """The condition a watch of one kind waits on (over the store's lock), but the first
    timed-out wait finds a write made between its timeout and its taking the lock back (here:
    made while it holds the lock again, which is what the watch sees either way)."""

    def __init__(self, lock: Any, write: Any) -> None:
        super().__init__(lock)
        self._write = write

    def wait(self, timeout: float | None = None) -> bool:
        signalled = super().wait(0)
        if self._write is not None:
            write, self._write = self._write, None
            write()
        return signalled


def test_a_watch_that_times_out_as_a_write_comes_in_sends_the_write_not_a_bookmark_past_it() -> (
    None
):
    store = ApiStore()
    store.create(CONFIG_MAPS, "default", {"metadata": {"name": "before"}})
    since = store.resource_version
    store._kind_changed[CONFIG_MAPS] = _WriteAsTheWaitTimesOut(
        store._lock,
        lambda: store.create(CONFIG_MAPS, "default", {"metadata": {"name": "slipped-in"}}),
    )
    stop = threading.Event()
    events = store.watch(
        CONFIG_MAPS,
        "default",
        since=since,
        selects=lambda _obj: True,
        stop=stop,
        deadline=None,
        bookmark_every=0.01,
    )
    first = next(events)
    stop.set()
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "slipped-in")


class _CountingCondition(threading.Condition):
    """A kind's condition that counts how often its watchers are woken."""

    def __init__(self, lock: Any) -> None:
        super().__init__(lock)
        self.wakings = 0

    def notify_all(self) -> None:
        self.wakings += 1
        super().notify_all()


def test_a_write_wakes_the_watches_of_its_own_kind_only() -> None:
    store = ApiStore()
    config_map_watchers = _CountingCondition(store._lock)
    pod_watchers = _CountingCondition(store._lock)
    store._kind_changed[CONFIG_MAPS] = config_map_watchers
    store._kind_changed[PODS] = pod_watchers
    for number in range(3):
        store.create(PODS, "default", _pod(f"pod-{number}"))
    store.create(CONFIG_MAPS, "default", {"metadata": {"name": "settings"}})
    assert (pod_watchers.wakings, config_map_watchers.wakings) == (3, 1)
    store.wake_watchers()
    assert (pod_watchers.wakings, config_map_watchers.wakings) == (4, 2)


_DEFAULTING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "auto", "nullable": True},
                "note": {"type": "string"},
                "limits": {
                    "type": "object",
                    "default": {"cpu": "1"},
                    "additionalProperties": {
                        "type": "object",
                        "properties": {"unit": {"type": "string", "default": "core"}},
                    },
                },
                "steps": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "retries": {"type": "integer", "default": 0},
                            "name": {"type": "string"},
                        },
                    },
                },
            },
        },
    },
}
_LEAVES = st.one_of(st.none(), st.integers(0, 3), st.sampled_from(["a", "b"]))
_STEP = st.dictionaries(st.sampled_from(["retries", "name", "extra"]), _LEAVES, max_size=3)
_SPEC = st.dictionaries(
    st.sampled_from(["replicas", "mode", "note", "limits", "steps"]),
    st.one_of(
        _LEAVES,
        st.lists(st.one_of(_STEP, _LEAVES), max_size=3),
        st.dictionaries(
            st.sampled_from(["cpu", "gpu"]),
            st.one_of(_LEAVES, st.dictionaries(st.sampled_from(["unit"]), _LEAVES)),
            max_size=2,
        ),
    ),
    max_size=5,
)


def _defaulted_in_a_copy(value: Any, schema: dict[str, Any]) -> Any:
    """The defaulting algorithm as apiextensions-apiserver writes it (``defaulting.Default``, then
    ``PruneNonNullableNullsWithoutDefaults``) over a whole copy: the oracle."""
    value = copy.deepcopy(value)

    def default(item: Any, item_schema: dict[str, Any]) -> None:
        if isinstance(item, list):
            if isinstance(item_schema.get("items"), dict):
                for element in item:
                    default(element, item_schema["items"])
            return
        if not isinstance(item, dict):
            return
        properties = item_schema.get("properties") or {}
        for key, property_schema in properties.items():
            if "default" in property_schema and (
                key not in item or (item[key] is None and not property_schema.get("nullable"))
            ):
                item[key] = copy.deepcopy(property_schema["default"])
        for key in list(item):
            child = properties.get(key, item_schema.get("additionalProperties"))
            if not isinstance(child, dict):
                continue
            if item[key] is None and not child.get("nullable"):
                del item[key]
            else:
                default(item[key], child)

    default(value, schema)
    return value


@settings(max_examples=200, deadline=None)
@given(spec=st.one_of(_SPEC, _LEAVES))
def test_defaulting_copies_only_what_it_changes_and_leaves_its_input_alone(spec: Any) -> None:
    obj = {"spec": spec}
    before = copy.deepcopy(obj)
    defaulted = apply_defaults(obj, _DEFAULTING_SCHEMA)
    assert defaulted == _defaulted_in_a_copy(before, _DEFAULTING_SCHEMA)
    assert obj == before
