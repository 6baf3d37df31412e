"""The local backend's kubelet as pure decisions: what to run, when to restart, what to write.

The local backend runs a Pod's containers as processes on one machine and must describe them in
the API server's vocabulary, so that the same plugins decide the same phases as on a cluster. This
module holds every decision of that local kubelet; the adapter only starts, signals and reaps
processes:

* :func:`plan_launch`: a container spec becomes what to run (command, environment, working
  directory, memory limit), or is refused with the kubelet's reason (CreateContainerError,
  CreateContainerConfigError) for what one machine cannot provide: no command (an image's
  entrypoint cannot be run without the image), a Secret or ConfigMap reference;
* :func:`plan_pod`: what to do next for a pod (:class:`PodRun`): start init containers one at a
  time, native sidecars, then the containers; restart what exits as the ``restartPolicy`` says,
  with the crash-loop back-off (:class:`Backoff`); stop it (SIGTERM, then SIGKILL when its grace
  period ends);
* :func:`pod_status`: the ``status`` the kubelet writes at that moment: phase, conditions (with
  transition times kept while their status stays), and container statuses (waiting with
  ContainerCreating, PodInitializing, CrashLoopBackOff and its "back-off 20s restarting failed
  container=…" message; running; terminated with Completed, Error, StartError or
  ContainerStatusUnknown; ``lastState``, ``restartCount``, ``ready``, ``started``);
* :func:`pod_spec_problems`: what the API server's validation refuses and these decisions rely on.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import ROUND_CEILING
from typing import Any, Literal

from podwright.core.quantities import QuantityError, parse

JsonObject = Mapping[str, Any]

LOCAL_NODE = "localhost"
LOCAL_POD_IP = "127.0.0.1"
CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
CREATE_CONTAINER_ERROR = "CreateContainerError"
_FIELD_LABEL = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]\Z")


class LaunchRefusal(ValueError):  # noqa: N818 (a kubelet reason for the user, not a crash)
    """A container the local backend cannot start; ``reason`` is the kubelet's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclasses.dataclass(frozen=True)
