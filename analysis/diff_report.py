"""`wire-diff`'s output: text for people (rich, every value from a recording escaped with
recorder.visible) and JSON for programs."""

from __future__ import annotations

import io
from typing import Any

import orjson

from wire_recorder.recorder.visible import json_visible, visible

from .diff import DiffResult
from .diff_compare import Change

# (what, field) pairs where the field says nothing more than the name of what changed
PLAIN = {("model text", "text"), ("model thinking", "thinking"), ("tool result", "output"),
         ("tool arguments", "arguments"), ("tool", "tool_name"), ("prompt", "user_input"),
         ("answer", "answer")}
MARK = {"changed": "~", "missing": "-", "extra": "+"}
STYLE = {"changed": "yellow", "missing": "red", "extra": "green"}


def _one_line(v: Any) -> str:
    if v is None:
        return "none"
    # JSON: a string quoted, its line breaks escaped, an empty one visible as ""
    return orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()


def pair(a: Any, b: Any, width: int = 70) -> tuple[str, str]:
    """a and b on one line each, cut to `width` around where they first differ."""
    sa, sb = _one_line(a), _one_line(b)
    if len(sa) <= width and len(sb) <= width:
        return sa, sb
    i = 0
    while i < min(len(sa), len(sb)) and sa[i] == sb[i]:
        i += 1
    start = max(0, i - width // 3)

    def cut(s: str) -> str:
        part = s[start:start + width]
        return ("…" if start else "") + part + ("…" if start + width < len(s) else "")
    return cut(sa), cut(sb)


def headline(c: Change, width: int = 70) -> str:
    if c.kind == "missing":
        return f"{c.where}: {c.what} only in A: {pair(c.a, None, width)[0]}"
    if c.kind == "extra":
        return f"{c.where}: {c.what} only in B: {pair(None, c.b, width)[1]}"
    what = c.what if (c.what, c.field) in PLAIN else f"{c.what} ({c.field})"
    old, new = pair(c.a, c.b, width)
    return f"{c.where}: {what}: {old} → {new}"


def _side(label: str, d: dict[str, Any]) -> str:
    name = f" [{d['name']}]" if d.get("name") else ""
    extra = f", replay of {d['replay_of']}" if d.get("replay_of") else ""
    proto = f", {d['protocol']}" if d.get("protocol") else ""
    return f"{label}: {d.get('path')}{name} session {d.get('session_id')}{proto}{extra}"


def render_text(r: DiffResult, color: bool = False, width: int = 110) -> str:
    from rich.console import Console
    from rich.text import Text

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=color, no_color=not color, width=width,
                  highlight=False, soft_wrap=True)
    con.print(Text(visible(_side("A", r.a)), style="bold"))
    con.print(Text(visible(_side("B", r.b)), style="bold"))
    for note in r.notes:
        con.print(Text(visible(f"note: {note}"), style="yellow"))
    if r.same:
        con.print(Text("same: no differences beyond volatile values (ids, times, paths)"
                       + ("" if r.tolerance.time_ms is not None else "; timings not compared"),
                       style="bold green"))
        return buf.getvalue()
    n = len(r.changes)
    con.print(Text(f"DIFFERENT: {n} difference{'s' if n != 1 else ''}", style="bold red"))
    for c in r.changes:
        t = Text(f"  {MARK.get(c.kind, '~')} ", style=STYLE.get(c.kind, "yellow"))
        t.append(visible(headline(c, max(30, width - 40))))
        con.print(t)
    return buf.getvalue()


def render_json(r: DiffResult) -> bytes:
    # the same values with no raw control or bidi character (it may be printed on a terminal)
    return json_visible(orjson.dumps(r.to_dict(), option=orjson.OPT_INDENT_2
                                     | orjson.OPT_NON_STR_KEYS)) + b"\n"
