"""What a protocol's timeline renderer gets and gives (`wire-show`), and the pieces they share.

`analysis/show.py` owns the timeline: it reads frames one at a time (a finished recording or a
live spool), shows what no protocol owns (proxy events, stderr, invalid frames, anomalies),
gathers streamed text, and hands every other frame to the session's renderer, which an adapter
makes with `Adapter.timeline(ctx)`. A renderer returns lines of rich markup.

This module imports rich: adapters import it inside `timeline()`, so recording never does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from rich.markup import escape as _escape

from ..visible import visible

if TYPE_CHECKING:
    from ..model import Frame
    from .base import Adapter


def clean(text: str) -> str:
    """`text` with every control and bidi character made visible (ESC as ␛), so that a
    recording cannot drive the terminal (recorder/visible.py)."""
    return visible(text)


def esc(value: Any) -> str:
    """A value from a recording, ready to go into rich markup as literal text: `[...]` escaped
    (a recorded `[link=...]` or `[/]` is text, never a tag) and control characters visible."""
    return _escape(clean(value if isinstance(value, str) else str(value)))


def short(text: Any, width: int) -> str:
    """`text` on one line (whitespace runs become one space), cut at `width`; non-strings as
    JSON; control characters visible (`clean`)."""
    if text is None:
        return ""
    if not isinstance(text, str):
        try:
            text = orjson.dumps(text, default=str).decode()
        except orjson.JSONEncodeError:  # nested deeper than orjson goes
            text = repr(text)
    text = clean(" ".join(text.split()))
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "?"
    if ms < 1:
        return f"{ms:.2f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.2f} s"
    return f"{int(ms // 60_000)} min {ms % 60_000 / 1000:.0f} s"


def initialized(t: str, method: str, info: Any, protocol: Any, took: str) -> str:
    """The answer to a handshake: who the agent (or server) is and which protocol it speaks."""
    info = info if isinstance(info, dict) else {}
    return (f"{t} [dim]< {esc(method)}: {esc(info.get('name'))} "
            f"{esc(info.get('version'))}, protocol {esc(protocol)}{took}[/]")


def count(v: Any) -> int:
    """A token count from a recording; what is not a number (a hostile string) counts 0."""
    if isinstance(v, bool):
        return 0
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == v and abs(v) != float("inf"):
        return int(v)
    return 0


@dataclass
class Totals:
    """The counts a session's summary line reports; each protocol fills the ones it has."""

    turns: int = 0
    steps: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    approvals: int = 0
    approval_wait_ms: float = 0.0
    client_requests: int = 0  # requests the agent (MCP: the server) sends the client
    client_wait_ms: float = 0.0
    input_rounds: int = 0  # rounds of asking the client for input inside a request
    input_wait_ms: float = 0.0
    anomalies: int = 0
    input_other: int = 0
    output: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    errors: int = 0

    def add_usage(self, u: dict) -> None:
        self.input_other += count(u.get("input_other"))
        self.output += count(u.get("output"))
        self.cache_read += count(u.get("input_cache_read"))
        self.cache_creation += count(u.get("input_cache_creation"))

    @property
    def total(self) -> int:
        return self.input_other + self.output + self.cache_read + self.cache_creation


class TimelineContext(Protocol):
    """What the timeline offers its renderer."""

    width: int
    show_text: bool
    totals: Totals

    def stamp(self, f: Frame) -> str:
        """The time column of a frame's line (seconds since the session's start)."""
        ...

    def gather(self, kind: str, piece: str) -> list[str]:
        """Add streamed text ("text", "think" or "user") to the current text line; returns the
        finished line of another kind, if any."""
        ...

    def flush_text(self) -> list[str]:
        """The gathered text as a line (none when hidden or empty)."""
        ...


