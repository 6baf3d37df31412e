"""One pod on a simulated node: the kubelet's work, with containers that only pretend to run.

The decisions are the kubelet's, shared with podwright's local backend
(:mod:`podwright.core.local_runtime`: init containers one at a time, native sidecars, restarts as
the ``restartPolicy`` says with the crash-loop back-off, SIGTERM then SIGKILL at the end of the
grace period, and the status the kubelet writes: phase, conditions, container statuses). What a
container does is scripted by the pod's annotations, each one for every container, or for one
container with its name as a suffix (``sim.podwright.dev/exit-code.main``):

* ``sim.podwright.dev/run-seconds``: how long a container runs before it exits (default 0, and
  ``inf`` for a native sidecar; ``inf``: until it is stopped);
* ``sim.podwright.dev/exit-code``: its exit code (default 0), or one per run separated by commas,
  the last one repeated (``1,1,0``: fails twice, then succeeds);
* ``sim.podwright.dev/oom-killed: "true"``: it is OOM-killed instead (exit code 137, reason
  ``OOMKilled``);
* ``sim.podwright.dev/image-pull-error: "true"``: its image cannot be pulled: waiting
  ``ErrImagePull``, then ``ImagePullBackOff`` (the simulator does not retry the pull after that,
  where a kubelet keeps retrying, alternating the two);
* ``sim.podwright.dev/stop-seconds``: how long it takes to exit after SIGTERM (default 0), with
  exit code 143; SIGKILL (137) when the grace period ends first.

The kubelet's events go with each step, with its reasons (``pkg/kubelet/events/event.go``):
Pulling, Pulled, Created, Started, Killing, BackOff, Failed. A deleted pod's containers are
stopped with at least the kubelet's minimum grace period of 2 s (``minimumGracePeriodInSeconds``
in ``pkg/kubelet/kuberuntime/kuberuntime_container.go``); once none runs, the pod's deletion is
confirmed with a grace period of 0 and its uid as precondition, as the kubelet's status manager
does; finalizers are then the API server's business.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from podwright.core.local_runtime import Backoff, PodPlan, PodRun, PodShape, plan_pod, pod_status

PREFIX = "sim.podwright.dev/"
RUN_SECONDS = PREFIX + "run-seconds"
EXIT_CODE = PREFIX + "exit-code"
OOM_KILLED = PREFIX + "oom-killed"
IMAGE_PULL_ERROR = PREFIX + "image-pull-error"
STOP_SECONDS = PREFIX + "stop-seconds"
SIGTERM_EXIT = 143
SIGKILL_EXIT = 137
MINIMUM_GRACE = timedelta(seconds=2)
ERR_IMAGE_PULL = "ErrImagePull"
IMAGE_PULL_BACK_OFF = "ImagePullBackOff"

Pod = Mapping[str, Any]


class PodHost(Protocol):
    """What a simulated pod needs from its node: the API, and the test's say on stops."""

    def event(
        self, pod: Pod, reason: str, note: str, kind: str = "Normal", field_path: str = ""
    ) -> None:
        """Record a kubelet event about ``pod`` (``kind``: Normal or Warning)."""

    def write_status(self, pod: Pod, status: dict[str, Any]) -> None: ...

    def confirm_deletion(self, pod: Pod) -> None:
        """Delete the pod with a grace period of 0: its containers are gone."""

    def log(self, pod: Pod, container: str, line: str) -> None: ...

    def stops_held(self) -> bool:
        """Whether containers asked to stop keep running for now (the test holds them)."""


@dataclass(frozen=True)
class Script:
    """What one container does, from the pod's annotations."""

    run_seconds: float = 0.0
    exit_codes: tuple[int, ...] = (0,)
    oom_killed: bool = False
    image_pull_error: bool = False
    stop_seconds: float = 0.0

    @classmethod
    def of(cls, annotations: Mapping[str, str], container: str, *, sidecar: bool) -> Script:
        """The script of ``container``; a native sidecar (an init container whose
        restartPolicy is Always) runs until stopped unless told otherwise, as sidecars do."""

        def value(key: str, default: str) -> str:
            return annotations.get(f"{key}.{container}", annotations.get(key, default))

        return cls(
            run_seconds=float(value(RUN_SECONDS, "inf" if sidecar else "0")),
            exit_codes=tuple(int(code) for code in value(EXIT_CODE, "0").split(",")),
            oom_killed=value(OOM_KILLED, "false") == "true",
            image_pull_error=value(IMAGE_PULL_ERROR, "false") == "true",
            stop_seconds=float(value(STOP_SECONDS, "0")),
        )

    def exit_code(self, restarts: int) -> int:
        return self.exit_codes[min(restarts, len(self.exit_codes) - 1)]


