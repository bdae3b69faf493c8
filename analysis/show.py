"""`wire-show`: a session as a timeline in the terminal, for Wire, ACP and MCP sessions.

The timeline is built by a small state machine fed one frame at a time, so the same code prints a
finished recording and follows a live one. A session being recorded is locked by its loader
process, so `--follow` reads the spool the proxy appends to (`<db>.<session>.spool`), re-using
the loader's own frame splitting (`recorder.loader.Ingest`), and polls it every 0.2 s until the
proxy writes its end marker or the spool is removed.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import orjson

from wire_recorder.recorder import protocols
from wire_recorder.recorder.errors import UserError
from wire_recorder.recorder.model import Frame
from wire_recorder.recorder.protocols.render import Renderer, RpcRenderer, Totals, esc, short

__all__ = ["Timeline", "Totals", "follow", "header", "show_frames"]

POLL_S = 0.2
# frames a timeline shows at most (the first ones); the rest are counted and said to be left out
SHOW_MAX = 20_000


def left_out(shown: int, total: int) -> str:
    """The line that ends a timeline cut at SHOW_MAX frames."""
    return (f"[yellow]… {total - shown:,} more frames left out: wire-show shows the first "
            f"{shown:,} of {total:,} (wire-ui pages them all; wire-query reads any of them)[/]")


@dataclass
class Timeline:
    """Turns frames into timeline lines (rich markup). feed() returns the lines a frame adds.

    What no protocol owns is shown here: proxy events, stderr, invalid frames, anomalies, and
    streamed text gathered into lines. Every other frame goes to the renderer of the session's
    protocol adapter (`Adapter.timeline`), which may change while a live session's protocol is
    still being detected."""

    width: int = 100
    show_text: bool = True
    start_ns: int | None = None
    protocol: str | None = None
    totals: Totals = field(default_factory=Totals)
    _text: list[str] = field(default_factory=list)
    _text_kind: str | None = None
    _text_len: int = 0
    _renderers: dict = field(default_factory=dict)  # adapter name -> its renderer
    _client_signals: set = field(default_factory=set)  # signals the client sent through the proxy

    # -- what a renderer gets (recorder/protocols/render.py: TimelineContext) ---------------------
    def stamp(self, f: Frame) -> str:
        if self.start_ns is None:
            self.start_ns = f.mono_ns
        return f"[dim]{(f.mono_ns - self.start_ns) / 1e9:9.3f}s[/]"

    def gather(self, kind: str, piece: str) -> list[str]:
        out = self.flush_text() if self._text_kind not in (None, kind) else []
        self._text_kind = kind
        # a line shows `width` characters: past a few times that, pieces are counted, not kept
        # (a stream of 10^7 pieces stays a few KB)
        if self._text_len <= 8 * self.width + 64:
            self._text.append(piece)
            self._text_len += len(piece)
        elif self._text[-1] != "…":
            self._text.append("…")
        return out

    def flush_text(self) -> list[str]:
        if not self._text:
            return []
        text = "".join(self._text)
        kind = self._text_kind
        self._text, self._text_kind, self._text_len = [], None, 0
        if not self.show_text:
            return []
        label = {"think": "[magenta]thinking[/]", "user": "[cyan]user[/]"}.get(kind or "", "[white]text[/]")
        return [f"{' ' * 11}      {label} {esc(short(text, self.width))}"]

    # -- the generic part ------------------------------------------------------------------------
    @property
    def renderer(self) -> Renderer:
        # a session no adapter claimed is shown as plain JSON-RPC (its frames were classified
        # so); only sessions stored before the protocol column are read as Wire
        adapter = (protocols.GENERIC if self.protocol == protocols.GENERIC.name
                   else protocols.for_session(self.protocol))
        r = self._renderers.get(adapter.name)
        if r is None:
            r = self._renderers[adapter.name] = adapter.timeline(self) or RpcRenderer(self, adapter)
        return r

    def flush(self) -> list[str]:
        return self.renderer.flush() + self.flush_text()

    def summary(self) -> list[str]:
        return self.renderer.summary()

    def feed(self, f: Frame) -> list[str]:
        out = self._feed(f)
        if f.anomaly:
            self.totals.anomalies += 1
            out.append(f"{self.stamp(f)} [red]anomaly ({esc(f.direction)} {esc(f.method or f.kind)}): "
                       f"{esc(f.anomaly)}[/]")
        return out

    def _feed(self, f: Frame) -> list[str]:
        msg = None
        if f.payload is not None:
            try:
                msg = orjson.loads(f.payload)
            except orjson.JSONDecodeError:
                msg = None
        if f.direction in ("c2a", "a2c") and f.kind != "invalid":
            return self.renderer.frame(f, msg)
        out = self.flush()
        t = self.stamp(f)
        p = msg if isinstance(msg, dict) else {}
        if f.direction == "proxy":
            if f.method in ("spawn", "exit", "client_eof", "signal", "proxy_error",
                            "recording_gap", "client_hangup", "spawn_failed"):
                extra, bad = "", False
                if f.method == "exit":
                    code = p.get("exit_status")
                    extra = f" status {esc(code)}" + (f" ({esc(p.get('signal'))})" if p.get("signal") else "")
                    # an end the client asked for (its signal, forwarded) is no error: errors.sql
                    bad = bool(code) and not (p.get("signal") in self._client_signals or any(
                        code == 128 + n for n in map(_signum, self._client_signals)))
                elif f.method == "signal":
                    self._client_signals.add(p.get("signal"))
                elif f.method not in ("spawn", "client_eof", "signal"):
                    bad = True
                    extra = " " + esc(short(p, self.width))
                if bad:
                    self.totals.errors += 1
                out.append(f"{t} [{'red' if bad else 'dim'}]proxy {esc(f.method)}{extra}[/]")
            elif f.method == "llm_response":  # the model leg (wire-proxy --llm)
                from .show_llm import llm_line

                text, failed = llm_line(p)
                out.append(f"{t} [{'yellow' if failed else 'dim'}]{esc(short(text, self.width))}[/]")
            return out
        if f.direction == "stderr":
            text = bytes(f.raw).decode("utf-8", "replace").strip()
            if text:
                out.append(f"{t} [yellow]stderr[/] {esc(short(text, self.width))}")
            return out
        if f.kind == "invalid":
            self.totals.errors += 1
            out.append(f"{t} [red]invalid {esc(f.direction)} frame: {esc(f.parse_error or '')}[/]")
        return out


def _signum(name: object) -> int:
    return {"SIGHUP": 1, "SIGINT": 2, "SIGTERM": 15}.get(name, -1) if isinstance(name, str) else -1


def header(session: dict) -> str:
    cmd = session.get("command")
    if isinstance(cmd, str):
        try:
            cmd = " ".join(orjson.loads(cmd))
        except (orjson.JSONDecodeError, TypeError):
            pass
    from wire_recorder.recorder.sessions import label

    return (f"[bold]session {esc(label(session))}[/] "
            f"started {esc(session.get('started_at'))} ({esc(session.get('source') or '?')}, "
            f"protocol {esc(session.get('protocol') or '?')} {esc(session.get('protocol_version') or '')})"
            + (f"\n[dim]{esc(short(cmd, 120))}[/]" if cmd else ""))


def show_frames(session: dict, frames: Iterable[Frame], emit: Callable[[str], None],
                width: int = 100, show_text: bool = True) -> Timeline:
    tl = Timeline(width=width, show_text=show_text, start_ns=session.get("mono_start_ns"),
                  protocol=session.get("protocol"))
    from .conformance import summary_line

    frames = list(frames)
    emit(header(session))
    emit(esc(summary_line(session, frames)))
    for f in frames:
        for line in tl.feed(f):
            emit(line)
    for line in tl.flush() + tl.summary():
        emit(line)
    return tl


# -- following a live recording -----------------------------------------------------------------
def find_spools(db: str, session: str | None) -> list[str]:
    """The spools of sessions being recorded into db, oldest first; with `session`, those whose
    session it names (name or id, exactly, else the start of either; a name used again names
    the newest run last)."""
    spools = sorted(glob.glob(glob.escape(db) + ".*.spool"), key=os.path.getmtime)
    if not session:
        return spools
    metas = []
    for path in spools:
        sid = path[len(db) + 1:-len(".spool")]
        metas.append((path, sid, _spool_name(path)))
    exact = [p for p, sid, name in metas if session in (sid, name)]
    return exact or [p for p, sid, name in metas
                     if sid.startswith(session) or (name or "").startswith(session)]


def _spool_name(path: str) -> str | None:
    from wire_recorder.recorder.spool import SpoolError, SpoolReader

    try:
        reader = SpoolReader(path)
    except (OSError, SpoolError, ValueError):
        return None
    try:
        name = reader.meta.get("name")
        return name if isinstance(name, str) else None
    finally:
        reader.close()


def follow(db: str, session: str | None, emit: Callable[[str], None], width: int = 100,
           show_text: bool = True, wait_s: float = 0.0, stop: Callable[[], bool] | None = None) -> str:
    """Tail a session being recorded. Returns how it ended: 'ended', 'spool removed', or
    'not live' (no spool: the caller shows the finished DB instead)."""
    from wire_recorder.recorder.loader import Ingest
    from wire_recorder.recorder.spool import SpoolError, SpoolReader

    deadline = time.monotonic() + wait_s
    spools = find_spools(db, session)
    while not spools and time.monotonic() < deadline:  # the recording may not have begun yet
        time.sleep(POLL_S)
        spools = find_spools(db, session)
    if not spools:
        return "not live"
    path = spools[-1]
    try:
        reader = SpoolReader(path)
    except (OSError, SpoolError) as e:
        raise UserError(f"cannot follow {path}: {e}") from None
    meta = reader.meta
    ing = Ingest(None, meta)  # used only to split and classify; it never touches a store here
    tl = Timeline(width=width, show_text=show_text, start_ns=meta.get("mono_start_ns"),
                  protocol=meta.get("protocol"))
    emit(header({"session_id": meta.get("session_id"), "name": meta.get("name"),
                 "started_at": "(live)",
                 "command": orjson.dumps(meta.get("command") or []).decode(),
                 "source": "live spool", "protocol": meta.get("protocol")}))
    how = "ended"
    idle = 0
    try:
        while True:
            records = reader.read_available()
            if records:
                idle = 0
                ing.feed(records)
                tl.protocol = tl.protocol or ing.classifier.protocol  # detected from the frames
                # take the parsed rows straight from the loader's buffer; nothing is written
                new, ing.rows = ing.rows, []
                for r in new:
                    for line in tl.feed(Frame(*r)):
                        emit(line)
                if ing.ended:
                    break
                continue
            idle += 1
            if idle == 3:  # a pause in streamed text: show what came so far
                for line in tl.flush():
                    emit(line)
            if not os.path.exists(path):
                how = "spool removed"
                break
            if stop and stop():
                how = "stopped"
                break
            time.sleep(POLL_S)
    finally:
        reader.close()
    for line in tl.flush() + tl.summary():
        emit(line)
    return how