class Renderer:
    """One session's renderer. `frame` gets every parsed client or agent frame (not proxy,
    stderr or invalid ones), `flush` returns lines held back for more frames, `summary` the
    closing lines."""

    def __init__(self, ctx: TimelineContext, adapter: Adapter):
        self.ctx = ctx
        self.adapter = adapter

    @property
    def width(self) -> int:
        return self.ctx.width

    @property
    def totals(self) -> Totals:
        return self.ctx.totals

    def frame(self, f: Frame, msg: Any) -> list[str]:
        raise NotImplementedError

    def flush(self) -> list[str]:
        return []

    def summary(self) -> list[str]:
        s = self.totals
        odd = f", {s.anomalies} anomalies" if s.anomalies else ""
        return [f"[bold]total[/]: {s.client_requests} {self.adapter.agent_role} requests "
                f"(client wait {fmt_ms(s.client_wait_ms)}), {s.errors} errors{odd}"]

    def ended(self, t: str, name: Any, dur: str, failed: bool, detail: Any, indent: str = "",
              always: bool = True) -> str:
        """A tool call's last line, whatever the protocol: ✓ name and time, or ✗ name failed
        after time; then `detail` after a colon (`always=False`: only when there is some)."""
        tail = f": {esc(short(detail, self.width // 2))}" if always or detail else ""
        if failed:
            return f"{t}      {indent}[red]✗ {esc(name)} failed after {dur}{tail}[/]"
        return f"{t}      {indent}[green]✓ {esc(name)}[/] {dur}{tail}"


def pop(reqs: dict, rpc_id: Any) -> Any:
    """The latest open request with this id (a stack per id), or None."""
    stack = reqs.get(rpc_id)
    if not stack:
        return None
    entry = stack.pop()
    if not stack:
        del reqs[rpc_id]
    return entry


