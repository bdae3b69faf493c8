"""Labels of Wire's typed events and requests for reports: `ToolCall Shell{"command": "ls"}`,
`ContentPart text "Done."`, `ApprovalRequest Shell: Run command …`. Responses, errors and the
client's plain requests get replay's generic JSON-RPC labels."""

from __future__ import annotations

from typing import Any

from ..text import quote as _q
from ..text import short as _short


def describe(kind: str, method: str | None, msg_type: str | None, payload: Any) -> str | None:
    if kind in ("response", "error") or method not in ("event", "request"):
        return None
    t = msg_type or "?"
    d = payload if isinstance(payload, dict) else {}
    try:
        if t == "ContentPart":
            part = d.get("type")
            body = d.get(part) if part in ("text", "think") else d
            return f"ContentPart {part} {_q(body, 60)}"
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