class Launch:
    """How to start one container locally."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    working_dir: str | None
    memory_limit_bytes: int | None


def plan_launch(container: JsonObject, pod: JsonObject) -> Launch:
    """What to run for ``container`` of ``pod``; :class:`LaunchRefusal` when it cannot run here."""
    name = str(container.get("name", ""))
    command = [str(part) for part in container.get("command") or []]
    args = [str(part) for part in container.get("args") or []]
    if not command:
        raise LaunchRefusal(
            CREATE_CONTAINER_ERROR,
            f"container {name!r} has no command: the local backend runs commands on this "
            f"machine and cannot run the image's entrypoint ({container.get('image')})",
        )
    env = {"HOSTNAME": str(_metadata(pod).get("name", ""))}
    for variable in container.get("env") or []:
        # A value may refer to the variables defined before it, as $(NAME).
        env[str(variable["name"])] = _env_value(name, variable, container, pod, env)
    command = [_expand(part, env) for part in command]
    args = [_expand(part, env) for part in args]
    working_dir = container.get("workingDir")
    limits = (container.get("resources") or {}).get("limits") or {}
    memory = None
    if "memory" in limits:
        try:
            memory = int(parse(limits["memory"]))
        except QuantityError as error:
            raise LaunchRefusal(
                CREATE_CONTAINER_CONFIG_ERROR,
                f"container {name!r}: resources.limits.memory: {error}",
            ) from error
    return Launch(tuple(command + args), env, working_dir, memory)


def _metadata(pod: JsonObject) -> JsonObject:
    metadata: JsonObject = pod.get("metadata") or {}
    return metadata


def _env_value(
    container_name: str,
    variable: JsonObject,
    container: JsonObject,
    pod: JsonObject,
    defined: Mapping[str, str],
) -> str:
    if "value" in variable or "valueFrom" not in variable:
        return _expand(str(variable.get("value", "")), defined)
    source: JsonObject = variable["valueFrom"]
    where = f"container {container_name!r}: env {variable['name']}"
    if "fieldRef" in source:
        return _field(source["fieldRef"].get("fieldPath", ""), pod, where)
    if "resourceFieldRef" in source:
        reference = source["resourceFieldRef"]
        resource = str(reference.get("resource", ""))
        section, _, key = resource.partition(".")
        values = (container.get("resources") or {}).get(section) or {}
        if key not in values:
            return "0"
        try:
            amount = parse(values[key]) / parse(reference.get("divisor", "1"))
        except (QuantityError, ArithmeticError) as error:
            raise LaunchRefusal(
                CREATE_CONTAINER_CONFIG_ERROR, f"{where}: resourceFieldRef {resource}: {error}"
            ) from error
        return str(amount.to_integral_value(rounding=ROUND_CEILING))  # the kubelet rounds up
    kinds = ", ".join(sorted(source))
    raise LaunchRefusal(
        CREATE_CONTAINER_CONFIG_ERROR,
        f"{where} comes from {kinds}: the local backend has no Secrets or ConfigMaps; give "
        "the value directly",
    )


def _field(path: str, pod: JsonObject, where: str) -> str:
    metadata = _metadata(pod)
    simple = {
        "metadata.name": metadata.get("name"),
        "metadata.namespace": metadata.get("namespace"),
        "metadata.uid": metadata.get("uid"),
        "spec.nodeName": LOCAL_NODE,
        "spec.serviceAccountName": (pod.get("spec") or {}).get("serviceAccountName", "default"),
        "status.podIP": LOCAL_POD_IP,
        "status.hostIP": LOCAL_POD_IP,
    }
    if path in simple:
        return str(simple[path] or "")
    match = _FIELD_LABEL.match(path)
    if match:
        return str((metadata.get(match.group(1)) or {}).get(match.group(2), ""))
    raise LaunchRefusal(
        CREATE_CONTAINER_CONFIG_ERROR, f"{where}: fieldRef {path!r} is not supported"
    )


def _expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' $(VAR) expansion; ``$$`` escapes. Unknown references stay as written."""
    out, index = [], 0
    while index < len(value):
        if value.startswith("$$", index):
            out.append("$")
            index += 2
        elif value.startswith("$(", index) and ")" in value[index:]:
            end = value.index(")", index)
            name = value[index + 2 : end]
            out.append(env.get(name, value[index : end + 1]))
            index = end + 1
        else:
            out.append(value[index])
            index += 1
    return "".join(out)


# The kubelet's decisions --------------------------------------------------------------------------
#
# A pod's containers are started, restarted and stopped as the kubelet does it
# (pkg/kubelet/kuberuntime/kuberuntime_manager.go, computePodActions and doBackOff): regular init
# containers one at a time, each to a successful exit; native sidecars (init containers with
# restartPolicy Always) started in order and kept running; then every container together. A
# container that exits is restarted in place when the pod's restartPolicy says so (a sidecar
# whatever it says), the first time at once, then after a crash-loop back-off. Deleting the pod (or
# its work being done) stops what runs: SIGTERM to regular containers, then to sidecars in reverse
# order, SIGKILL to what is left when the grace period ends. The status written at each step is
# the kubelet's (pkg/kubelet/kubelet_pods.go: getPhase, convertToAPIContainerStatuses;
# pkg/kubelet/status: the pod conditions and TerminatePod).

RestartPolicy = Literal["Always", "OnFailure", "Never"]
POD_RESTART_POLICIES: tuple[RestartPolicy, ...] = ("Always", "OnFailure", "Never")
JOB_RESTART_POLICIES: tuple[RestartPolicy, ...] = ("OnFailure", "Never")
DEFAULT_GRACE_SECONDS = 30
"""The API server's default ``terminationGracePeriodSeconds``."""
CONTAINER_STATUS_UNKNOWN = "ContainerStatusUnknown"
_UNKNOWN_MESSAGE = "The container could not be located when the pod was terminated"
_SIGKILL_EXIT = 137


@dataclasses.dataclass(frozen=True)
class BackoffEntry:
    """One container's back-off: the delay it waits now, and when the delay last changed."""

    delay: timedelta
    updated_at: datetime


