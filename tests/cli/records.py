"""Tasks recorded straight into a task store, as ``run`` records them, for tests of the commands
that read the store (``abort``, ``delete``, ``executor``) without going through ``run``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from podwright.engine.task_store import NewTask


def pod_task(
    task_id: str,
    pod_spec: dict[str, Any],
    *,
    workload_type: str = "workspace",
    namespace: str = "default",
    backend: str = "local",
) -> NewTask:
    """A task whose one manifest is a Pod named after it, with ``pod_spec``, submitted now."""
    return NewTask(
        task_id=task_id,
        workload_type=workload_type,
        name=task_id,
        namespace=namespace,
        backend=backend,
        workload={},
        effective={},
        manifests=(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": task_id}, "spec": pod_spec},
        ),
        submitted_at=datetime.now(UTC),
    )
