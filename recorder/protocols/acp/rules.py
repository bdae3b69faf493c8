"""ACP's entry in the classification rule table (recorder/rules.py)."""

from ..table import ProtocolRules
from . import AGENT_METHODS, CLIENT_METHODS

RULES = ProtocolRules(
    "acp", CLIENT_METHODS, AGENT_METHODS,
    typed={"session/update": ("update", "sessionUpdate")},
    pieces=("$.params.update.content.text",),  # streamed.py's text chunks
)