@dataclasses.dataclass(frozen=True)
class Backoff:
    """An exponential back-off: ``initial``, doubled at each use, never above ``cap``.

    For a crash-looping container it is the kubelet's (``flowcontrol.Backoff`` in client-go, used
    by ``doBackOff``): the first restart is immediate and sets the delay to ``initial``; a
    container that exits again waits the delay after its exit, then restarts and doubles it; an
    entry unused for twice the cap (a container that ran that long) starts over. :meth:`nth` is
    the Job controller's pod-failure back-off (``getRemainingTimeForFailuresCount``): ``initial``
    after one failure, doubled for each further one.
    """

    initial: timedelta
    cap: timedelta

    def __post_init__(self) -> None:
        if self.initial <= timedelta(0):
            raise ValueError(f"back-off initial: must be positive, got {self.initial}")
        if self.cap < self.initial:
            raise ValueError(
                f"back-off cap: must be at least initial ({self.initial}), got {self.cap}"
            )

    def waiting(self, entry: BackoffEntry | None, finished_at: datetime, now: datetime) -> bool:
        """Whether a container that exited at ``finished_at`` must still wait before its restart."""
        if entry is None or self._expired(entry, finished_at):
            return False
        return now - finished_at < entry.delay

    def next(
        self, entry: BackoffEntry | None, finished_at: datetime, now: datetime
    ) -> BackoffEntry:
        """The entry after a restart at ``now`` of a container that exited at ``finished_at``."""
        if entry is None or self._expired(entry, finished_at):
            return BackoffEntry(self.initial, now)
        return BackoffEntry(min(entry.delay * 2, self.cap), now)

    def nth(self, failures: int) -> timedelta:
        """The delay after ``failures`` (at least 1) failures in a row."""
        delay = self.initial
        for _ in range(1, failures):
            delay = min(delay * 2, self.cap)
        return delay

    def _expired(self, entry: BackoffEntry, finished_at: datetime) -> bool:
        return finished_at - entry.updated_at > self.cap * 2


CRASH_LOOP_BACKOFF = Backoff(timedelta(seconds=10), timedelta(minutes=5))
"""The kubelet's: 10 s, doubling, capped at 5 min, reset after 10 min of running
(kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#restart-policy; kubelet
``backOffPeriod`` and ``MaxContainerBackOff``)."""
JOB_POD_FAILURE_BACKOFF = Backoff(timedelta(seconds=10), timedelta(minutes=10))
"""The Job controller's before it replaces a failed pod: 10 s, doubling, capped at 10 min
(``DefaultJobPodFailureBackOff`` and ``MaxJobPodFailureBackOff`` in
pkg/controller/job/job_controller.go)."""


def go_duration(value: timedelta) -> str:
    """``value`` as Go's ``time.Duration.String()`` writes it (``10s``, ``1m20s``, ``50ms``), as the
    kubelet's back-off messages show it."""
    micros = value // timedelta(microseconds=1)
    if micros == 0:
        return "0s"
    sign, micros = ("-", -micros) if micros < 0 else ("", micros)
    if micros < 1000:
        return f"{sign}{micros}µs"
    if micros < 1_000_000:
        return f"{sign}{_decimal(micros, 1000)}ms"
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds = f"{_decimal(rest, 1_000_000)}s"
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}"
    if minutes:
        return f"{sign}{minutes}m{seconds}"
    return sign + seconds


def _decimal(amount: int, unit: int) -> str:
    whole, fraction = divmod(amount, unit)
    if not fraction:
        return str(whole)
    digits = str(fraction).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


@dataclasses.dataclass(frozen=True)
class ContainerSpec:
    """What the kubelet's decisions need of a container: its name, image, and whether it is a
    native sidecar (an init container with ``restartPolicy: Always``)."""

    name: str
    image: str = ""
    sidecar: bool = False


