"""Secrets split across the streamed pieces of one message (docs/design.md, "Redaction").

An agent streams a message in pieces, one frame each (which frames are pieces is the protocols'
own: recorder/protocols/*/streamed.py). A secret can be cut between two pieces, and
each half alone is no secret to any rule. So the loader keeps the rows of the message that is
streaming (it does not write them while the message is open; `open`), and when the message ends
(any other frame from the agent, the end of the stream, or MAX_PIECES / MAX_TEXT) the rules run on
the joined text. When they replace something there, the pieces are cut again from the redacted
joined text: a piece keeps its text outside the secrets, and the placeholder of a secret that
spans pieces is shared out over them (`REDAC`, `TED:0123`, `456789ab`), so that

* no piece holds a byte of the secret,
* the pieces still join to exactly what the rules make of the whole message: the same
  placeholder the complete tool call, its approval and its result get in later frames (the
  replay's pinned model re-serves these pieces, and kimi joins them to the same arguments),
* no piece that had text becomes empty (a model stream drops empty pieces), as long as the
  redacted text has a character for each.

The unredacted text of the open message is held in memory only, like the Redactor's key.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from .classify import Extracted, classify
from .model import COLUMNS
from .protocols.acp import streamed as acp_streamed
from .protocols.wire import streamed as wire_streamed
from .redact import PLACEHOLDER_TEXT_RE, Redactor

MAX_PIECES = 4096  # pieces of one message held back at most (then it is cut there)
MAX_TEXT = 1 << 20  # characters of one message held back at most
_MARKERS = wire_streamed.MARKERS + acp_streamed.MARKERS
_RAW = COLUMNS.index("raw")
_BYTE_LEN = COLUMNS.index("byte_len")
_FROM_EX = tuple((i, c) for i, c in enumerate(COLUMNS)
                 if c in Extracted.__dataclass_fields__ and c != "anomaly")


@dataclass
class Piece:
    row: int  # index in the loader's buffered rows
    path: tuple[str, ...]  # where the piece's text is in the message
    text: str  # as the agent sent it
    redacted: bool  # the frame's own redaction changed its row


def piece_of(obj: Any) -> tuple[str, tuple[str, ...], str] | None:
    """(group, path, text) when obj is a streamed piece of a message (the protocols' own
    `streamed.piece_of`): frames of one group are one message; a group ending in "-start"
    (a tool call) begins a new one. None otherwise."""
    if not isinstance(obj, dict):
        return None
    return wire_streamed.piece_of(obj) or acp_streamed.piece_of(obj)


class StreamJoin:
    """Holds the pieces of the message an agent is streaming; see the module's doc.

    `saw(original, stored, row)` after each frame from the agent has its row (`row`: its index
    in `rows`, the loader's buffered rows, which are rewritten in place); `settle()` before the
    rows are written while a message is open; `open` says whether one is."""

    def __init__(self, redactor: Redactor, rows: Callable[[], list[tuple]],
                 protocol: Callable[[], str | None]):
        self.redactor = redactor
        self._rows = rows
        self._protocol = protocol
        self.group: str | None = None
        self.pieces: list[Piece] = []
        self.size = 0

    @property
    def open(self) -> bool:
        return bool(self.pieces)

    def saw(self, original: bytes, row: int | None) -> None:
        """A frame from the agent (unredacted), stored as the row at `row` (None: no row)."""
        found = None
        if row is not None and any(m in original for m in _MARKERS):
            try:
                found = piece_of(orjson.loads(original))
            except orjson.JSONDecodeError:
                found = None
        if found is None:
            self.settle()
            return
        group, path, text = found
        if group.startswith("tool-start"):
            group = "tool" + group[len("tool-start"):]
            self.settle()  # a new tool call: the previous message (or call) ended
        elif group != self.group:
            self.settle()
        assert row is not None
        self.group = group
        self.pieces.append(Piece(row, path, text, self._rows()[row][_RAW] is not original))
        self.size += len(text)
        if len(self.pieces) >= MAX_PIECES or self.size >= MAX_TEXT:
            self.settle()

    def settle(self) -> None:
        """The open message ends here: its pieces are rewritten when the joined text holds a
        secret that the pieces alone did not show."""
        pieces, self.pieces, self.group, self.size = self.pieces, [], None, 0
        if len(pieces) < 2:
            return
        texts = [p.text for p in pieces]
        red = self.redactor.redact_text("".join(texts))
        if red == "".join(texts):
            return
        # the common case: each secret lies within one piece, whose own redaction replaced it
        # as the message's does
        rows = self._rows()
        if "".join((_text_at(rows[p.row][_RAW], p.path) or "\x00") if p.redacted else p.text
                   for p in pieces) == red:
            return
        cut = split_redacted(texts, self.redactor, red)
        if cut is None:
            return
        protocol = self._protocol()
        for p, new in zip(pieces, cut, strict=True):
            if new == p.text and not p.redacted:
                continue  # the row holds the frame as it came, and that is the piece's cut
            old = rows[p.row]
            raw = _with_text(old[_RAW], p.path, new)
            if raw is None or raw == old[_RAW]:
                continue
            ex = classify(raw, "a2c", protocol, detect=False)
            row = list(old)
            row[_RAW], row[_BYTE_LEN] = raw, len(raw)
            for i, c in _FROM_EX:
                row[i] = getattr(ex, c)
            rows[p.row] = tuple(row)


def split_redacted(texts: list[str], redactor: Redactor,
                   red: str | None = None) -> list[str] | None:
    """The pieces cut again from the redacted joined text (`red`, when the caller has it), or
    None when the rules leave the joined text as it is. Joined, the result is
    `redactor.redact_text("".join(texts))`."""
    joined = "".join(texts)
    if red is None:
        red = redactor.redact_text(joined)
    if red == joined:
        return None
    spans = _replaced(joined, red, redactor)
    # the cuts between pieces, in the joined text and then in the redacted one
    cuts: list[int] = []
    at = 0
    for t in texts[:-1]:
        at += len(t)
        cuts.append(at)
    if spans is None:  # cannot tell where: the pieces share the redacted text out evenly
        n = len(red)
        mapped = [round(c * n / max(1, len(joined))) for c in cuts]
    else:
        mapped = [_map(c, spans) for c in cuts]
    # no piece that had text becomes empty while the redacted text has a character for it
    need = [1 if t else 0 for t in texts]
    n, total = len(texts), len(red)
    q = [0, *mapped, total]  # q[i]: where piece i starts
    for i in range(1, n):
        q[i] = max(q[i], q[i - 1] + need[i - 1])
    for i in range(n - 1, 0, -1):
        q[i] = min(q[i], q[i + 1] - need[i])
    for i in range(1, n):
        q[i] = min(max(q[i], q[i - 1]), total)
    return [red[q[i]:q[i + 1]] for i in range(n)]


def _replaced(joined: str, red: str, redactor: Redactor
              ) -> list[tuple[int, int, int, int]] | None:
    """[(start, end) in joined, (start, end) in red] of each replaced span: red is joined with
    spans replaced by placeholders, each checked against the Redactor's cache (the placeholder of
    exactly that text); None when that cannot be shown."""
    cache = redactor._cache  # secret bytes -> its placeholder, for this recording
    spans: list[tuple[int, int, int, int]] = []
    j = 0  # in joined
    r = 0  # in red
    for m in PLACEHOLDER_TEXT_RE.finditer(red):
        seg = red[r:m.start()]
        if not joined.startswith(seg, j):
            return None
        j += len(seg)
        ph = m.group()
        nxt = PLACEHOLDER_TEXT_RE.search(red, m.end())
        follow = red[m.end():nxt.start() if nxt else len(red)]
        end = -1
        for k in _ends(joined, follow, j, last=nxt is None):
            x = joined[j:k]
            if x == ph or cache.get(x.encode("utf-8", "surrogateescape")) == ph.encode():
                end = k
                break
        if end < 0:
            return None
        spans.append((j, end, m.start(), m.end()))
        j, r = end, m.end()
    if joined[j:] != red[r:]:
        return None
    return spans


def _ends(joined: str, follow: str, j: int, last: bool):
    """Where the text replaced from j may end: where `follow` (the redacted text up to the next
    placeholder) goes on; for the last placeholder, only where it ends the text."""
    if last:
        k = len(joined) - len(follow)
        if k > j and joined.endswith(follow):
            yield k
        return
    k = j + 1
    stop = min(len(joined), j + _MAX_SPAN)
    while k <= stop:
        k = joined.find(follow, k, stop + len(follow)) if follow else k
        if k < 0:
            return
        yield k
        k += 1


_MAX_SPAN = 1 << 17  # characters one replaced span may have (a PEM block is up to 64 KiB)


def _map(c: int, spans: list[tuple[int, int, int, int]]) -> int:
    """Position c of the joined text in the redacted one: shifted past the spans before it,
    and inside a span shared out proportionally over its placeholder."""
    shift = 0
    for a, b, ra, rb in spans:
        if c <= a:
            break
        if c < b:
            return ra + max(1, min(rb - ra - 1, round((c - a) * (rb - ra) / (b - a))))
        shift = rb - b
    return c + shift


def _text_at(raw: bytes, path: tuple[str, ...]) -> str | None:
    """The string at path in raw (a JSON frame), or None."""
    try:
        node: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    for k in path:
        node = node.get(k) if isinstance(node, dict) else None
    return node if isinstance(node, str) else None


def _with_text(raw: bytes, path: tuple[str, ...], text: str) -> bytes | None:
    """raw (a JSON frame) with the string at path replaced by text: in place where its JSON
    spelling occurs once (the frame keeps its other bytes), re-serialised otherwise."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    node = obj
    for k in path[:-1]:
        node = node.get(k) if isinstance(node, dict) else None
    if not isinstance(node, dict) or not (node.get(path[-1]) is None
                                          or isinstance(node.get(path[-1]), str)):
        return None
    old = node.get(path[-1])
    if (old or "") == text:
        return raw
    if isinstance(old, str) and old:
        for ascii_only in (False, True):
            form = json.dumps(old, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
            if raw.count(form) == 1:
                new = json.dumps(text, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
                out = raw.replace(form, new)
                try:
                    if orjson.loads(out) == _set(obj, path, text):
                        return out
                except orjson.JSONDecodeError:
                    pass
    end = raw[len(raw.rstrip()):]
    return orjson.dumps(_set(obj, path, text)) + end


def _set(obj: Any, path: tuple[str, ...], value: str) -> Any:
    if not path:
        return value
    out = dict(obj)
    out[path[0]] = _set(obj[path[0]], path[1:], value)
    return out

