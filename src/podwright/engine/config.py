"""The lifecycle engine's settings, with the defaults its users expect.

Durations are written as Go durations (``3m``, ``90s``, ``1h30m``), as in kubectl and Flyte's
configuration; every problem names its key and what is allowed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from podwright.core.lifecycle.pod_status import PodPhaseConfig

FINALIZER = "podwright.dev/finalizer"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "podwright"
TASK_ID_ANNOTATION = "podwright.dev/task-id"
TASK_LABEL = "podwright.dev/task"
TASK_ID_LABEL_SUFFIX = "task-id"


def _default_annotations() -> dict[str, str]:
    # A pod the cluster autoscaler evicts to shrink a node loses the task's progress.
    return {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}


def _default_labels() -> dict[str, str]:
    # The watch caches select podwright's own objects by this label.
    return {MANAGED_BY_LABEL: MANAGED_BY}


@dataclass(frozen=True)
class LifecycleConfig:
    """Settings of the plugin manager and its event watcher.

    ``inject_finalizer`` adds ``podwright.dev/finalizer`` so no resource disappears before its task
    is finalized; ``delete_resource_on_finalize`` deletes the resource once its task is finalized
    (otherwise it stays for inspection, and Kubernetes' own TTLs apply).

    A launch that meets a system error (a 5xx, an API server that cannot be reached) tries again
    after ``launch_backoff_base``, doubling up to ``launch_backoff_max`` (each delay jittered down
    to half), and fails the task after ``launch_attempts`` attempts in a row: about half a minute
    by default. An aborted resource is given its pods' termination grace period plus
    ``abort_margin`` to confirm it stopped before the abort is recorded anyway.
    """

    inject_finalizer: bool = False
    # The domain of the renderer's lifecycle annotations (the cluster profile's labelDomain).
    label_domain: str = "podwright.dev"
    delete_resource_on_finalize: bool = False
    pod: PodPhaseConfig = field(default_factory=PodPhaseConfig)
    default_labels: Mapping[str, str] = field(default_factory=_default_labels)
    default_annotations: Mapping[str, str] = field(default_factory=_default_annotations)
    event_ttl: timedelta = timedelta(hours=1)
    events_per_object: int = 50
    quota_backoff_base: timedelta = timedelta(seconds=10)
    quota_backoff_max: timedelta = timedelta(minutes=5)
    system_error_backoff_base: timedelta = timedelta(seconds=1)
    launch_attempts: int = 6
    launch_backoff_base: timedelta = timedelta(seconds=1)
    launch_backoff_max: timedelta = timedelta(seconds=16)
    finalize_attempts: int = 5
    abort_margin: timedelta = timedelta(seconds=30)

    @property
    def task_id_label(self) -> str:
        """The label each of a task's objects and pods carries, its value the task's id (in the
        form a label value takes: ``task_label_value``)."""
        return f"{self.label_domain}/{TASK_ID_LABEL_SUFFIX}"


class ConfigError(ValueError):
    """The lifecycle configuration has a field that is unknown or of the wrong form."""


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(value: object, field_name: str) -> timedelta:
    """A Go duration (``3m``, ``1h30m``, ``0s``) or a number of seconds."""
    seconds: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        seconds = value
    elif isinstance(value, str) and value and _DURATION.sub("", value) == "":
        seconds = sum(float(n) * _UNITS[unit] for n, unit in _DURATION.findall(value))
    if seconds is not None:
        try:
            return timedelta(seconds=seconds)
        except OverflowError:
            raise ConfigError(
                f"{field_name}: {value!r} is longer than a duration can be "
                f"(at most {timedelta.max.days} days)"
            ) from None
    raise ConfigError(
        f"{field_name}: expected a duration such as '3m', '90s' or '1h30m', got {value!r}"
    )


_KEYS = {
    "labelDomain",
    "injectFinalizer",
    "deleteResourceOnFinalize",
    "gracePeriods",
    "podPendingTimeout",
    "defaultLabels",
    "defaultAnnotations",
    "events",
    "quotaBackoff",
    "launchAttempts",
    "launchBackoff",
    "finalizeAttempts",
    "abortMargin",
}
_GRACE_KEYS = {"createContainerError", "createContainerConfigError", "imagePullBackOff"}


def config_from_data(data: Mapping[str, Any]) -> LifecycleConfig:
    """A :class:`LifecycleConfig` from its document form (every key optional)."""
    _check_keys(data, _KEYS, "")
    base = LifecycleConfig()
    grace = _mapping(data, "gracePeriods")
    _check_keys(grace, _GRACE_KEYS, "gracePeriods.")
    events = _mapping(data, "events")
    _check_keys(events, {"ttl", "maxPerObject"}, "events.")
    backoff = _mapping(data, "quotaBackoff")
    _check_keys(backoff, {"base", "max"}, "quotaBackoff.")
    launch_backoff = _mapping(data, "launchBackoff")
    _check_keys(launch_backoff, {"base", "max"}, "launchBackoff.")
    pending = data.get("podPendingTimeout")
    pod = PodPhaseConfig(
        create_container_error_grace=_duration(
            grace, "createContainerError", base.pod.create_container_error_grace, "gracePeriods."
        ),
        create_container_config_error_grace=_duration(
            grace,
            "createContainerConfigError",
            base.pod.create_container_config_error_grace,
            "gracePeriods.",
        ),
        image_pull_backoff_grace=_duration(
            grace, "imagePullBackOff", base.pod.image_pull_backoff_grace, "gracePeriods."
        ),
        pod_pending_timeout=None
        if pending is None
        else parse_duration(pending, "podPendingTimeout"),
    )
    config = LifecycleConfig(
        inject_finalizer=_flag(data, "injectFinalizer", base.inject_finalizer),
        delete_resource_on_finalize=_flag(
            data, "deleteResourceOnFinalize", base.delete_resource_on_finalize
        ),
        label_domain=_text(data, "labelDomain", base.label_domain),
        pod=pod,
        default_labels=_strings(data, "defaultLabels", base.default_labels),
        default_annotations=_strings(data, "defaultAnnotations", base.default_annotations),
        event_ttl=_duration(events, "ttl", base.event_ttl, "events."),
        events_per_object=_count(events, "maxPerObject", base.events_per_object, "events."),
        quota_backoff_base=_duration(backoff, "base", base.quota_backoff_base, "quotaBackoff."),
        quota_backoff_max=_duration(backoff, "max", base.quota_backoff_max, "quotaBackoff."),
        launch_attempts=_count(data, "launchAttempts", base.launch_attempts, ""),
        launch_backoff_base=_duration(
            launch_backoff, "base", base.launch_backoff_base, "launchBackoff."
        ),
        launch_backoff_max=_duration(
            launch_backoff, "max", base.launch_backoff_max, "launchBackoff."
        ),
        finalize_attempts=_count(data, "finalizeAttempts", base.finalize_attempts, ""),
        abort_margin=_duration(data, "abortMargin", base.abort_margin, ""),
    )
    for name, low, high in (
        ("quotaBackoff", config.quota_backoff_base, config.quota_backoff_max),
        ("launchBackoff", config.launch_backoff_base, config.launch_backoff_max),
    ):
        if high < low:
            raise ConfigError(
                f"{name}.max: must be at least {name}.base "
                f"({low.total_seconds():g}s), got {high.total_seconds():g}s"
            )
    return config


def _check_keys(data: Mapping[str, Any], allowed: set[str], prefix: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(
            f"{prefix}{unknown[0]}: unknown field; allowed: {', '.join(sorted(allowed))}"
        )


def _mapping(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: expected a mapping, got {value!r}")
    return value


def _flag(data: Mapping[str, Any], key: str, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    return value


def _count(data: Mapping[str, Any], key: str, default: int, prefix: str) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{prefix}{key}: expected an integer of at least 1, got {value!r}")
    return value


def _duration(data: Mapping[str, Any], key: str, default: timedelta, prefix: str) -> timedelta:
    return parse_duration(data[key], prefix + key) if key in data else default


def _strings(data: Mapping[str, Any], key: str, default: Mapping[str, str]) -> Mapping[str, str]:
    value = data.get(key, default)
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(f"{key}: expected a mapping of strings to strings, got {value!r}")
    return dict(value)


def _text(data: Mapping[str, Any], key: str, default: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{key}: expected a non-empty string, got {value!r}")
    return value