@dataclasses.dataclass(frozen=True)
class PodShape:
    """What the kubelet's decisions need of a pod's metadata and spec."""

    name: str
    namespace: str
    uid: str
    restart_policy: RestartPolicy
    init: tuple[ContainerSpec, ...]
    main: tuple[ContainerSpec, ...]
    grace: timedelta = timedelta(seconds=DEFAULT_GRACE_SECONDS)

    @classmethod
    def of(cls, pod: JsonObject) -> PodShape:
        """The shape of a pod the API server accepted (see :func:`pod_spec_problems`)."""
        metadata = _metadata(pod)
        spec: JsonObject = pod.get("spec") or {}
        policy = spec.get("restartPolicy") or "Always"
        if policy not in POD_RESTART_POLICIES:
            raise ValueError(f"spec.restartPolicy: {policy!r} is not a restart policy")
        init = tuple(
            ContainerSpec(
                str(c.get("name", "")), str(c.get("image", "")), c.get("restartPolicy") == "Always"
            )
            for c in spec.get("initContainers") or []
        )
        main = tuple(
            ContainerSpec(str(c.get("name", "")), str(c.get("image", "")))
            for c in spec.get("containers") or []
        )
        return cls(
            str(metadata.get("name", "")),
            str(metadata.get("namespace", "")),
            str(metadata.get("uid", "")),
            policy,
            init,
            main,
            timedelta(seconds=grace_seconds(spec)),
        )

    @property
    def containers(self) -> tuple[ContainerSpec, ...]:
        return self.init + self.main

    def describe(self) -> str:
        """The pod as the kubelet names it in messages (``format.Pod``): ``name_namespace(uid)``."""
        return f"{self.name}_{self.namespace}({self.uid})"


def grace_seconds(spec: JsonObject) -> int:
    """A pod's termination grace period: its ``terminationGracePeriodSeconds``, the default 30 when
    unset, 1 when negative (as the API server's pod strategy treats it)."""
    value = spec.get("terminationGracePeriodSeconds")
    if value is None:
        return DEFAULT_GRACE_SECONDS
    return 1 if int(value) < 0 else int(value)


def pod_spec_problems(
    spec: JsonObject, path: str = "spec", policies: Sequence[str] = POD_RESTART_POLICIES
) -> list[str]:
    """What the API server's validation refuses in a pod spec that the local backend relies on, in
    its words: the restart policies, container names, the grace period."""
    problems = []
    policy = spec.get("restartPolicy") or "Always"
    if policy not in policies:
        problems.append(f"{path}.restartPolicy: {_unsupported(policy, policies)}")
    if not spec.get("containers"):
        problems.append(f"{path}.containers: Required value")
    seen: set[str] = set()
    for section_name in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(section_name) or []):
            where = f"{path}.{section_name}[{index}]"
            name = container.get("name") if isinstance(container, Mapping) else None
            if not name:
                problems.append(f"{where}.name: Required value")
            elif name in seen:
                problems.append(f'{where}.name: Duplicate value: "{name}"')
            else:
                seen.add(str(name))
            restart = container.get("restartPolicy") if isinstance(container, Mapping) else None
            if restart is not None and (section_name == "containers" or restart != "Always"):
                allowed = () if section_name == "containers" else ("Always",)
                problems.append(f"{where}.restartPolicy: {_unsupported(restart, allowed)}")
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool)):
        problems.append(
            f"{path}.terminationGracePeriodSeconds: Invalid value: {grace!r}: must be an integer"
        )
    return problems


def _unsupported(value: object, allowed: Sequence[str]) -> str:
    if not allowed:
        return f'Forbidden: may not be set (got "{value}")'
    supported = ", ".join(f'"{option}"' for option in allowed)
    return f'Unsupported value: "{value}": supported values: {supported}'


@dataclasses.dataclass(frozen=True)
class Termination:
    """How one run of a container ended."""

    exit_code: int
    reason: str
    started_at: datetime
    finished_at: datetime
    message: str = ""

    def to_api(self) -> dict[str, Any]:
        terminated: dict[str, Any] = {
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": _time(self.started_at),
            "finishedAt": _time(self.finished_at),
        }
        if self.message:
            terminated["message"] = self.message
        return terminated


