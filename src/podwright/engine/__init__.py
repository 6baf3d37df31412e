"""The lifecycle engine: launches each task's Kubernetes resource, follows it round after round,
attaches Kubernetes events, and aborts and finalizes it without leaking anything.

The engine orchestrates over *ports* (``kubernetes_port.KubernetesPort``, a clock and a sleeper
passed in), so it runs unchanged against the real API server (``podwright.adapters.kubernetes``), an
emulator, or an in-memory fake. What a resource's status *means* is decided in the pure core
(``podwright.core.lifecycle``); the engine decides what to *do*.
"""
