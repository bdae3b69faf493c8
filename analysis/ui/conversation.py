"""A session's conversation as items for the web view, made by wire-show's own timeline.

The terminal timeline (`analysis.show.Timeline` and the protocol adapters' renderers) already
knows every protocol: prompts, text, thinking, tool calls with arguments and results, approvals,
questions, hooks, client requests with the answers and waits, subagents indented, cancels. Here
it is fed the same frames and each line it returns becomes an item that remembers the frame
(`seq`) and time that made it, so the page can open the frames behind any item. Rich markup is
turned into (text, style) segments; the page puts them in the DOM as text, never as HTML.
Streamed text, thinking and user text are kept whole (newlines included) instead of shortened.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.errors import MarkupError
from rich.text import Text

from wire_recorder.recorder.model import Frame

from ..show import Timeline

# wide enough that arguments and results are shown whole in all but pathological cases (the
# frame inspector has the exact bytes)
WIDTH = 4000
_MARK = "\x00"  # lines from recordings have control characters made visible: never this one


def segments(markup: str) -> list[list[str]]:
    """Rich markup to [[text, style], ...] (style: rich's style words, '' for plain)."""
    try:
        text = Text.from_markup(markup)
    except MarkupError:
        return [[markup, ""]]
    plain = text.plain
    if not text.spans:
        return [[plain, ""]]
    cuts = sorted({0, len(plain), *(s.start for s in text.spans), *(s.end for s in text.spans)})
    out: list[list[str]] = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        if a >= b:
            continue
        style = " ".join(str(s.style) for s in text.spans if s.start <= a and s.end >= b)
        if out and out[-1][1] == style:
            out[-1][0] += plain[a:b]
        else:
            out.append([plain[a:b], style])
    return out


class Conversation(Timeline):
    """A Timeline whose lines become items: {"s": seq, "t": ms since the start, "k": kind,
    "i": indent, "g": segments} or, for streamed text, {"k": "text"|"think"|"user", "x": text}."""

    def __init__(self, start_ns: int | None, protocol: str | None):
        super().__init__(width=WIDTH, show_text=True, start_ns=start_ns, protocol=protocol)
        self.items: list[dict[str, Any]] = []
        self._held: list[dict[str, Any]] = []  # text items waiting for their place in the lines
        self._frame: Frame | None = None
        self._text_seq: int | None = None
        self._text_t: float = 0.0
        self._gathered = False
        # a frame that showed nothing yet (a tool call waiting for its streamed arguments): the
        # first line shown later is its own
        self._pending: Frame | None = None

    def stamp(self, f: Frame) -> str:
        if self.start_ns is None:
            self.start_ns = f.mono_ns
        return ""

    def _t(self, f: Frame | None) -> float:
        if f is None or f.mono_ns is None or self.start_ns is None:
            return 0.0
        return round((f.mono_ns - self.start_ns) / 1e6, 3)

    def gather(self, kind: str, piece: str) -> list[str]:
        out = self.flush_text() if self._text_kind not in (None, kind) else []
        if not self._text and self._frame is not None:
            self._text_seq, self._text_t = self._frame.seq, self._t(self._frame)
        self._text_kind = kind
        self._text.append(piece)
        self._gathered = True
        return out

    def flush_text(self) -> list[str]:
        if not self._text:
            return []
        text, kind = "".join(self._text), self._text_kind or "text"
        self._text, self._text_kind = [], None
        self._held.append({"s": self._text_seq, "t": self._text_t, "k": kind, "x": text})
        return [f"{_MARK}{len(self._held) - 1}"]

    def _take(self, lines: list[str], f: Frame | None) -> None:
        for line in lines:
            if line.startswith(_MARK):
                self.items.append(self._held[int(line[1:])])
                continue
            body = line.lstrip(" ")
            indent = (len(line) - len(body)) // 2
            src, self._pending = (self._pending or f), None
            self.items.append({"s": src.seq if src else None, "t": self._t(src) if src else None,
                               "k": "line",
                               "i": indent, "g": segments(body)})
        if not self._text:
            self._held.clear()

    def add(self, f: Frame) -> None:
        self._frame = f
        self._gathered = False
        lines = self.feed(f)
        own = [line for line in lines if not line.startswith(_MARK)]
        if not own and not self._gathered and self._pending is None \
                and f.direction in ("c2a", "a2c"):
            self._pending = f
        self._take(lines, f)

    def finish(self) -> None:
        self._take(self.flush(), self._frame)
        self._take(self.summary(), None)

    def pause(self) -> None:
        """A live session went quiet: show the streamed text so far."""
        self._take(self.flush(), self._frame)


def conversation(session: dict, frames: Iterable[Frame]) -> list[dict[str, Any]]:
    conv = Conversation(session.get("mono_start_ns"), session.get("protocol"))
    for f in frames:
        conv.add(f)
    conv.finish()
    return conv.items