@dataclasses.dataclass(frozen=True)
class ContainerRun:
    """One container as the local kubelet saw it: never started, refused (waiting with the
    kubelet's reason), running, or ended, with its restarts, last termination and back-off."""

    name: str
    running_since: datetime | None = None
    terminated: Termination | None = None
    last_termination: Termination | None = None
    restart_count: int = 0
    waiting_reason: str = ""
    waiting_message: str = ""
    backoff: BackoffEntry | None = None
    stopping: bool = False
    killed: bool = False

    @property
    def running(self) -> bool:
        return self.running_since is not None

    @property
    def started_once(self) -> bool:
        return self.running or self.terminated is not None or self.last_termination is not None

    def started(self, now: datetime, backoff: Backoff) -> ContainerRun:
        """Running from ``now``; after an earlier run, a restart (the back-off moves on)."""
        if self.terminated is None:
            return dataclasses.replace(
                self, running_since=now, waiting_reason="", waiting_message=""
            )
        return ContainerRun(
            self.name,
            running_since=now,
            last_termination=self.terminated,
            restart_count=self.restart_count + 1,
            backoff=backoff.next(self.backoff, self.terminated.finished_at, now),
        )

    def exited(
        self, exit_code: int, now: datetime, *, reason: str = "", message: str = ""
    ) -> ContainerRun:
        """Ended at ``now`` with ``exit_code``; the reason is the runtime's (Completed, Error)."""
        ended = Termination(
            exit_code,
            reason or ("Completed" if exit_code == 0 else "Error"),
            self.running_since or now,
            now,
            message,
        )
        return dataclasses.replace(
            self, running_since=None, terminated=ended, stopping=False, killed=False
        )

    def refused(self, reason: str, message: str) -> ContainerRun:
        return dataclasses.replace(self, waiting_reason=reason, waiting_message=message)

    def signalled(self, *, kill: bool = False) -> ContainerRun:
        """Asked to stop (SIGTERM sent), or killed (SIGKILL sent)."""
        return dataclasses.replace(self, stopping=True, killed=self.killed or kill)


@dataclasses.dataclass(frozen=True)
class PodRun:
    """A pod on the local kubelet: its containers, and, once it is stopping (deleted, or its
    work done), when what still runs is killed."""

    shape: PodShape
    created: datetime
    containers: Mapping[str, ContainerRun]
    stop_deadline: datetime | None = None

    @classmethod
    def new(cls, shape: PodShape, created: datetime) -> PodRun:
        return cls(shape, created, {c.name: ContainerRun(c.name) for c in shape.containers})

    def with_container(self, run: ContainerRun) -> PodRun:
        return dataclasses.replace(self, containers={**self.containers, run.name: run})

    def stopping_by(self, deadline: datetime) -> PodRun:
        """Stopping, its containers killed at ``deadline`` at the latest (a later deletion can
        only shorten the grace, as the API server allows)."""
        if self.stop_deadline is not None and self.stop_deadline <= deadline:
            return self
        return dataclasses.replace(self, stop_deadline=deadline)

    @property
    def stopping(self) -> bool:
        return self.stop_deadline is not None

    @property
    def terminal(self) -> bool:
        """Stopped for good: stopping, and nothing runs any more."""
        return self.stopping and not any(run.running for run in self.containers.values())

    @property
    def regular_started(self) -> bool:
        """Whether a regular container ever started (the pod was initialized)."""
        return any(self.containers[c.name].started_once for c in self.shape.main)

    def restarts(self, spec: ContainerSpec, run: ContainerRun) -> bool:
        """Whether an ended container is to be started again (the kubelet's
        ``ShouldContainerBeRestarted``, and init containers as ``computeInitContainerActions``)."""
        ended = run.terminated
        if ended is None or self.stopping:
            return False
        if spec.sidecar:
            return True
        policy = self.shape.restart_policy
        if spec in self.shape.init:
            return ended.exit_code != 0 and policy != "Never" and not self.regular_started
        return policy == "Always" or (policy == "OnFailure" and ended.exit_code != 0)

    def restart_at(
        self, spec: ContainerSpec, run: ContainerRun, backoff: Backoff, now: datetime
    ) -> datetime | None:
        """When an ended container that restarts may start again: None when it may now (or does
        not restart)."""
        ended = run.terminated
        if ended is None or run.backoff is None or not self.restarts(spec, run):
            return None
        if not backoff.waiting(run.backoff, ended.finished_at, now):
            return None
        return ended.finished_at + run.backoff.delay

    def back_off_message(self, run: ContainerRun) -> str:
        delay = run.backoff.delay if run.backoff is not None else timedelta(0)
        return (
            f"back-off {go_duration(delay)} restarting failed container={run.name} "
            f"pod={self.shape.describe()}"
        )


