"""The lifecycle engine's pure decisions: phases, the plugin manager's persisted state, and what
each Kubernetes resource kind's observed status means for its task.

Nothing here talks to Kubernetes or reads a clock: an observed object (plain JSON data, as the API
server sends it) and ``now`` go in, a :class:`PhaseInfo` comes out. The engine
(``podwright.engine``) does the talking, and passes what it saw to these functions.
"""

from podwright.core.lifecycle.phases import (
    ErrorKind,
    ExecutionError,
    Phase,
    PhaseInfo,
    ReasonInfo,
)
from podwright.core.lifecycle.plugin_state import (
    STATE_FORMAT_VERSION,
    CorruptedPluginStateError,
    ManagerPhase,
    PluginState,
    decode_state,
    encode_state,
)

__all__ = [
    "STATE_FORMAT_VERSION",
    "CorruptedPluginStateError",
    "ErrorKind",
    "ExecutionError",
    "ManagerPhase",
    "Phase",
    "PhaseInfo",
    "PluginState",
    "ReasonInfo",
    "decode_state",
    "encode_state",
]
