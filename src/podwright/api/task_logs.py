"""The output of a task's primary container, read a little at a time while ``run`` follows it.

* :class:`LocalLogTail`: the local backend's log files (of every pod the task's resource made, in
  order; every container's, or the one named), from the offset reached last time, whole lines
  only until the output is complete (:meth:`~LogTail.rest`). The files carry no timestamps: the
  lines of one read get the file's modification time, when the last of them was written.
* :class:`ClusterLogTail`: a cluster's pod log API, polled at most once a second with
  ``timestamps=true`` and ``sinceTime``; the lines of the last second are remembered so that a
  line is never shown twice, and each line keeps its timestamp, for ``run`` to show it in order
  with the task's phases and events. The pod is the task's own, or the newest one its controller
  made (a Job's, a Kubeflow job's primary replica, a Knative Service's revision), and the container
  the one the renderer marked primary.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from podwright.adapters.kubernetes import KubernetesClient
from podwright.core.lifecycle.objects import section, text
from podwright.engine import plugin_manager
from podwright.engine.kubernetes_port import ApiConnectionError, KubernetesError, ObjectRef

PRIMARY_ANNOTATIONS = ("podwright.dev/primary-container", "kubectl.kubernetes.io/default-container")
_PRIMARY_REPLICAS = ("master", "launcher", "chief")
_POLL_SECONDS = 1.0
API_SERVER_UNREACHABLE = plugin_manager.API_SERVER_UNREACHABLE
"""The error code of a task whose launch never reached its API server (a follower exits 6)."""
LOST_SERVER_AFTER = timedelta(seconds=30)
"""How long a follower waits on an API server that gives no answer before it stops following
(exit status 6): about as long as the executor retries a launch before it gives up."""


@dataclasses.dataclass(frozen=True)
class LogLine:
    """A line of output, and when it was written if the source says."""

    text: str
    at: datetime | None = None


class LogTail(Protocol):
    def read(self, *, now: bool = False) -> list[LogLine]:
        """Output lines not returned before; ``now``: read even if polled a moment ago."""

    def rest(self) -> list[LogLine]:
        """Every line not returned before, the output being complete (the containers ended): a
        last line without its newline too."""

    def close(self) -> None:
        """Release what reading held (a cluster's connections)."""

    def unanswered_for(self) -> tuple[timedelta, str] | None:
        """How long the source has given no answer, and why (a cluster's API server that cannot
        be reached), or None while it answers."""


def primary_container(manifest: Mapping[str, Any]) -> str | None:
    """The container the renderer marked primary in a task's resource (its pod template's)."""
    for metadata in (
        section(manifest, "metadata"),
        section(section(section(manifest, "spec"), "template"), "metadata"),
    ):
        annotations = section(metadata, "annotations")
        for annotation in PRIMARY_ANNOTATIONS:
            if annotations.get(annotation):
                return str(annotations[annotation])
    return None


def local_log_directories(state_dir: Path, ref: ObjectRef) -> list[Path]:
    """The log directories of a local task's pods (the Pod's, or every pod its Job created), in
    the order they were made."""
    root = state_dir / "logs" / ref.namespace
    if not root.is_dir():
        return []
    if ref.kind == "Pod":
        return [root / ref.name] if (root / ref.name).is_dir() else []
    # A Job's pods are named <job>-<suffix>.
    created = (p for p in root.iterdir() if p.name.startswith(f"{ref.name}-"))
    return sorted(created, key=lambda p: p.stat().st_mtime)


def local_log_files(state_dir: Path, ref: ObjectRef, container: str | None = None) -> list[Path]:
    """The output files of a local task's pods: every container's, or only ``container``'s."""
    pattern = f"{container}.log" if container else "*.log"
    return [
        log
        for directory in local_log_directories(state_dir, ref)
        for log in sorted(directory.glob(pattern))
    ]


class LocalLogTail:
    """New whole lines of a local task's log files."""

    def __init__(self, state_dir: Path, ref: ObjectRef, container: str | None = None) -> None:
        self._state_dir, self._ref, self._container = state_dir, ref, container
        self._offsets: dict[Path, int] = {}

    def read(self, *, now: bool = False) -> list[LogLine]:
        return self._read(whole_lines=True)

    def close(self) -> None:
        """Files are opened per read: nothing is held."""

    def unanswered_for(self) -> tuple[timedelta, str] | None:
        return None  # files always answer

    def rest(self) -> list[LogLine]:
        return self._read(whole_lines=False)

    def _read(self, *, whole_lines: bool) -> list[LogLine]:
        lines: list[LogLine] = []
        for path in local_log_files(self._state_dir, self._ref, self._container):
            offset = self._offsets.get(path, 0)
            with path.open("rb") as log:
                log.seek(offset)
                data = log.read()
                written = datetime.fromtimestamp(os.fstat(log.fileno()).st_mtime, UTC)
            taken = data[: data.rfind(b"\n") + 1] if whole_lines else data
            self._offsets[path] = offset + len(taken)
            text = taken.decode("utf-8", "replace")
            lines.extend(LogLine(line, written) for line in text.splitlines())
        return lines


class ClusterLogTail:
    """New lines of the primary container of a cluster task's primary pod."""

    def __init__(
        self,
        client: KubernetesClient,
        ref: ObjectRef,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client, self._ref, self._monotonic = client, ref, monotonic
        self._next_poll = 0.0
        self._pod: tuple[str, str] | None = None
        self._since: str | None = None
        self._recent: set[tuple[str, str]] = set()
        self._unanswered: tuple[float, str] | None = None

    def rest(self) -> list[LogLine]:
        return self.read(now=True)

    def unanswered_for(self) -> tuple[timedelta, str] | None:
        if self._unanswered is None:
            return None
        since, why = self._unanswered
        return timedelta(seconds=self._monotonic() - since), why

    def close(self) -> None:
        self._client.close()

    def read(self, *, now: bool = False) -> list[LogLine]:
        moment = self._monotonic()
        if moment < self._next_poll and not now:
            return []
        self._next_poll = moment + _POLL_SECONDS
        try:
            pod = self._primary_pod()
            self._unanswered = None  # the server answered
            if pod is None:
                return []
            if pod != self._pod:  # a new pod (a Job's retry): start from its beginning
                self._pod, self._since, self._recent = pod, None, set()
            raw = self._client.read_pod_log(
                self._ref.namespace, pod[0], pod[1], since_time=self._since
            )
        except ApiConnectionError as error:
            since = moment if self._unanswered is None else self._unanswered[0]
            self._unanswered = (since, error.message)
            return []
        except KubernetesError:
            self._unanswered = None  # an answer: not started yet, or gone; try again next time
            return []
        return self._unseen(raw)

    def _unseen(self, raw: str) -> list[LogLine]:
        lines: list[LogLine] = []
        stamped = [line.partition(" ")[::2] for line in raw.splitlines() if line]
        for stamp, message in stamped:
            if (stamp, message) in self._recent:
                continue
            lines.append(LogLine(message, _timestamp(stamp)))
        if stamped:
            last_second = stamped[-1][0][:19]  # YYYY-MM-DDTHH:MM:SS
            self._since = last_second + "Z"
            self._recent = {
                (stamp, message) for stamp, message in stamped if stamp[:19] == last_second
            }
        return lines

    def _primary_pod(self) -> tuple[str, str] | None:
        """(pod name, container) of the task's primary pod, once it exists."""
        ref = self._ref
        if ref.kind == "Pod":
            return ref.name, _primary_container(self._client.get(ref))
        if ref.kind == "Job":
            selector = f"batch.kubernetes.io/job-name={ref.name}"
        elif ref.api_version.startswith("kubeflow.org/"):
            selector = f"training.kubeflow.org/job-name={ref.name}"
        elif ref.api_version.startswith("serving.knative.dev/"):
            selector = f"serving.knative.dev/service={ref.name}"
        else:
            return None
        pods, _ = self._client.list_objects(
            "v1", "Pod", namespace=ref.namespace, label_selector=selector
        )
        if not pods:
            return None
        chosen = max(pods, key=_primacy)
        return text(section(chosen, "metadata"), "name"), _primary_container(chosen)


def _timestamp(stamp: str) -> datetime | None:
    """An RFC 3339 timestamp of the log API (nanoseconds are cut to microseconds)."""
    try:
        at = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _primacy(pod: dict[str, Any]) -> tuple[bool, bool, str]:
    """Order pods: a primary replica (master, launcher, chief), replica 0, then the newest."""
    metadata = section(pod, "metadata")
    labels = section(metadata, "labels")
    replica = text(labels, "training.kubeflow.org/replica-type").lower()
    return (
        replica in _PRIMARY_REPLICAS,
        text(labels, "training.kubeflow.org/replica-index") in ("", "0"),
        text(metadata, "creationTimestamp"),
    )


def _primary_container(pod: dict[str, Any]) -> str:
    """The pod's primary container: the one marked, else its first."""
    marked = primary_container(pod)
    if marked:
        return marked
    containers = section(pod, "spec").get("containers") or [{}]
    return str(containers[0].get("name", ""))