@dataclasses.dataclass(frozen=True)
class PodPlan:
    """What the local kubelet does next for a pod: containers to start (in order), to SIGTERM, to
    SIGKILL, to leave in back-off (until when), whether the pod starts stopping (and the deadline
    of its grace period), when to look again, and whether nothing is left to do."""

    start: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    kill: tuple[str, ...] = ()
    back_off: Mapping[str, datetime] = dataclasses.field(default_factory=dict)
    stop_deadline: datetime | None = None
    wake_at: datetime | None = None
    done: bool = False

    @property
    def acts(self) -> bool:
        """Whether the plan changes anything now (then plan again before waiting)."""
        return bool(self.start or self.stop or self.kill or self.stop_deadline is not None)


def plan_pod(pod: PodRun, now: datetime, backoff: Backoff) -> PodPlan:
    """The kubelet's next actions for ``pod`` at ``now``."""
    if pod.stopping:
        return _plan_stop(pod, now)
    if _initialization_failed(pod) or _work_done(pod):
        return PodPlan(stop_deadline=now + pod.shape.grace)
    start: list[str] = []
    back_off: dict[str, datetime] = {}

    def resume(spec: ContainerSpec, run: ContainerRun) -> None:
        at = pod.restart_at(spec, run, backoff, now)
        if at is None:
            start.append(spec.name)
        else:
            back_off[spec.name] = at

    initialized = pod.regular_started
    blocked = False
    for spec in pod.shape.init:
        run = pod.containers[spec.name]
        if spec.sidecar:
            if run.running:
                continue
            if run.waiting_reason:
                blocked = not initialized
            elif run.terminated is None:
                start.append(spec.name)
                blocked = True
            else:
                resume(spec, run)
                blocked = not initialized
        elif initialized or (run.terminated is not None and run.terminated.exit_code == 0):
            continue
        elif run.running or run.waiting_reason:
            blocked = True
        elif run.terminated is None:
            start.append(spec.name)
            blocked = True
        else:
            resume(spec, run)
            blocked = True
        if blocked:
            break
    if not blocked:
        for spec in pod.shape.main:
            run = pod.containers[spec.name]
            if run.running or run.waiting_reason:
                continue
            if run.terminated is None:
                start.append(spec.name)
            elif pod.restarts(spec, run):
                resume(spec, run)
    return PodPlan(
        start=tuple(start), back_off=back_off, wake_at=min(back_off.values(), default=None)
    )


def _initialization_failed(pod: PodRun) -> bool:
    """With restartPolicy Never, a failed init container fails the pod."""
    if pod.shape.restart_policy != "Never" or pod.regular_started:
        return False
    return any(
        not spec.sidecar
        and (ended := pod.containers[spec.name].terminated) is not None
        and ended.exit_code != 0
        for spec in pod.shape.init
    )


def _work_done(pod: PodRun) -> bool:
    """Every regular container ended and none restarts (never with restartPolicy Always)."""
    return all(
        (run := pod.containers[spec.name]).terminated is not None and not pod.restarts(spec, run)
        for spec in pod.shape.main
    )


def _plan_stop(pod: PodRun, now: datetime) -> PodPlan:
    """Stopping: regular containers first, then sidecars one by one in reverse order; SIGKILL for
    whatever runs at the deadline."""
    assert pod.stop_deadline is not None
    running = [spec for spec in pod.shape.containers if pod.containers[spec.name].running]
    if not running:
        return PodPlan(done=True)
    if now >= pod.stop_deadline:
        kill = tuple(spec.name for spec in running if not pod.containers[spec.name].killed)
        return PodPlan(kill=kill)
    regular = [spec for spec in running if not spec.sidecar]
    targets = regular or running[-1:]
    stop = tuple(spec.name for spec in targets if not pod.containers[spec.name].stopping)
    return PodPlan(stop=stop, wake_at=pod.stop_deadline)


# The status the kubelet writes -------------------------------------------------------------------


