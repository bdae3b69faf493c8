"""wire-ui's compare view: two sessions side by side, as `wire-diff` sees them.

The sides are read and compared by the wire-diff library (analysis/diff*.py: the same traces,
masking and changes); this only lays the two traces out as rows, one per turn, step, tool
call, request and error in wire-diff's order, each with both sides' values, timings and
tokens, and the fields wire-diff found changed marked on the row they belong to."""

from __future__ import annotations

from typing import Any

from ..diff import DiffResult
from ..diff_compare import Tolerance, _turns_of, _union, compare
from ..diff_trace import TOKEN_FIELDS, Trace

# the cells each kind of row shows (a trace item's fields), in order
COLUMNS = {
    "turn": ("user_input", "status", "stop_reason", "error_message", "duration_ms"),
    "step": ("text", "thinking", "tokens", "duration_ms"),
    "tool call": ("tool_name", "arguments", "status", "output", "message", "duration_ms"),
    "request": ("type", "subject", "outcome", "answer", "wait_ms"),
    "error": ("source", "code", "message"),
}

# the rows a page draws at most (and every changed row after them)
ROWS_MAX = 2000


def _at_key(at: dict[str, Any]) -> tuple:
    return tuple(sorted((k, v) for k, v in at.items()))


def _tokens(item: dict[str, Any] | None) -> dict[str, int] | None:
    if item is None or "tokens" not in item:
        return None
    t = item["tokens"]
    return {**{k: t.get(k, 0) for k in TOKEN_FIELDS}, "total": sum(t.get(k, 0) for k in TOKEN_FIELDS)}


def _pick(kind: str, item: dict[str, Any] | None) -> dict[str, Any] | None:
    if item is None:
        return None
    out = {c: item.get(c) for c in COLUMNS[kind] if c != "tokens"}
    if "tokens" in COLUMNS[kind]:
        out["tokens"] = _tokens(item)
    return out


def _nth(xs: list, i: int) -> Any:
    return xs[i] if i < len(xs) else None


def _step_item(t: Trace, key: tuple) -> dict[str, Any] | None:
    if key not in t.steps and key not in t.text and key not in t.tool_calls:
        return None
    st = t.steps.get(key) or {}
    tx = t.text.get(key) or {}
    return {"text": tx.get("text"), "thinking": tx.get("thinking"),
            "tokens": st.get("tokens"), "duration_ms": st.get("duration_ms")}


def rows(a: Trace, b: Trace) -> list[dict[str, Any]]:
    """Both traces' items aligned in wire-diff's order: turn, its steps (each with its tool
    calls), its requests; then the errors."""
    out: list[dict[str, Any]] = []

    def add(kind: str, at: dict[str, Any], where: str, x: Any, y: Any) -> None:
        out.append({"kind": kind, "at": at, "where": where, "a": _pick(kind, x),
                    "b": _pick(kind, y), "changed": [], "what": [], "mark": None})

    for turn in _union(_turns_of(a), _turns_of(b)):
        tw = "session" if turn is None else f"turn {turn}"
        x, y = a.turns.get(turn), b.turns.get(turn)
        if x is not None or y is not None:
            add("turn", {"turn": turn}, tw, x, y)
        steps = _union({k[1]: 0 for k in (*a.steps, *a.text, *a.tool_calls) if k[0] == turn},
                       {k[1]: 0 for k in (*b.steps, *b.text, *b.tool_calls) if k[0] == turn})
        for step in steps:
            key = (turn, step)
            at = {"turn": turn, "step": step}
            sw = tw if step is None else f"{tw} step {step}"
            add("step", at, sw, _step_item(a, key), _step_item(b, key))
            ca, cb = a.tool_calls.get(key, []), b.tool_calls.get(key, [])
            for i in range(max(len(ca), len(cb))):
                x, y = _nth(ca, i), _nth(cb, i)
                name = (x or y or {}).get("tool_name")
                add("tool call", {**at, "tool_call": i + 1}, f"{sw} tool call {i + 1} ({name})",
                    x, y)
        ra, rb = a.requests.get(turn, []), b.requests.get(turn, [])
        for i in range(max(len(ra), len(rb))):
            x, y = _nth(ra, i), _nth(rb, i)
            first = x or y or {}
            step = first.get("step")
            sw = tw if step is None else f"{tw} step {step}"
            add("request", {"turn": turn, "request": i + 1},
                f"{sw} request {i + 1} ({first.get('type')})", x, y)
    for i in range(max(len(a.errors), len(b.errors))):
        add("error", {"error": i + 1}, f"error {i + 1}", _nth(a.errors, i), _nth(b.errors, i))
    return out


def compare_files(a: tuple[str, str], b: tuple[str, str]) -> dict[str, Any]:
    """(file, session id) a against b: wire-diff's result and the aligned rows, as JSON."""
    from ..diff_inputs import load_side

    ta, tb = load_side(f"{a[0]}#{a[1]}", []), load_side(f"{b[0]}#{b[1]}", [])
    if not isinstance(ta, Trace) or not isinstance(tb, Trace):
        raise ValueError("both sides must be recorded sessions")
    # wire-diff's comparison of the traces read once (diff() would read them again)
    notes = [] if ta.protocol == tb.protocol else [
        f"the sessions speak different protocols ({ta.protocol}, {tb.protocol}): they are "
        "compared by what the views share"]
    result = DiffResult(ta.describe(), tb.describe(), compare(ta, tb, Tolerance()), Tolerance(),
                        notes=notes)
    table = rows(ta, tb)
    by_at = {_at_key(r["at"]): r for r in table}
    session_changes = []
    for c in result.changes:
        r = by_at.get(_at_key(c.at))
        if r is None:  # the session's token totals: shown above the rows
            session_changes.append(c.to_dict())
            continue
        if c.kind in ("missing", "extra"):
            r["mark"] = c.kind
        r["changed"].append("tokens" if c.what == "tokens" else c.field)
        r["what"].append(c.what)
    for r in table:
        r["changed"] = list(dict.fromkeys(r["changed"]))
        r["what"] = list(dict.fromkeys(r["what"]))
    out = result.to_dict()
    out["rows_total"] = len(table)
    if len(table) > ROWS_MAX:  # a page stays drawable: the first rows and every changed one
        table = [r for i, r in enumerate(table) if i < ROWS_MAX or r["changed"] or r["mark"]]
    out["rows"] = table
    out["session_changes"] = session_changes
    out["tokens"] = {"a": _tokens({"tokens": ta.tokens}), "b": _tokens({"tokens": tb.tokens})}
    return out
