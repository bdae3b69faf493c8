"""Short, human descriptions of frames for reports: `ToolCall Shell{"command": "ls"}`,
`ContentPart text "Done."`, `response p-1 {"status":"finished"}`."""

from __future__ import annotations

from typing import Any

import orjson

from .recording import Msg

MAX = 70


def _short(s: Any, n: int = MAX) -> str:
    if not isinstance(s, str):
        s = orjson.dumps(s).decode() if s is not None else "null"
    s = s.replace("\n", "\\n")
    return s if len(s) <= n else s[: n - 1] + "…"


def _q(s: Any, n: int = MAX) -> str:
    return '"' + _short(s, n) + '"'


def describe(m: Msg, payload: Any = None) -> str:
    """`payload` is the (normalised) payload to show; defaults to the message's own."""
    p = m.payload if payload is None else payload
    if m.kind != "invalid":
        label = m.adapter.describe(m.kind, m.method, m.msg_type, p)
        if label is not None:
            return label
    if m.kind == "invalid":
        return "non-JSON frame " + _q(m.raw.decode("utf-8", "replace"), 50)
    if m.kind in ("response", "error"):
        rid = "" if m.rpc_id is None else \
            " " + (m.rpc_id if isinstance(m.rpc_id, str) else _short(m.rpc_id))
        if m.kind == "error" and isinstance(p, dict):
            return f"error{rid} {p.get('code')} {_q(p.get('message'), 50)}"
        return f"response{rid} {_short(p, 50)}"
    if m.method not in ("event", "request"):
        rid = "" if m.rpc_id is None else f"#{m.rpc_id}"
        body = "" if p is None else " " + _short(p, 50)
        return f"{m.kind} {m.method}{rid}{body}"
    t = m.msg_type or "?"
    d = p if isinstance(p, dict) else {}
    try:
        if t == "ContentPart":
            kind = d.get("type")
            body = d.get(kind) if kind in ("text", "think") else d
            return f"ContentPart {kind} {_q(body, 60)}"
        if t == "ToolCall":
            fn = d.get("function") or {}
            return f"ToolCall {fn.get('name')}{_short(fn.get('arguments') or '', 60)}"
        if t == "ToolCallPart":
            return f"ToolCallPart {_q(d.get('arguments_part'), 60)}"
        if t == "ToolResult":
            rv = d.get("return_value") or {}
            state = "error" if rv.get("is_error") else "ok"
            out = rv.get("output") if rv.get("output") not in ("", None) else rv.get("message")
            return f"ToolResult {d.get('tool_call_id')} {state} {_q(out, 50)}"
        if t == "ApprovalRequest":
            return f"ApprovalRequest {d.get('sender')}: {_short(d.get('description'), 60)}"
        if t == "ApprovalResponse":
            fb = f" {_q(d.get('feedback'), 40)}" if d.get("feedback") else ""
            return f"ApprovalResponse {d.get('response')}{fb}"
        if t == "ToolCallRequest":
            return f"ToolCallRequest {d.get('name')}{_short(d.get('arguments') or '', 60)}"
        if t == "QuestionRequest":
            qs = [q.get("question") for q in d.get("questions") or [] if isinstance(q, dict)]
            return f"QuestionRequest {_short(qs, 60)}"
        if t == "HookRequest":
            return f"HookRequest {d.get('event')} {d.get('target')}"
        if t == "StepBegin":
            return f"StepBegin {d.get('n')}"
        if t == "TurnBegin":
            return f"TurnBegin {_q(d.get('user_input'), 50)}"
        if t == "StatusUpdate":
            return f"StatusUpdate {d.get('message_id')} tokens={d.get('context_tokens')}"
    except (AttributeError, TypeError):
        pass
    if not d:
        return t
    return f"{t} {_short(d, 60)}"


def field_diff(a: Any, b: Any, path: str = "", out: list[str] | None = None,
               limit: int = 8) -> list[str]:
    """`path: old → new` lines for the leaves that differ between two JSON values."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            p = f"{path}.{k}" if path else str(k)
            if k not in b:
                out.append(f"{p}: {_short(a[k], 60)} → (absent)")
            elif k not in a:
                out.append(f"{p}: (absent) → {_short(b[k], 60)}")
            elif a[k] != b[k]:
                field_diff(a[k], b[k], p, out, limit)
            if len(out) >= limit:
                break
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                field_diff(x, y, f"{path}[{i}]", out, limit)
            if len(out) >= limit:
                break
        return out
    if a != b:
        out.append(f"{path or '(frame)'}: {_short(a, 60)} → {_short(b, 60)}")
    return out