def pod_status(
    pod: PodRun, now: datetime, backoff: Backoff, previous: JsonObject | None = None
) -> dict[str, Any]:
    """The pod's ``status`` at ``now``, as the kubelet writes it; ``previous`` (the status written
    before) keeps the conditions' transition times and a terminal phase."""
    shape = pod.shape
    init_default = "PodInitializing" if shape.init else "ContainerCreating"
    statuses = {
        spec.name: _container_status(pod, spec, now, backoff, init_default)
        for spec in shape.containers
    }
    init = [statuses[spec.name] for spec in shape.init]
    main = [statuses[spec.name] for spec in shape.main]
    if pod.terminal:
        _terminate_unknown(shape, init, main)
    phase = _phase(shape, statuses, pod.terminal)
    if pod.terminal and phase not in ("Succeeded", "Failed"):
        phase = "Failed"
    earlier = (previous or {}).get("phase")
    if earlier in ("Succeeded", "Failed"):
        phase = earlier  # pods are not allowed to transition out of terminal phases
    containers_ready = _containers_ready(shape, statuses, phase)
    conditions = [
        _condition("PodReadyToStartContainers", not pod.terminal),
        _initialized(shape, statuses, phase),
        {**containers_ready, "type": "Ready"},
        containers_ready,
        _condition("PodScheduled", True),
    ]
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": _with_transition_times(conditions, previous, now, pod.created),
        "hostIP": LOCAL_POD_IP,
        "hostIPs": [{"ip": LOCAL_POD_IP}],
        "podIP": LOCAL_POD_IP,
        "podIPs": [{"ip": LOCAL_POD_IP}],
        "startTime": _time(pod.created),
        "containerStatuses": sorted(main, key=lambda status: str(status["name"])),
    }
    if init:
        status["initContainerStatuses"] = init
    return status


def _container_status(
    pod: PodRun, spec: ContainerSpec, now: datetime, backoff: Backoff, default_waiting: str
) -> dict[str, Any]:
    run = pod.containers[spec.name]
    last = run.last_termination
    if run.running_since is not None:
        state: dict[str, Any] = {"running": {"startedAt": _time(run.running_since)}}
    elif run.terminated is not None:
        if pod.restart_at(spec, run, backoff, now) is not None:
            message = pod.back_off_message(run)
            state = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
            last = run.terminated
        else:
            state = {"terminated": run.terminated.to_api()}
    elif run.waiting_reason:
        state = {"waiting": {"reason": run.waiting_reason, "message": run.waiting_message}}
    else:
        state = {"waiting": {"reason": default_waiting}}
    return {
        "name": spec.name,
        "image": spec.image,
        "state": state,
        "lastState": {"terminated": last.to_api()} if last is not None else {},
        "ready": run.running,
        "restartCount": run.restart_count,
        "started": run.running,
    }


def _terminate_unknown(
    shape: PodShape, init: list[dict[str, Any]], main: list[dict[str, Any]]
) -> None:
    """A terminated pod's containers that never ended are reported as failed, as the kubelet's
    ``TerminatePod`` does: every regular one once the pod initialized, and init containers up to
    the last one that was tried."""
    unknown = {
        "terminated": {
            "exitCode": _SIGKILL_EXIT,
            "reason": CONTAINER_STATUS_UNKNOWN,
            "message": _UNKNOWN_MESSAGE,
        }
    }
    if _has_initialized(shape, init, main):
        for status in main:
            if "terminated" not in status["state"]:
                status["state"] = copy.deepcopy(unknown)
    tried = len(init)
    while tried > 1 and "waiting" in init[tried - 1]["state"] and not init[tried - 1]["lastState"]:
        tried -= 1
    for status in init[:tried]:
        if "terminated" not in status["state"]:
            status["state"] = copy.deepcopy(unknown)


def _has_initialized(
    shape: PodShape, init: list[dict[str, Any]], main: list[dict[str, Any]]
) -> bool:
    if not shape.init:
        return True
    if any(status["lastState"] or "waiting" not in status["state"] for status in main):
        return True
    last_spec, last = shape.init[-1], init[-1]
    if last_spec.sidecar:
        return "running" in last["state"] and bool(last["started"])
    return bool(last["state"].get("terminated", {}).get("exitCode") == 0)


