"""Every label ACP frames get: the short ones of replay reports and wire-show's history lines
(`describe`), and what a request to the client asks and its answer says (the timeline)."""

from __future__ import annotations

from typing import Any

import orjson

from ..base import get_path
from ..text import quote_text as _q

# session/update kinds that carry streamed text, in order
CHUNKS = frozenset({"agent_message_chunk", "agent_thought_chunk", "user_message_chunk"})


def describe(kind: str, method: str | None, msg_type: str | None, payload: Any) -> str | None:
    if method == "session/update":
        u = get_path(payload, "update") or {}
        if msg_type in CHUNKS:
            text = get_path(u, "content", "text")
            return f"{msg_type} {_q(text)}"
        if msg_type in ("tool_call", "tool_call_update"):
            bits = [u.get("title"), u.get("kind"), u.get("status")]
            return f"{msg_type} " + " ".join(str(b) for b in bits if b)
        return f"session/update {msg_type}"
    if method == "session/request_permission":
        return f"session/request_permission {_q(get_path(payload, 'toolCall', 'title'))}"
    if method in ("fs/read_text_file", "fs/write_text_file"):
        return f"{method} {get_path(payload, 'path')}"
    if method == "terminal/create":
        return f"terminal/create {_q(get_path(payload, 'command'))}"
    if method == "session/prompt" and kind == "request":
        texts = [b.get("text") for b in get_path(payload, "prompt") or []
                 if isinstance(b, dict) and b.get("type") == "text"]
        return f"session/prompt {_q(' '.join(t for t in texts if t))}"
    return None


def ask(method: str | None, params: Any) -> str:
    """What a request to the client asks, in a few words."""
    p = params if isinstance(params, dict) else {}
    if method in ("fs/read_text_file", "fs/write_text_file"):
        return str(p.get("path"))
    if method == "terminal/create":
        return " ".join([str(p.get("command"))] + [str(a) for a in p.get("args") or []])
    if method and method.startswith("terminal/"):
        return str(p.get("terminalId"))
    if method == "elicitation/create":
        return '"' + str(p.get("message")) + '"'
    return ""


def answer(method: str | None, result: Any) -> str:
    """What the client's answer to a request says, in a few words."""
    r = result if isinstance(result, dict) else {}
    if method == "elicitation/create":
        content = r.get("content")
        return " ".join([str(r.get("action"))] + ([orjson.dumps(content).decode()] if content else []))
    if method == "fs/read_text_file":
        return f"{len(str(r.get('content') or ''))} chars"
    if method == "terminal/output":
        return str(r.get("output"))
    if method == "terminal/wait_for_exit":
        return f"exit {r.get('exitCode')}" if r.get("signal") is None else f"signal {r.get('signal')}"
    return "" if not r else orjson.dumps(r).decode()