class RpcRenderer(Renderer):
    """Plain JSON-RPC: requests, their answers and notifications, each side's requests kept
    apart (ids count separately per direction in ACP and MCP). Per id a stack, so that an id
    reused while pending (an anomaly) gives each answer to the latest request still open, as the
    views do. Protocols override the hooks below; a protocol without a renderer of its own gets
    this one as it is."""

    # client notifications shown bold with their params (a cancel)
    cancel_methods: frozenset[str] = frozenset()
    # agent requests that ask the user to allow something: counted as approvals
    approval_methods: frozenset[str] = frozenset()
    # agent requests shown in yellow (they wait for a person or another model)
    notable_methods: frozenset[str] = frozenset()

    def __init__(self, ctx: TimelineContext, adapter: Adapter):
        super().__init__(ctx, adapter)
        self.client_reqs: dict = {}  # the client's requests, answered by the agent
        self.agent_reqs: dict = {}  # the agent's (server's) requests, answered by the client
        self.calls: dict = {}
        self.turn: dict = {}

    # -- hooks ---------------------------------------------------------------------------------
    def text_piece(self, f: Frame, p: dict) -> tuple[str, str] | None:
        """(kind, text) when the frame carries streamed text, gathered into text lines."""
        return None

    def ask(self, method: str | None, params: Any) -> str:
        """What a request to the client asks, in a few words: the adapter's `labels.ask`, else
        its label for the request (`Adapter.describe`), if it has one."""
        labels = self.adapter.part("labels")
        if labels is not None and hasattr(labels, "ask"):
            return str(labels.ask(method, params))
        return self.adapter.describe("request", method, None, params) or ""

    def answer(self, method: str | None, result: Any) -> str:
        """What the client's answer says, in a few words: the adapter's `labels.answer`, else
        the result's JSON."""
        labels = self.adapter.part("labels")
        if labels is not None and hasattr(labels, "answer"):
            return str(labels.answer(method, result))
        r = result if isinstance(result, dict) else {}
        return "" if not r else orjson.dumps(r).decode()

    def client_request(self, f: Frame, t: str, p: dict) -> list[str]:
        return [f"{t} > {esc(f.method)}" + (f" {esc(short(p, self.width // 2))}" if p else "")]

    def response(self, f: Frame, t: str, p: dict, req: Any, took: str) -> list[str]:
        method = req[0] if req else "?"
        return [f"{t} [dim]< {esc(method)} {esc(short(p, 60))}{took}[/]"]

    def notification(self, f: Frame, t: str, p: dict) -> list[str]:
        return [f"{t}   [dim]{esc(f.method)} {esc(short(p, 60))}[/]"]

    def permission(self, f: Frame, t: str, p: dict) -> list[str]:
        """The line of an approval request (`approval_methods`)."""
        what = short(self.ask(f.method, p), self.width)
        return [f"{t}      [yellow]{esc(f.method)}[/]" + (f" {esc(what)}" if what else "")]

    def permission_answer(self, t: str, p: dict, rp: dict, wait: float) -> list[str]:
        """The line of the client's answer to an approval request."""
        return [f"{t}      approval answered after [bold]{fmt_ms(wait)}[/]"]

    # -- the machinery -------------------------------------------------------------------------
    def frame(self, f: Frame, msg: Any) -> list[str]:
        p = msg if isinstance(msg, dict) else {}
        piece = self.text_piece(f, p)
        if piece is not None:
            return self.ctx.gather(*piece)
        out = self.ctx.flush_text()
        t = self.ctx.stamp(f)
        if f.kind == "request":
            reqs = self.client_reqs if f.direction == "c2a" else self.agent_reqs
            reqs.setdefault(f.rpc_id, []).append((f.method, f.mono_ns, p))
        if f.direction == "c2a":
            if f.kind in ("response", "error"):
                return out + self.client_answer(f, t, p)
            if f.kind == "request":
                return out + self.client_request(f, t, p)
            bold = "bold cyan" if f.method in self.cancel_methods else "dim"
            return out + [f"{t} [{bold}]> {esc(f.method)}[/]"
                          + (f" {esc(short(p, self.width // 2))}" if bold != "dim" else "")]
        if f.kind in ("response", "error"):
            req = pop(self.client_reqs, f.rpc_id)
            method = req[0] if req else "?"
            took = f" after {fmt_ms((f.mono_ns - req[1]) / 1e6)}" if req else ""
            if f.kind == "error":
                self.totals.errors += 1
                return out + [f"{t} [red]< {esc(method)} error {esc(p.get('code'))}: "
                              f"{esc(short(p.get('message'), self.width))}[/]{took}"]
            return out + self.response(f, t, p, req, took)
        if f.kind == "request":
            return out + self.agent_request(f, t, p)
        return out + self.notification(f, t, p)

    def agent_request(self, f: Frame, t: str, p: dict) -> list[str]:
        m = f.method
        if m in self.approval_methods:
            self.totals.approvals += 1
            return self.permission(f, t, p)
        self.totals.client_requests += 1
        what = short(self.ask(m, p), self.width)
        if m in self.notable_methods:
            return [f"{t}      [yellow]{esc(m)}[/]" + (f" {esc(what)}" if what else "")]
        return [f"{t}      [dim]{esc(m)}" + (f" {esc(what)}" if what else "") + "[/]"]

    def client_answer(self, f: Frame, t: str, p: dict) -> list[str]:
        req = pop(self.agent_reqs, f.rpc_id)
        if req is None:
            return [f"{t} [dim]> answer to unknown request {esc(f.rpc_id)}[/]"]
        method, mono, rp = req
        wait = max(f.mono_ns - mono, 0) / 1e6
        if method in self.approval_methods:
            self.totals.approval_wait_ms += wait
        else:
            self.totals.client_wait_ms += wait
        if f.kind == "error":
            return [f"{t}      [red]< client answered {esc(method)} with an error after "
                    f"{fmt_ms(wait)}: {esc(short(p.get('message'), 60))}[/]"]
        if method in self.approval_methods:
            return self.permission_answer(t, p, rp, wait)
        said = short(self.answer(method, p), self.width // 2)
        return [f"{t}      [dim]client answered {esc(method)} after {fmt_ms(wait)}"
                + (f": {esc(said)}" if said else "") + "[/]"]