@dataclass(frozen=True)
class Placement:
    """Where a pod runs: its node, the node's IP and the pod's own."""

    node: str
    host_ip: str
    pod_ip: str


class SimulatedPod:
    """The kubelet's state for one pod, moved on by :meth:`step` at each look at the pod."""

    def __init__(
        self,
        pod: Pod,
        placement: Placement,
        now: datetime,
        *,
        crash_loop: Backoff,
        image_pull_back_off: timedelta,
    ) -> None:
        spec = pod.get("spec") or {}
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        self._placement = placement
        self._crash_loop = crash_loop
        self._image_pull_back_off = image_pull_back_off
        self._run = PodRun.new(PodShape.of(pod), now)
        self._images: dict[str, str] = {}
        self._field_paths: dict[str, str] = {}
        self._scripts: dict[str, Script] = {}
        for section in ("initContainers", "containers"):
            for container in spec.get(section) or []:
                name = container["name"]
                self._images[name] = str(container.get("image", ""))
                self._field_paths[name] = f"spec.{section}{{{name}}}"
                sidecar = section == "initContainers" and container.get("restartPolicy") == "Always"
                self._scripts[name] = Script.of(annotations, name, sidecar=sidecar)
        self._exits_at: dict[str, datetime] = {}
        self._stops_at: dict[str, datetime] = {}
        self._pull_failed_at: dict[str, datetime] = {}
        self._backed_off: set[tuple[str, int]] = set()
        self._written: dict[str, Any] | None = None
        self._confirmed = False
        self._done = False

    def step(self, pod: Pod, now: datetime, host: PodHost) -> None:
        """Do what the kubelet would do now, and write the pod's status if it changed."""
        if self._written is None:  # first, the pod as accepted: containers being created
            self._publish(pod, now, host)
            return
        metadata = pod.get("metadata") or {}
        deleted = bool(metadata.get("deletionTimestamp"))
        if deleted:
            grace = timedelta(seconds=metadata.get("deletionGracePeriodSeconds") or 0)
            self._run = self._run.stopping_by(now + max(grace, MINIMUM_GRACE))
        self._observe(pod, now, host)
        plan = plan_pod(self._run, now, self._crash_loop)
        while plan.acts:
            self._act(plan, pod, now, host)
            plan = plan_pod(self._run, now, self._crash_loop)
        self._announce_back_offs(plan, pod, host)
        self._publish(pod, now, host)
        self._done = plan.done
        if plan.done and deleted and not self._confirmed:
            host.confirm_deletion(pod)
            self._confirmed = True

    def idle(self, pod: Pod) -> bool:
        """Whether :meth:`step` has nothing to do for ``pod`` (its latest copy), now or later
        until a new copy asks for its deletion: its containers are done for good (the status
        saying so written), and it is not being deleted or its deletion is confirmed. A finished
        pod stays until it is deleted, and stepping thousands of them at every look costs a
        tenth of a second of CPU each time, for nothing."""
        deleted = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        return self._done and (self._confirmed or not deleted)

    # What happened since the last look ----------------------------------------------------

    def _observe(self, pod: Pod, now: datetime, host: PodHost) -> None:
        for name, run in self._run.containers.items():
            script = self._scripts[name]
            if run.running:
                stop_at = self._stops_at.get(name)
                exit_at = self._exits_at.get(name)
                if stop_at is not None and now >= stop_at and not host.stops_held():
                    ended = run.exited(SIGTERM_EXIT, now)
                elif exit_at is None or now < exit_at:
                    continue
                elif script.oom_killed:
                    ended = run.exited(SIGKILL_EXIT, now, reason="OOMKilled")
                else:
                    ended = run.exited(script.exit_code(run.restart_count), now)
                self._run = self._run.with_container(ended)
                self._stops_at.pop(name, None)
            elif (
                run.waiting_reason == ERR_IMAGE_PULL
                and now >= self._pull_failed_at[name] + self._image_pull_back_off
            ):
                back_off = f'Back-off pulling image "{self._images[name]}"'
                self._run = self._run.with_container(run.refused(IMAGE_PULL_BACK_OFF, back_off))
                path = self._field_paths[name]
                host.event(pod, "BackOff", back_off, field_path=path)
                host.event(pod, "Failed", f"Error: {IMAGE_PULL_BACK_OFF}", "Warning", path)

    # The kubelet's actions ----------------------------------------------------------------

    def _act(self, plan: PodPlan, pod: Pod, now: datetime, host: PodHost) -> None:
        if plan.stop_deadline is not None:
            self._run = self._run.stopping_by(plan.stop_deadline)
        for name in plan.kill:
            run = self._run.containers[name]
            if not run.stopping:
                host.event(pod, "Killing", f"Stopping container {name}", "Normal", self._path(name))
            self._run = self._run.with_container(run.exited(SIGKILL_EXIT, now))
            self._stops_at.pop(name, None)
        for name in plan.stop:
            host.event(pod, "Killing", f"Stopping container {name}", "Normal", self._path(name))
            self._run = self._run.with_container(self._run.containers[name].signalled())
            self._stops_at[name] = now + timedelta(seconds=self._scripts[name].stop_seconds)
        for name in plan.start:
            self._start(name, pod, now, host)

    def _start(self, name: str, pod: Pod, now: datetime, host: PodHost) -> None:
        run, script, image = self._run.containers[name], self._scripts[name], self._images[name]
        path = self._path(name)
        if run.started_once:
            host.event(
                pod,
                "Pulled",
                f'Container image "{image}" already present on machine',
                field_path=path,
            )
        else:
            host.event(pod, "Pulling", f'Pulling image "{image}"', field_path=path)
            if script.image_pull_error:
                cause = f'failed to pull image "{image}": the simulator was told so ({IMAGE_PULL_ERROR})'
                host.event(
                    pod, "Failed", f'Failed to pull image "{image}": {cause}', "Warning", path
                )
                host.event(pod, "Failed", f"Error: {ERR_IMAGE_PULL}", "Warning", path)
                self._run = self._run.with_container(run.refused(ERR_IMAGE_PULL, cause))
                self._pull_failed_at[name] = now
                return
            host.event(
                pod,
                "Pulled",
                f'Successfully pulled image "{image}" in 0s (0s including waiting). '
                "Image size: 0 bytes.",
                field_path=path,
            )
        host.event(pod, "Created", f"Created container: {name}", field_path=path)
        host.event(pod, "Started", f"Started container {name}", field_path=path)
        self._run = self._run.with_container(run.started(now, self._crash_loop))
        if math.isinf(script.run_seconds):
            self._exits_at.pop(name, None)
        else:
            self._exits_at[name] = now + timedelta(seconds=script.run_seconds)
        host.log(pod, name, f"hello from {(pod.get('metadata') or {}).get('name')}/{name}")

    def _announce_back_offs(self, plan: PodPlan, pod: Pod, host: PodHost) -> None:
        """The kubelet's BackOff event, once per exit that waits for its restart."""
        for name in plan.back_off:
            run = self._run.containers[name]
            if (name, run.restart_count) not in self._backed_off:
                self._backed_off.add((name, run.restart_count))
                host.event(
                    pod,
                    "BackOff",
                    f"Back-off restarting failed container {name} in pod "
                    f"{self._run.shape.describe()}",
                    "Warning",
                    self._path(name),
                )

    def _publish(self, pod: Pod, now: datetime, host: PodHost) -> None:
        status = pod_status(self._run, now, self._crash_loop, self._written)
        where = self._placement
        status.update(
            hostIP=where.host_ip,
            hostIPs=[{"ip": where.host_ip}],
            podIP=where.pod_ip,
            podIPs=[{"ip": where.pod_ip}],
        )
        if status != self._written:
            host.write_status(pod, status)
            self._written = status

    def _path(self, name: str) -> str:
        return self._field_paths[name]
