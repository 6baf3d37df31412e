"""Field paths: how podwright names a place in a document, in errors and in sources.

A path is a tuple of mapping keys and list indices, in the document's own (camelCase) names. It
is shared by the layer that knows where a field was written (line and column in a file) and the
layers that find something wrong with it, so that the two can be joined in one error line.
"""

from __future__ import annotations

FieldPath = tuple[str | int, ...]


def format_path(path: FieldPath) -> str:
    """``("spec", "containers", 0, "name")`` → ``spec.containers[0].name``.

    Keys that are not plain identifiers (``nvidia.com/gpu``) are bracketed and quoted, so the
    path stays unambiguous: ``limits['nvidia.com/gpu']``.
    """
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif not part.replace("-", "").replace("_", "").isalnum():
            text += f"[{part!r}]"
        else:
            text += f".{part}" if text else part
    return text
