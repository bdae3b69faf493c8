"""The Model Context Protocol over stdio, both eras:

* handshake era (protocol <= 2025-11-25, mcp 1.x and 2.x "legacy"): `initialize`, then the server
  may send requests of its own (sampling, roots, elicitation, ping);
* 2026-07-28 (mcp 2.x default): `server/discover`, `_meta` on every request, no server requests;
  instead a result with `resultType: "input_required"`, `inputRequests` and an opaque, per-process
  `requestState`, which the client sends back with its `inputResponses` in a retry (new id).

Here the "agent" side is the server and the "client" side the MCP client.
"""

from __future__ import annotations

from typing import Any

from ..base import Adapter, get_path

PV_META = "io.modelcontextprotocol/protocolVersion"

CLIENT_REQUESTS = frozenset({
    "initialize", "ping", "server/discover", "tools/list", "tools/call", "resources/list",
    "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe",
    "prompts/list", "prompts/get", "completion/complete", "logging/setLevel", "tasks/get",
    "tasks/result", "tasks/list", "tasks/cancel",
})
CLIENT_NOTIFICATIONS = frozenset({
    "notifications/initialized", "notifications/cancelled", "notifications/progress",
    "notifications/roots/list_changed",
})
SERVER_REQUESTS = frozenset({"sampling/createMessage", "roots/list", "elicitation/create", "ping"})
SERVER_NOTIFICATIONS = frozenset({
    "notifications/message", "notifications/progress", "notifications/cancelled",
    "notifications/tools/list_changed", "notifications/resources/list_changed",
    "notifications/prompts/list_changed", "notifications/resources/updated",
    "notifications/elicitation/complete", "notifications/tasks/status",
})
# requests that may be answered with input_required in the 2026 era
INPUT_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})


class Mcp(Adapter):
    name = "mcp"
    title = "Model Context Protocol"
    agent_role = "server"
    client_methods = CLIENT_REQUESTS | CLIENT_NOTIFICATIONS
    agent_methods = SERVER_REQUESTS | SERVER_NOTIFICATIONS
    agent_request_methods = SERVER_REQUESTS
    # a server's notifications for a request (progress, log messages) come before its response
    anchor_methods = CLIENT_REQUESTS - {"ping"}
    racy_methods = frozenset({"notifications/cancelled"})
    ignore = (
        ("request:id", "server request ids count up per direction: they shift when an earlier "
                       "request changes (replay matches requests by what they ask)"),
        ("**.requestState", "opaque, encrypted with a per-process key (2026-07-28)"),
    )
    default_match_on = ("method", "payload")

    def detect(self, method, params, direction):
        if method == "initialize" and isinstance(params, dict):
            pv = params.get("protocolVersion")
            return ("mcp", pv) if isinstance(pv, str) else None
        if method == "server/discover":
            pv = get_path(params, "_meta", PV_META)
            return ("mcp", pv if isinstance(pv, str) else None)
        if method in CLIENT_REQUESTS and method not in ("initialize", "ping") or \
                method.startswith("notifications/"):
            return ("mcp", None)
        return None

    def answered_version(self, method, offered, result):
        if not isinstance(result, dict):
            return None
        if method == "initialize":  # the server answers with the version it will speak
            pv = result.get("protocolVersion")
            return pv if isinstance(pv, str) else None
        if method == "server/discover":  # the offer stands when the server supports it
            supported = result.get("supportedVersions")
            return offered if isinstance(supported, list) and offered in supported else None
        return None

    def minted(self, method, result) -> list[str]:
        state = get_path(result, "requestState")
        return [state] if isinstance(state, str) else []

    def reject_answer(self, method, msg_type, payload, rpc_id) -> Any | None:
        if method == "elicitation/create":
            return {"action": "decline"}
        if method == "ping":
            return {}
        return None




ADAPTER = Mcp()
