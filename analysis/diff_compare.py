"""Two traces (analysis/diff_trace.py) aligned by turn, step and order within them, and what
differs: model text, tool calls and their arguments and results, answers to requests, errors,
tokens and (when a tolerance is given) timings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .diff_trace import TOKEN_FIELDS, Key, Trace


@dataclass(frozen=True)
class Tolerance:
    """How far tokens and timings may differ before it counts. time_ms / time_ratio: a timing
    differs when both are exceeded (None: timings are not compared: two runs of one scenario
    never take the same time); tokens: a count differs by more than this fraction."""

    time_ms: float | None = None
    time_ratio: float = 0.0
    tokens: float = 0.0


@dataclass
class Change:
    where: str          # "turn 1 step 2 tool call 1 (Shell)"
    what: str           # model text, tool result, answer, ...
    field: str          # the compared field
    a: Any = None
    b: Any = None
    kind: str = "changed"  # changed | missing (only in A) | extra (only in B)
    at: dict[str, Any] = dataclasses.field(default_factory=dict)  # turn, step, tool_call, request, error

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "where": self.where, "what": self.what, "field": self.field,
                "at": self.at, "a": self.a, "b": self.b}


# (field, what it is called in the report) per item; timings and tokens are compared apart
TURN_FIELDS = (("user_input", "prompt"), ("status", "turn status"),
               ("stop_reason", "stop reason"), ("error_code", "error"),
               ("error_message", "error"))
TOOL_FIELDS = (("tool_name", "tool"), ("arguments", "tool arguments"),
               ("status", "tool result"), ("is_error", "tool result"),
               ("output", "tool result"), ("message", "tool result"),
               ("subagent_tool_calls", "subagent"))
# (approvals and external tools' answers are compared with the requests that asked them)
REQUEST_FIELDS = (("type", "request"), ("subject", "request"), ("tool_name", "request"),
                  ("outcome", "answer"), ("answer", "answer"), ("resolved_by", "answer"))
ERROR_FIELDS = (("source", "error"), ("code", "error"), ("related", "error"),
                ("message", "error"))


def _where(turn: int | None, step: int | None = None, extra: str = "") -> str:
    parts = ["session" if turn is None else f"turn {turn}"]
    if step is not None:
        parts.append(f"step {step}")
    if extra:
        parts.append(extra)
    return " ".join(parts)


class _Diff:
    def __init__(self, a: Trace, b: Trace, tol: Tolerance):
        self.a, self.b, self.tol = a, b, tol
        self.changes: list[Change] = []

    def fields(self, where: str, at: dict, x: dict, y: dict,
               fields: tuple[tuple[str, str], ...]) -> None:
        for name, what in fields:
            if x.get(name) != y.get(name):
                self.changes.append(Change(where, what, name, x.get(name), y.get(name), at=at))

    def presence(self, where: str, at: dict, what: str, x: Any, y: Any) -> bool:
        """True when both sides have the item; else the missing or extra one is noted."""
        if x is not None and y is not None:
            return True
        if x is not None:
            self.changes.append(Change(where, what, what, x, None, "missing", at))
        elif y is not None:
            self.changes.append(Change(where, what, what, None, y, "extra", at))
        return False

    def tokens(self, where: str, at: dict, x: dict, y: dict) -> None:
        for k in TOKEN_FIELDS:
            va, vb = x.get(k, 0), y.get(k, 0)
            if va != vb and abs(va - vb) > self.tol.tokens * max(abs(va), abs(vb)):
                self.changes.append(Change(where, "tokens", k, va, vb, at=at))

    def timing(self, where: str, at: dict, name: str, va: float | None,
               vb: float | None) -> None:
        t = self.tol
        if t.time_ms is None or va is None or vb is None:
            return
        d = abs(va - vb)
        if d > t.time_ms and d > t.time_ratio * max(abs(va), abs(vb)):
            self.changes.append(Change(where, "timing", name, round(va, 1), round(vb, 1), at=at))

    def run(self) -> list[Change]:
        a, b = self.a, self.b
        # (the exit status is compared through `errors`: an exit the client asked for, by a
        # signal or 128 + its number, is none, and its timing races with the agent's own exit)
        for turn in _union(_turns_of(a), _turns_of(b)):
            self.turn(turn)
        self.errors()
        self.tokens("session", {}, a.tokens, b.tokens)
        return self.changes

    def turn(self, turn: int | None) -> None:
        a, b = self.a, self.b
        at = {"turn": turn}
        where = _where(turn)
        x, y = a.turns.get(turn), b.turns.get(turn)
        if x is not None or y is not None:  # (MCP calls and requests belong to no turn)
            if not self.presence(where, at, "turn", _brief_turn(x), _brief_turn(y)):
                return
            assert x is not None and y is not None
            self.fields(where, at, x, y, TURN_FIELDS)
        steps = _union({k[1]: 0 for k in (*a.steps, *a.text, *a.tool_calls) if k[0] == turn},
                       {k[1]: 0 for k in (*b.steps, *b.text, *b.tool_calls) if k[0] == turn})
        for step in steps:
            self.step((turn, step))
        self.turn_requests(turn)
        if x is not None and y is not None:
            self.timing(where, at, "duration_ms", x["duration_ms"], y["duration_ms"])

    def step(self, key: Key) -> None:
        a, b = self.a, self.b
        turn, step = key
        at = {"turn": turn, "step": step}
        where = _where(turn, step)
        sa = key in a.steps or key in a.text or key in a.tool_calls
        sb = key in b.steps or key in b.text or key in b.tool_calls
        if step is not None and not self.presence(where, at, "step",
                                                  _brief_step(a, key) if sa else None,
                                                  _brief_step(b, key) if sb else None):
            return
        ta, tb = a.text.get(key, {}), b.text.get(key, {})
        for kind, what in (("text", "model text"), ("thinking", "model thinking")):
            if ta.get(kind, "") != tb.get(kind, ""):
                self.changes.append(Change(where, what, kind, ta.get(kind), tb.get(kind), at=at))
        xa, xb = a.steps.get(key), b.steps.get(key)
        if xa is not None and xb is not None:
            self.tokens(where, at, xa["tokens"], xb["tokens"])
            self.timing(where, at, "duration_ms", xa["duration_ms"], xb["duration_ms"])
        ca, cb = a.tool_calls.get(key, []), b.tool_calls.get(key, [])
        for i in range(max(len(ca), len(cb))):
            x = ca[i] if i < len(ca) else None
            y = cb[i] if i < len(cb) else None
            name = (x or y or {}).get("tool_name")
            w = _where(turn, step, f"tool call {i + 1} ({name})")
            at_i = {**at, "tool_call": i + 1}
            if self.presence(w, at_i, "tool call", _brief_call(x), _brief_call(y)):
                assert x is not None and y is not None
                self.fields(w, at_i, x, y, TOOL_FIELDS)
                self.timing(w, at_i, "duration_ms", x["duration_ms"], y["duration_ms"])

    def turn_requests(self, turn: int | None) -> None:
        ra, rb = self.a.requests.get(turn, []), self.b.requests.get(turn, [])
        for i in range(max(len(ra), len(rb))):
            x = ra[i] if i < len(ra) else None
            y = rb[i] if i < len(rb) else None
            first = x or y or {}
            w = _where(turn, first.get("step"), f"request {i + 1} ({first.get('type')})")
            at = {"turn": turn, "request": i + 1}
            if self.presence(w, at, "request", _brief_request(x), _brief_request(y)):
                assert x is not None and y is not None
                self.fields(w, at, x, y, REQUEST_FIELDS)
                self.timing(w, at, "wait_ms", x["wait_ms"], y["wait_ms"])

    def errors(self) -> None:
        ea, eb = self.a.errors, self.b.errors
        for i in range(max(len(ea), len(eb))):
            x = ea[i] if i < len(ea) else None
            y = eb[i] if i < len(eb) else None
            w = f"error {i + 1}"
            at = {"error": i + 1}
            if self.presence(w, at, "error", x, y):
                assert x is not None and y is not None
                self.fields(w, at, x, y, ERROR_FIELDS)


def _turns_of(t: Trace) -> dict:
    keys = [*t.turns, *t.requests, *(k[0] for k in (*t.steps, *t.text, *t.tool_calls))]
    return dict.fromkeys(keys, 0)


def _union(x: dict, y: dict) -> list:
    keys = list(dict.fromkeys([*x, *y]))
    return sorted(keys, key=lambda k: (k is None, -1 if k is None else k))


def _brief_turn(t: dict | None) -> Any:
    return None if t is None else {"user_input": t["user_input"], "status": t["status"]}


def _brief_step(t: Trace, key: Key) -> Any:
    calls = [c["tool_name"] for c in t.tool_calls.get(key, [])]
    return {"text": t.text.get(key, {}).get("text"), "tool_calls": calls}


def _brief_call(c: dict | None) -> Any:
    return None if c is None else {"tool_name": c["tool_name"], "arguments": c["arguments"],
                                   "status": c["status"]}


def _brief_request(r: dict | None) -> Any:
    return None if r is None else {"type": r["type"], "subject": r["subject"],
                                   "outcome": r["outcome"]}


def compare(a: Trace, b: Trace, tol: Tolerance = Tolerance()) -> list[Change]:
    """What differs between a and b, in the order of the sessions (turn by turn)."""
    return _Diff(a, b, tol).run()
