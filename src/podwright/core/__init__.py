"""The pure core: quantities, workloads, policies, pod templates, rendering, phase decisions.

Nothing here performs I/O, reads a clock or keeps global state; every function is a function of
its arguments (``now`` is passed in). import-linter enforces it (see ``pyproject.toml``).
"""