def _phase(shape: PodShape, statuses: Mapping[str, Mapping[str, Any]], terminal: bool) -> str:
    """The kubelet's ``getPhase``."""
    pending_init = failed_init = 0
    for spec in shape.init:
        if spec.sidecar:
            continue
        state, last = statuses[spec.name]["state"], statuses[spec.name]["lastState"]
        if "running" in state:
            pending_init += 1
        elif "terminated" in state:
            failed_init += state["terminated"]["exitCode"] != 0
        elif "terminated" in last:
            failed_init += last["terminated"]["exitCode"] != 0
        else:
            pending_init += 1
    running = waiting = stopped = succeeded = 0
    for spec in shape.init:
        if not spec.sidecar:
            continue
        status = statuses[spec.name]
        if "running" in status["state"]:
            pending_init += not status["started"]
            running += 1
        elif "waiting" in status["state"] and not status["lastState"]:
            pending_init += 1
            waiting += 1
    for spec in shape.main:
        state, last = statuses[spec.name]["state"], statuses[spec.name]["lastState"]
        if "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            succeeded += state["terminated"]["exitCode"] == 0
        elif "terminated" in last:
            stopped += 1
        else:
            waiting += 1
    if failed_init and shape.restart_policy == "Never":
        return "Failed"
    regular_started = any(
        "waiting" not in statuses[spec.name]["state"] or statuses[spec.name]["lastState"]
        for spec in shape.main
    )
    if (pending_init and not regular_started) or waiting:
        return "Pending"
    if running:
        return "Running"
    if stopped:
        if terminal:
            return "Succeeded" if stopped == succeeded else "Failed"
        if shape.restart_policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        return "Failed" if shape.restart_policy == "Never" else "Running"
    return "Pending"


def _containers_ready(
    shape: PodShape, statuses: Mapping[str, Mapping[str, Any]], phase: str
) -> dict[str, Any]:
    """The kubelet's ContainersReady condition (and Ready's: there are no readiness gates)."""
    if phase in ("Succeeded", "Failed"):
        reason = "PodCompleted" if phase == "Succeeded" else "PodFailed"
        return {"type": "ContainersReady", "status": "False", "reason": reason}
    counted = [spec for spec in shape.init if spec.sidecar] + list(shape.main)
    unready = [spec.name for spec in counted if not statuses[spec.name]["ready"]]
    if unready:
        return {
            "type": "ContainersReady",
            "status": "False",
            "reason": "ContainersNotReady",
            "message": f"containers with unready status: [{' '.join(unready)}]",
        }
    return _condition("ContainersReady", True)


def _initialized(
    shape: PodShape, statuses: Mapping[str, Mapping[str, Any]], phase: str
) -> dict[str, Any]:
    """The kubelet's Initialized condition."""
    if not shape.init:
        return _condition("Initialized", True)
    if phase == "Succeeded":
        return {**_condition("Initialized", True), "reason": "PodCompleted"}
    regular_started = any(
        "waiting" not in statuses[spec.name]["state"] or statuses[spec.name]["lastState"]
        for spec in shape.main
    )
    incomplete = []
    for spec in shape.init:
        status = statuses[spec.name]
        if spec.sidecar:
            done = bool(status["started"])
        else:
            done = status["state"].get("terminated", {}).get("exitCode") == 0
        if not done:
            incomplete.append(spec.name)
    if regular_started or not incomplete:
        return _condition("Initialized", True)
    return {
        "type": "Initialized",
        "status": "False",
        "reason": "ContainersNotInitialized",
        "message": f"containers with incomplete status: [{' '.join(incomplete)}]",
    }


def _condition(kind: str, value: bool) -> dict[str, Any]:
    return {"type": kind, "status": "True" if value else "False"}


def _with_transition_times(
    conditions: list[dict[str, Any]], previous: JsonObject | None, now: datetime, created: datetime
) -> list[dict[str, Any]]:
    """Each condition's ``lastTransitionTime``: kept while its status stays, ``now`` when it
    changes (the status manager's rule); PodScheduled's is the pod's scheduling."""
    earlier = {
        entry.get("type"): entry
        for entry in (previous or {}).get("conditions") or []
        if isinstance(entry, Mapping)
    }
    stamped = []
    for entry in conditions:
        before = earlier.get(entry["type"])
        if before is not None and before.get("status") == entry["status"]:
            at = before.get("lastTransitionTime")
        else:
            at = _time(created if entry["type"] == "PodScheduled" else now)
        stamped.append({**entry, "lastProbeTime": None, "lastTransitionTime": at})
    return stamped


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")
