"""The watch cache that finds objects by a label's value (a task's pods by its task-id label):
whatever the watch tells it, in any order, its index answers as a scan of its objects would."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from podwright.adapters.kubernetes.reflector import LabelIndexedCache

LABEL = "podwright.dev/task-id"


def _pod(namespace: str, name: str, task: str | None, version: int) -> dict[str, Any]:
    labels = {"app": "x"} if task is None else {LABEL: task, "app": "x"}
    return {
        "metadata": {
            "namespace": namespace,
            "name": name,
            "labels": labels,
            "resourceVersion": str(version),
        }
    }


_CHANGES = st.lists(
    st.tuples(
        st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
        st.sampled_from(["team-a", "team-b"]),
        st.sampled_from(["p1", "p2", "p3"]),
        st.sampled_from([None, "t1", "t2"]),
    ),
    max_size=30,
)


def _scan(cache: LabelIndexedCache, namespace: str, task: str) -> list[str]:
    return sorted(
        obj["metadata"]["name"]
        for obj in cache.values()
        if obj["metadata"]["namespace"] == namespace
        and obj["metadata"]["labels"].get(LABEL) == task
    )


def _without_labels(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = {key: value for key, value in obj["metadata"].items() if key != "labels"}
    return {**obj, "metadata": metadata}


@given(listed=_CHANGES, changes=_CHANGES)
def test_the_index_answers_as_a_scan_of_the_objects_would(
    listed: list[tuple[str, str, str, str | None]], changes: list[tuple[str, str, str, str | None]]
) -> None:
    cache = LabelIndexedCache(LABEL)
    cache.replace([_pod(ns, name, task, 0) for _type, ns, name, task in listed])
    for version, (event_type, namespace, name, task) in enumerate(changes, start=1):
        cache.apply(event_type, _pod(namespace, name, task, version))
    for namespace in ("team-a", "team-b"):
        for task in ("t1", "t2"):
            found = sorted(obj["metadata"]["name"] for obj in cache.labelled(namespace, task))
            assert found == _scan(cache, namespace, task)


def test_a_relabelled_pod_moves_and_a_deleted_one_goes() -> None:
    cache = LabelIndexedCache(LABEL, trim=lambda obj: {"metadata": dict(obj["metadata"])})
    cache.apply("ADDED", _pod("team-a", "p1", "t1", 1))
    assert [o["metadata"]["resourceVersion"] for o in cache.labelled("team-a", "t1")] == ["1"]
    assert cache.labelled("team-b", "t1") == []
    cache.apply("MODIFIED", _pod("team-a", "p1", "t2", 2))
    assert cache.labelled("team-a", "t1") == []
    assert [o["metadata"]["resourceVersion"] for o in cache.labelled("team-a", "t2")] == ["2"]
    cache.apply("DELETED", _pod("team-a", "p1", "t2", 3))
    assert cache.labelled("team-a", "t2") == []
    assert len(cache) == 0


def test_the_label_is_read_before_the_trim_drops_it() -> None:
    cache = LabelIndexedCache(LABEL, trim=_without_labels)
    cache.replace([_pod("team-a", "p1", "t1", 1)])
    cache.apply("ADDED", _pod("team-a", "p2", "t1", 2))
    assert sorted(o["metadata"]["name"] for o in cache.labelled("team-a", "t1")) == ["p1", "p2"]
    cache.apply("MODIFIED", _pod("team-a", "p1", "t2", 3))
    assert [o["metadata"]["name"] for o in cache.labelled("team-a", "t1")] == ["p2"]
    assert "labels" not in cache.labelled("team-a", "t2")[0]["metadata"]
