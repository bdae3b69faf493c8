"""Wire's streamed pieces of one message (recorder/redact_stream.py): `ContentPart` texts and
thoughts, a `ToolCall`'s arguments and the `ToolCallPart`s that go on with them, also inside a
`SubagentEvent`."""

from __future__ import annotations

from typing import Any

# bytes one of which a frame holding a piece has (a cheap first look before parsing)
MARKERS = (b'"ContentPart"', b'"ToolCallPart"', b'"ToolCall"')


def piece_of(obj: dict[str, Any]) -> tuple[str, tuple[str, ...], str] | None:
    """(group, path, text) when obj is a piece: group "text", "think", "tool" ("tool-start" for
    the ToolCall that begins one), scoped to a subagent; None otherwise."""
    params = obj.get("params")
    if obj.get("method") != "event" or not isinstance(params, dict):
        return None
    return _piece(params, ("params",), "")


def _piece(env: dict[str, Any], at: tuple[str, ...], scope: str
           ) -> tuple[str, tuple[str, ...], str] | None:
    etype, payload = env.get("type"), env.get("payload")
    if not isinstance(payload, dict):
        return None
    at = at + ("payload",)
    if etype == "ContentPart":
        ptype = payload.get("type")
        if ptype in ("text", "think") and isinstance(payload.get(ptype), str):
            return f"{ptype}{scope}", at + (ptype,), payload[ptype]
    elif etype == "ToolCall":
        fn = payload.get("function")
        if isinstance(fn, dict) and (fn.get("arguments") is None
                                     or isinstance(fn.get("arguments"), str)):
            return f"tool-start{scope}", at + ("function", "arguments"), fn.get("arguments") or ""
    elif etype == "ToolCallPart":
        part = payload.get("arguments_part")
        if part is None or isinstance(part, str):
            return f"tool{scope}", at + ("arguments_part",), part or ""
    elif etype == "SubagentEvent" and isinstance(payload.get("event"), dict):
        return _piece(payload["event"], at + ("event",),
                      f"/{payload.get('agent_id')}/{payload.get('parent_tool_call_id')}")
    return None
