"""MCP's entry in the classification rule table (recorder/rules.py)."""

from ..table import ProtocolRules
from . import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS, SERVER_NOTIFICATIONS, SERVER_REQUESTS

RULES = ProtocolRules("mcp", CLIENT_REQUESTS | CLIENT_NOTIFICATIONS,
                      SERVER_REQUESTS | SERVER_NOTIFICATIONS)
