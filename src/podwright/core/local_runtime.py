"""The local backend's Pods as the lifecycle engine sees them: pure status and launch decisions.

The local backend runs a Pod's containers as processes on one machine and must describe them in
the API server's vocabulary, so that the same plugins decide the same phases as on a cluster:
``status.phase``, ``conditions`` and ``containerStatuses`` (waiting, running, terminated with the
exit code and reason Completed or Error), and for a Job the ``active``, ``ready``, ``succeeded``,
``failed`` counts and the Complete or Failed condition. This module turns what the processes did
into that status, and a container spec into what to run (command, environment, working
directory), refusing with the kubelet's reasons what one machine cannot provide: no command
(an image's entrypoint cannot be run without the image), a Secret or ConfigMap reference, a
working directory that does not exist here.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import ROUND_CEILING
from typing import Any

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


@dataclasses.dataclass(frozen=True)
class ContainerRun:
    """One container as the local runtime saw it: not started, waiting on an error, running,
    or exited with a code (a process killed by a signal exits with 128 + the signal)."""

    name: str
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    waiting_reason: str = ""
    waiting_message: str = ""

    @property
    def running(self) -> bool:
        return self.started_at is not None and self.exit_code is None


def pod_status(
    init: Sequence[ContainerRun], main: Sequence[ContainerRun], created: datetime, now: datetime
) -> dict[str, Any]:
    """The ``status`` of a Pod whose init containers ran in order and then its containers."""
    failed_init = any(run.exit_code not in (None, 0) for run in init)
    init_done = all(run.exit_code == 0 for run in init)
    started = init_done and all(run.started_at is not None for run in main)
    exited = [run for run in main if run.exit_code is not None]
    if failed_init or (main and len(exited) == len(main) and any(r.exit_code for r in exited)):
        phase = "Failed"
    elif main and len(exited) == len(main):
        phase = "Succeeded"
    elif started and any(run.running for run in main):
        phase = "Running"
    else:
        phase = "Pending"
    ready = phase == "Running" and all(run.running for run in main)
    status: dict[str, Any] = {
        "phase": phase,
        "hostIP": LOCAL_POD_IP,
        "podIP": LOCAL_POD_IP,
        "startTime": _time(created),
        "conditions": [
            _condition("PodScheduled", True, created),
            _condition("Initialized", init_done, _latest(init, created)),
            _condition("ContainersReady", ready, _latest(main, created)),
            _condition("Ready", ready, _latest(main, created)),
        ],
        "containerStatuses": [_container_status(run) for run in main],
    }
    if init:
        status["initContainerStatuses"] = [_container_status(run) for run in init]
    return status


def _latest(runs: Sequence[ContainerRun], default: datetime) -> datetime:
    times = [t for run in runs for t in (run.started_at, run.finished_at) if t is not None]
    return max(times, default=default)


def _condition(kind: str, value: bool, at: datetime) -> dict[str, Any]:
    return {"type": kind, "status": "True" if value else "False", "lastTransitionTime": _time(at)}


def _container_status(run: ContainerRun) -> dict[str, Any]:
    if run.exit_code is not None:
        state: dict[str, Any] = {
            "terminated": {
                "exitCode": run.exit_code,
                "reason": "Completed" if run.exit_code == 0 else "Error",
                "startedAt": _time(run.started_at),
                "finishedAt": _time(run.finished_at),
            }
        }
    elif run.started_at is not None:
        state = {"running": {"startedAt": _time(run.started_at)}}
    else:
        waiting = {"reason": run.waiting_reason or "ContainerCreating"}
        if run.waiting_message:
            waiting["message"] = run.waiting_message
        state = {"waiting": waiting}
    return {
        "name": run.name,
        "state": state,
        "ready": run.running,
        "restartCount": 0,
        "started": run.running,
    }


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")
