"""The name of the Kubernetes object a task creates.

The name is derived from the task id alone, so a restarted engine that launches the same task again
asks for the same name and gets AlreadyExists instead of creating a second resource. It is a
DNS-1035 label (a letter first: Services and Knative Services require it, and every other kind
accepts it), at most the plugin's maximum length; an id that had to be changed to fit gets a hash
suffix, so two ids never share a name.
"""

from __future__ import annotations

from podwright.core.k8s_names import derived_label


def task_object_name(task_id: str, max_length: int) -> str:
    if not task_id:
        raise ValueError("task id: must not be empty")
    if max_length < 12:
        raise ValueError(f"max_length: {max_length} is too short for a collision-safe name (>= 12)")
    name = derived_label(task_id, max_length=max_length)
    if not name[0].isalpha():
        name = derived_label("t", task_id, max_length=max_length)
    return name
