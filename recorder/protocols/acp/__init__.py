"""The Agent Client Protocol, version 1 (`kimi acp`; the official Python SDK as client).

Both sides send requests: the client prompts, the agent asks for permission, files and
terminals. Ids are integers counted separately per direction, so the same id is live in both
directions at once. `sessionId` (uuid4) and `toolCallId` (`<turn uuid>/<tool call id>`) change
on every run; the client echoes the session id in every later request, so replay maps it.
"""

from __future__ import annotations

from typing import Any

from ..base import Adapter, get_path
from .labels import CHUNKS

# methods the client calls on the agent (the SDK's AGENT_METHODS, schema 1.19) and its
# notifications
CLIENT_METHODS = frozenset({
    "initialize", "authenticate", "logout", "session/new", "session/load", "session/prompt",
    "session/cancel", "session/set_mode", "session/set_model", "session/set_config_option",
    "session/list", "session/delete", "session/fork", "session/resume", "session/close",
    "providers/list", "providers/set", "providers/disable", "mcp/message",
    "nes/start", "nes/suggest", "nes/accept", "nes/reject", "nes/close",
    "document/didOpen", "document/didChange", "document/didClose", "document/didSave",
    "document/didFocus", "$/cancel_request",
})
AGENT_REQUESTS = frozenset({
    "session/request_permission", "fs/read_text_file", "fs/write_text_file", "terminal/create",
    "terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release",
    "elicitation/create", "mcp/connect", "mcp/message", "mcp/disconnect",
})
AGENT_METHODS = AGENT_REQUESTS | {"session/update", "elicitation/complete", "$/cancel_request"}
# client requests that open a session an earlier agent process created (kimi keeps it on disk)
RESUMING = frozenset({"session/load", "session/resume", "session/fork"})


class Acp(Adapter):
    name = "acp"
    title = "Agent Client Protocol"
    client_methods = CLIENT_METHODS
    agent_methods = AGENT_METHODS
    agent_request_methods = AGENT_REQUESTS
    # all updates for a prompt arrive before its response; available_commands_update is sent
    # from a task after the session/new response, so that segment is compared as a set
    anchor_methods = frozenset({"initialize", "authenticate", "session/new", "session/load",
                                "session/prompt", "session/fork", "session/resume"})
    turn_methods = frozenset({"session/prompt"})
    # Kimi Code 2.x says how full the context is (usage_update: used of size), not what a model
    # call cost: wire-stats shows it as such (token_usage.sql)
    reports_context = True
    turn_types = frozenset({"agent_message_chunk", "agent_thought_chunk", "tool_call",
                            "tool_call_update", "plan"})
    ordered_types = CHUNKS
    racy_methods = frozenset({"session/cancel", "$/cancel_request"})
    cut_short_by = frozenset({"session/cancel"})
    ignore = (
        ("request:id", "agent request ids count up per direction: they shift when an earlier "
                       "request changes (replay matches requests by what they ask)"),
        ("**.terminal-auth.command", "the agent's own argv[0] (absolute path)"),
    )
    default_match_on = ("method", "payload")

    def detect(self, method, params, direction):
        if method == "initialize" and isinstance(params, dict):
            pv = params.get("protocolVersion")
            if isinstance(pv, int) and not isinstance(pv, bool):
                return ("acp", str(pv))
            return None
        if method.startswith(("session/", "fs/", "terminal/")):
            return ("acp", None)
        return None

    def answered_version(self, method, offered, result):
        pv = result.get("protocolVersion") if isinstance(result, dict) else None
        if method == "initialize" and isinstance(pv, int) and not isinstance(pv, bool):
            return str(pv)
        return None

    def session_workdir(self, method, params):
        cwd = get_path(params, "cwd") if method in ("session/new", "session/load") else None
        return cwd if isinstance(cwd, str) else None

    def msg_type(self, method, params):
        if method == "session/update":
            kind = get_path(params, "update", "sessionUpdate")
            return kind if isinstance(kind, str) else None
        return None

    def minted(self, method, result) -> list[str]:
        sid = get_path(result, "sessionId")
        return [sid] if isinstance(sid, str) else []

    def refers(self, method, params) -> list[str]:
        if method in RESUMING:
            sid = get_path(params, "sessionId")
            return [sid] if isinstance(sid, str) else []
        return []

    def client_effects(self, method, params):
        # kimi stats the file it asked the client to write (WriteFile's "Current size")
        if method == "fs/write_text_file":
            path, content = get_path(params, "path"), get_path(params, "content")
            if isinstance(path, str) and isinstance(content, str):
                return [("write_file", path, content)]
        return []

    def reject_answer(self, method, msg_type, payload, rpc_id) -> Any | None:
        if method == "session/request_permission":
            for opt in get_path(payload, "options") or []:
                if isinstance(opt, dict) and opt.get("kind") == "reject_once":
                    return {"outcome": {"outcome": "selected", "optionId": opt.get("optionId")}}
            return {"outcome": {"outcome": "cancelled"}}
        if method == "elicitation/create":
            return {"action": "decline"}
        return None




ADAPTER = Acp()
