"""Wire's entry in the classification rule table (recorder/rules.py)."""

from ..table import ProtocolRules
from . import names

RULES = ProtocolRules(
    "wire", names.CLIENT_METHODS, names.AGENT_METHODS,
    typed={"event": ("type",), "request": ("type",)},
    payload_at={"event": ("payload",), "request": ("payload",)},
    known_types={"event": names.EVENT_TYPES, "request": names.REQUEST_TYPES},
    # streamed.py's pieces, one level of subagent events included
    pieces=tuple(f"$.params.payload{sub}.{p}" for sub in ("", ".event.payload")
                 for p in ("text", "think", "function.arguments", "arguments_part")),
    nested_marker=b'"SubagentEvent"',
)
