"""Short, human descriptions of frames for reports: `ToolCall Shell{"command": "ls"}`,
`ContentPart text "Done."`, `response p-1 {"status":"finished"}`.

The session's protocol adapter labels its own frames (`Adapter.describe`, in
recorder/protocols/<protocol>/labels.py, where wire-show's labels come from too); what it leaves
gets the generic JSON-RPC label here."""

from __future__ import annotations

from typing import Any

from wire_recorder.recorder.protocols.text import MAX
from wire_recorder.recorder.protocols.text import quote as _q
from wire_recorder.recorder.protocols.text import short as _short

from .listdiff import list_diff
from .recording import Msg

__all__ = ["MAX", "describe", "field_diff", "inner_event", "region_diff"]


def inner_event(payload: Any) -> tuple[str, Any] | None:
    """(type, payload) of the event a wrapper carries (`{"event": {"type", "payload"}}`: a
    subagent's event inside its parent's stream), or None."""
    inner = payload.get("event") if isinstance(payload, dict) else None
    if isinstance(inner, dict) and isinstance(inner.get("type"), str) and "payload" in inner:
        return inner["type"], inner["payload"]
    return None


def describe(m: Msg, payload: Any = None) -> str:
    """`payload` is the (normalised) payload to show; defaults to the message's own. A wrapper
    is named with the event it carries: `SubagentEvent > ContentPart text "…"`."""
    p = m.payload if payload is None else payload
    if m.kind == "invalid":
        return "non-JSON frame " + _q(m.raw.decode("utf-8", "replace"), 50)
    inner = inner_event(p) if m.kind == "notification" else None
    if inner is not None:
        label = m.adapter.describe(m.kind, m.method, inner[0], inner[1])
        return f"{m.msg_type or m.method} > {label or inner[0]}"
    label = m.adapter.describe(m.kind, m.method, m.msg_type, p)
    if label is not None:
        return label
    if m.kind in ("response", "error"):
        rid = "" if m.rpc_id is None else \
            " " + (m.rpc_id if isinstance(m.rpc_id, str) else _short(m.rpc_id))
        if m.kind == "error" and isinstance(p, dict):
            return f"error{rid} {p.get('code')} {_q(p.get('message'), 50)}"
        return f"response{rid} {_short(p, 50)}"
    rid = "" if m.rpc_id is None else f"#{m.rpc_id}"
    body = "" if p is None else " " + _short(p, 50)
    return f"{m.kind} {m.method}{rid}{body}"


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
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                field_diff(x, y, f"{path}[{i}]", out, limit)
            if len(out) >= limit:
                break
        return out
    if isinstance(a, list) and isinstance(b, list) and a != b:  # items added or removed
        return list_diff(a, b, path, out, limit, field_diff)
    if a != b:
        if isinstance(a, str) and isinstance(b, str) and max(len(a), len(b)) > REGION:
            out.append(region_diff(a, b, path or "(frame)"))
        else:
            out.append(f"{path or '(frame)'}: {_short(a, 60)} → {_short(b, 60)}")
    return out


REGION = 60  # longer strings are shown around their first difference, not cut at the start
CONTEXT = 24


def region_diff(a: str, b: str, path: str) -> str:
    """`path [char N of LEN_A/LEN_B]: …before|after… → …before|after…`: both strings around
    their first differing character, so that two long values never print the same text."""
    n = 0
    limit = min(len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1

    def around(s: str) -> str:
        lo = max(0, n - CONTEXT)
        hi = min(len(s), n + CONTEXT)
        if not s:
            return "(empty)"
        text = s[lo:hi].replace("\n", "\\n")
        return ("…" if lo > 0 else "") + text + ("…" if hi < len(s) else "")

    return f"{path} [char {n} of {len(a)}/{len(b)}]: {around(a)} → {around(b)}"
