"""Compare the live agent→client stream with the recorded one.

The real agent's order is not fully deterministic (wire spec §5: StatusUpdate races with
ToolResult, ApprovalResponse and SubagentEvent; the cancel/steer response with the turn's
StatusUpdate). So each stream is cut into segments at anchors whose position causality fixes
(TurnBegin, StepBegin, responses to initialize/prompt/replay/set_plan_mode); inside a segment the
streamed content (ContentPart, ToolCall, ToolCallPart) keeps its order and everything else is
compared as a multiset (put in a canonical order). The two canonical sequences are then diffed.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from .labels import describe, field_diff, inner_event
from .normalize import Normalizer, canonical
from .recording import Msg
from .streamed_args import join_tool_arguments


@dataclass
class Divergence:
    kind: str  # model | changed | missing | extra | unmatched_request | unused_request |
    #            timeout | agent_exit | exit_code | not_reached | client | stopped
    where: str
    message: str
    expected: Any = None  # normalised recorded frame
    got: Any = None  # normalised live frame
    details: list[str] = field(default_factory=list)
    seg: int = -1  # segment (anchors seen) of the recorded frame, for cutting a stopped replay
    index: int = -1  # the recorded frame's index among the session's messages

    def __post_init__(self) -> None:
        self.message = _distinct(self.message, self.details)

    def headline(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"kind": self.kind, "where": self.where, "message": self.message}
        if self.expected is not None:
            d["expected"] = self.expected
        if self.got is not None:
            d["got"] = self.got
        if self.details:
            d["details"] = self.details
        return d


def _distinct(message: str, details: list[str]) -> str:
    """`message` without a contrast of two identical texts ("expected X, got X": short labels
    that cut two frames alike, or differences only in what both sides mask): the second one
    becomes where they differ."""
    for sep in (", got ", ", recorded "):
        i = message.rfind(sep)
        tail = message[i + len(sep):] if i >= 0 else ""
        j = i - len(tail)  # where the first text would start: after a space, as a whole
        if tail and message[:i].endswith(tail) and (j == 0 or message[j - 1] == " "):
            where = f"in {details[0]}" if details else "beyond what the labels show"
            return f"{message[:i]}{sep}one that differs {where}"
    return message


@dataclass(slots=True)
class Item:
    msg: Msg
    norm: Any
    sig: bytes
    where: str
    anchor: bool
    ordered: bool
    seg: int = 0
    optional: bool = False  # may be missing or extra (the agent's turn was cut short)

    @property
    def label(self) -> str:
        # made only for a divergence's message: an unchanged replay never reads it
        return describe(self.msg, _payload_of(self.msg, self.norm))


class Position:
    """Turn and step, followed along the agent's stream, for "turn 2, step 1" in reports.

    Wire marks both with events (the adapter's turn_begin_types, step_begin_types). Protocols
    without such events count turns by the responses to the adapter's turn requests
    (`turn_ids`: ACP session/prompt); a protocol without turns (MCP) gives no position."""

    def __init__(self, turn_ids: set[bytes] | frozenset = frozenset()) -> None:
        self.turn = 0
        self.step = 0
        self.turn_ids = turn_ids
        self.turns_done = 0
        self.has_turns = True
        self._where_key: tuple[bool, int, int] | None = None
        self._where = ""

    def see(self, m: Msg) -> str:
        a = m.adapter
        if a.turn_begin_types:
            if m.kind == "notification" and m.msg_type in a.turn_begin_types:
                self.turn += 1
                self.step = 0
            elif m.kind == "notification" and m.msg_type in a.step_begin_types:
                n = a.step_number(m.payload)
                self.step = n if n is not None else self.step + 1
            return self.where()
        self.has_turns = bool(m.adapter.turn_methods)
        if m.kind in ("response", "error") and m.id_key in self.turn_ids:
            where = self.where() if self.turn > self.turns_done else ""
            self.turns_done += 1
            return where
        if self.turn == self.turns_done and (m.kind == "request" or
                                             m.msg_type in m.adapter.turn_types):
            self.turn += 1
        return self.where()

    def where(self) -> str:
        # asked of every frame of both streams: the text is made again only when it changes
        key = (self.has_turns, self.turn, self.step)
        if key != self._where_key:
            self._where_key = key
            self._where = self._where_text()
        return self._where

    def _where_text(self) -> str:
        if not self.has_turns:
            return ""
        if self.turn == 0:
            return "before the first turn"
        if self.step == 0:
            return f"turn {self.turn}"
        return f"turn {self.turn}, step {self.step}"


def is_anchor(m: Msg, anchor_ids: set[bytes]) -> bool:
    if m.kind == "notification" and m.msg_type is not None:
        return m.msg_type in m.adapter.anchor_types
    return m.kind in ("response", "error") and m.id_key in anchor_ids


def make_items(msgs: Iterable[Msg], normalizer: Normalizer, anchor_ids: set[bytes],
               shared: dict | None = None, literals: tuple[bytes, ...] = (),
               turn_ids: set[bytes] | frozenset = frozenset(),
               optional: set[int] | frozenset = frozenset()) -> list[Item]:
    """Items of one stream. `shared` caches the normalisation of frames whose bytes occur in both
    streams (most of an unchanged agent's frames): identical bytes normalise alike unless they
    hold one side's environment `literals`, which are never cached."""
    pos = Position(turn_ids)
    out = []
    seg = 0
    for m in msgs:
        hit = shared.get(m.raw) if shared is not None else None
        if hit is None:
            norm = normalizer.value(m)
            hit = (norm, canonical(norm))
            if shared is not None and not _holds_any(m.raw, literals):
                shared[m.raw] = hit
        anchor = is_anchor(m, anchor_ids)
        seg += anchor
        out.append(Item(m, hit[0], hit[1], pos.see(m), anchor,
                        m.kind == "notification" and m.msg_type in m.adapter.ordered_types,
                        seg, m.index in optional))
    # a tool call's arguments are compared as assembled (a path cut across its streamed parts)
    join_tool_arguments(out, normalizer)
    return out


def _holds_any(raw: bytes, literals: tuple[bytes, ...]) -> bool:
    for lit in literals:  # a loop, not any(genexpr): asked of every frame of both streams
        if lit in raw:
            return True
    return False


def cut_short(msgs: Iterable[Msg], adapter, turn_ids: set[bytes] | frozenset) -> set[int]:
    """Indexes of the agent notifications between a client frame of `adapter.cut_short_by` and
    the response that ends its turn (the recorded side; the driver tracks the live side)."""
    out: set[int] = set()
    open_ = False
    for m in msgs:
        if m.direction == "c2a" and m.method in adapter.cut_short_by:
            open_ = True
        elif m.direction == "a2c" and open_:
            if m.kind in ("response", "error") and m.id_key in turn_ids:
                open_ = False
            elif m.kind == "notification":
                out.add(m.index)
    return out


def _payload_of(m: Msg, norm: Any) -> Any:
    if not isinstance(norm, dict) or m.kind == "invalid":
        return None
    if "method" in norm:
        return m.adapter.payload(m.method, norm.get("params"))
    return norm.get("result", norm.get("error"))


def canonical_order(items: list[Item]) -> list[Item]:
    out: list[Item] = []
    seg: list[Item] = []

    def flush() -> None:
        ordered = [i for i in seg if i.ordered]
        rest = sorted((i for i in seg if not i.ordered),
                      key=lambda i: (i.msg.kind, i.msg.msg_type or "", i.sig))
        out.extend(ordered)
        out.extend(rest)
        seg.clear()

    for it in items:
        if it.anchor:
            flush()
            out.append(it)
        else:
            seg.append(it)
    flush()
    return out


def _changed(a: Item, b: Item) -> Divergence:
    details = field_diff(a.norm, b.norm)
    if a.label != b.label:
        message = f"expected {a.label}, got {b.label}"
    else:  # the labels cut both values short alike: say where they differ instead
        where = details[0] if details else "a field"
        message = f"expected {a.label}, got one that differs in {where}"
    return Divergence("changed", a.where, message, a.norm, b.norm, details, a.seg, a.msg.index)


def _pair_key(m: Msg) -> tuple:
    """Frames of one kind and type pair up; a wrapper by the type of the event it carries."""
    inner = inner_event(m.payload) if m.kind == "notification" else None
    return (m.kind, m.method, m.msg_type, inner[0] if inner else None)


def diff_streams(recorded: list[Item], live: list[Item],
                 tolerated: list[Item] | None = None) -> list[Divergence]:
    """Differences in recorded order. [] when the streams agree up to the allowed reordering.
    Optional items missing on one side are no divergence; they go to `tolerated`."""
    a, b = canonical_order(recorded), canonical_order(live)
    sa, sb = [i.sig for i in a], [i.sig for i in b]
    if sa == sb:
        return []
    lo = 0
    while lo < len(sa) and lo < len(sb) and sa[lo] == sb[lo]:
        lo += 1
    hi_a, hi_b = len(sa), len(sb)
    while hi_a > lo and hi_b > lo and sa[hi_a - 1] == sb[hi_b - 1]:
        hi_a -= 1
        hi_b -= 1
    sm = difflib.SequenceMatcher(None, sa[lo:hi_a], sb[lo:hi_b], autojunk=False)
    out: list[Divergence] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        i1, i2, j1, j2 = i1 + lo, i2 + lo, j1 + lo, j2 + lo
        if op == "equal":
            continue
        ra, lb = a[i1:i2], b[j1:j2]
        # pair frames of the same kind and type, so a changed ToolCall is shown against the
        # live ToolCall rather than against whatever sits at the same place
        pairs: dict[int, Item] = {}
        free = list(lb)
        for k, x in enumerate(ra):
            key = _pair_key(x.msg)
            for y in free:
                if _pair_key(y.msg) == key:
                    pairs[k] = y
                    free.remove(y)
                    break
        # an optional frame without a counterpart of its type was cut short: no divergence
        left_a = []
        for k, x in enumerate(ra):
            if k not in pairs and x.optional:
                if tolerated is not None:
                    tolerated.append(x)
            else:
                left_a.append(k)
        for y in [y for y in free if y.optional]:
            free.remove(y)
            if tolerated is not None:
                tolerated.append(y)
        # what is left pairs up in order: "expected ToolCall …, got ContentPart …"
        for k in left_a:
            if k not in pairs and free:
                pairs[k] = free.pop(0)
        for k in left_a:
            x = ra[k]
            if k in pairs:
                out.append(_changed(x, pairs[k]))
            else:
                out.append(Divergence("missing", x.where, f"expected {x.label}, the agent did not "
                                      f"send it", x.norm, None, seg=x.seg, index=x.msg.index))
        for y in free:
            out.append(Divergence("extra", y.where, f"got {y.label}, which was never recorded",
                                  None, y.norm))
    return out


MODEL_MESSAGE_CHARS = 200


def _error_code(frame: Any) -> Any:
    err = frame.get("error") if isinstance(frame, dict) else None
    return err.get("code") if isinstance(err, dict) else None


def lead_with_model_failure(divs: list[Divergence], live: list[Item], errors: Mapping[int, str],
                            advice: str) -> list[Divergence]:
    """`divs` led by the first one whose live frame is an agent error response with one of the
    adapter's model-error codes (`errors`: code -> meaning) where the recording had no such
    error: it becomes kind "model", its message names the failure and `advice`, and where the
    live error came. An agent whose own model failed differs in everything after that (a
    StepInterrupted, the missing steps), and the model, not these, is what to look at."""
    def failed(d: Divergence) -> bool:
        code = _error_code(d.got) if d.kind in ("changed", "extra") else None
        return isinstance(code, int) and code in errors and _error_code(d.expected) != code

    i = next((i for i, d in enumerate(divs) if failed(d)), None)
    if i is None:
        return divs
    d = divs[i]
    code = _error_code(d.got)
    err = d.got["error"]
    text = err.get("message")
    said = ""
    if isinstance(text, str) and text.strip():
        text = text.strip()
        if len(text) > MODEL_MESSAGE_CHARS:
            text = text[:MODEL_MESSAGE_CHARS] + "…"
        said = f": {orjson.dumps(text).decode()}"
    where = next((it.where for it in live if it.norm is d.got), d.where)
    lead = Divergence("model", where, f"the agent's model failed ({code} {errors[code]}{said}): "
                                      f"{advice}", d.expected, d.got, d.details, d.seg, d.index)
    return [lead, *divs[:i], *divs[i + 1:]]
