"""Every label MCP frames get: the short ones of replay reports (`describe`), and what a server
request asks and the client's answer says (the timeline)."""

from __future__ import annotations

from typing import Any

import orjson

from ..base import get_path
from ..text import as_dict
from ..text import quote_text as _q


def describe(kind: str, method: str | None, msg_type: str | None, payload: Any) -> str | None:
    if method == "tools/call" and kind == "request":
        args = get_path(payload, "arguments")
        retry = " (retry with inputResponses)" if get_path(payload, "inputResponses") else ""
        return f"tools/call {get_path(payload, 'name')} {_q(args)}{retry}"
    if method == "sampling/createMessage":
        msgs = get_path(payload, "messages") or []
        last = as_dict(msgs[-1]) if msgs else {}
        return f"sampling/createMessage {_q(get_path(last, 'content', 'text'))}"
    if method == "elicitation/create":
        return f"elicitation/create {_q(get_path(payload, 'message'))}"
    if method == "notifications/message":
        return f"notifications/message {get_path(payload, 'level')} {_q(get_path(payload, 'data'))}"
    if kind == "response" and isinstance(payload, dict) and \
            payload.get("resultType") == "input_required":
        wanted = [get_path(v, "method") for v in (payload.get("inputRequests") or {}).values()
                  if isinstance(v, dict)]
        return f"response input_required {', '.join(str(w) for w in wanted)}"
    return None


def ask(method: str | None, params: Any) -> str:
    """What a server request (or an input request inside a result) asks, in a few words."""
    p = params if isinstance(params, dict) else {}
    if method == "sampling/createMessage":
        msgs = p.get("messages") or []
        last = as_dict(msgs[-1]) if msgs else {}
        content = as_dict(last.get("content"))
        return '"' + str(content.get("text")) + '"'
    if method == "elicitation/create":
        return '"' + str(p.get("message")) + '"'
    return ""


def answer(method: str | None, result: Any) -> str:
    """What the client's answer to a server request says, in a few words."""
    r = result if isinstance(result, dict) else {}
    if method == "sampling/createMessage":
        content = as_dict(r.get("content"))
        return f"{content.get('text')} ({r.get('model')})"
    if method == "elicitation/create":
        given = r.get("content")
        return " ".join([str(r.get("action"))] + ([orjson.dumps(given).decode()] if given else []))
    if method == "roots/list":
        return ", ".join(str(x.get("uri")) for x in r.get("roots") or [] if isinstance(x, dict))
    return "" if not r else orjson.dumps(r).decode()
