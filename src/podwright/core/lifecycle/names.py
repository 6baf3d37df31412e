"""The name of the Kubernetes object a task creates.

The name is derived from the task id alone, so a restarted engine that launches the same task again
asks for the same name and gets AlreadyExists instead of creating a second resource. It is a
DNS-1035 label (a letter first: Services and Knative Services require it, and every other kind
accepts it), at most the plugin's maximum length; an id that had to be changed to fit gets a hash
suffix, so two ids never share a name.
"""

from __future__ import annotations

import hashlib

from podwright.core.k8s_names import derived_label


def task_object_name(task_id: str, max_length: int) -> str:
    if not task_id:
        raise ValueError("task id: must not be empty")
    if max_length < 12:
        raise ValueError(f"max_length: {max_length} is too short for a collision-safe name (>= 12)")
    name = derived_label(task_id, max_length=max_length)
    if name[0].isalpha():
        return name
    # Prefixed, and always suffixed with a hash of the id: "t-<id>" may be another task's id.
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:8]
    head = name[: max_length - len("t--") - len(digest)].rstrip("-")
    return f"t-{head}-{digest}" if head else f"t-{digest}"
