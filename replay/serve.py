"""`wire-replay SESSION --serve`: a stand-in agent for testing a client, with no LLM and no
network.

It reads the client's frames on stdin and walks the recording in order: recorded agent frames go
out on stdout (responses re-addressed to the live request ids), and wherever the recorded agent
waited for the client — for a request (initialize, prompt, cancel, …), for an answer to one of
its requests, or for the end of input — it waits for the live client and checks what it sent
against the recording. Divergences are collected; stdout carries protocol frames only. The walk
is the sans-IO engine's (replay.engine.serve_walk); this runner owns stdin, stdout, the signals
and the clock.

The client ends the session the way clients do: by closing stdin, or by a signal (the vendor's
SDK sends SIGTERM and never closes stdin). SIGTERM, SIGINT and SIGHUP are an ending like EOF, not
a death: what the client wrote before the signal is still read and checked, then the walk stops
(no more frames to a client that has left), the report is written and the exit is the verdict.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import signal
import sys
import threading
import time
from typing import Any

from .engine import actions as A
from .engine import events as E
from .engine.serve_walk import ServeEngine
from .recording import Recording, load
from .result import LiveFrame, ReplayResult
from .settings import ReplayOptions

_EOF = None
# signals that end the session as EOF does (a client's stop, a terminal's ^C or hang-up)
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_STOP_READER = 0  # a byte on the wake pipe that is no signal: the walk is over
_QUIET = object()  # the reader's ending when it was told to stop


class _LeftWhileWriting(Exception):
    """A client's ending signal, raised into a write to a stdout nobody reads any more."""


class _Serve:
    def __init__(self, rec: Recording, opts: ReplayOptions, stdin_fd: int, stdout_fd: int):
        self.rec, self.opts = rec, opts
        self.in_fd, self.out_fd = stdin_fd, stdout_fd
        eof_at = rec.eof_at if rec.eof_at is not None else len(rec.msgs)
        # the recorded client may have ended by a signal instead (or first): the same ending
        eof_at = min([eof_at, *(at for at, _, name in rec.signals
                                if getattr(signal, name, None) in ENDING_SIGNALS)])
        self.engine = ServeEngine(rec, opts, os.getcwd(), eof_at)
        self.inbox: queue.Queue = queue.Queue()
        self.writing = False  # in _emit's write (a signal then ends that write)
        # the reader polls stdin and this pipe: the signal wakeup fd writes the signal's number
        # here, so a signal is seen after every byte the client wrote before sending it
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.frames: list[LiveFrame] = []

    # -- io ------------------------------------------------------------------------------------
    def _read(self) -> None:
        # raw fd reads after poll: a daemon thread blocked in a buffered readline aborts
        # interpreter exit, and a read never blocks while a signal is waiting on the wake pipe
        signal.pthread_sigmask(signal.SIG_BLOCK, ENDING_SIGNALS)  # the main thread's to take
        buf = b""
        ending: Any = _EOF
        poller = select.poll()
        poller.register(self.in_fd, select.POLLIN)
        poller.register(self.wake_r, select.POLLIN)
        try:
            while True:
                ready = {fd for fd, _ in poller.poll()}
                if self.wake_r in ready:
                    woke = os.read(self.wake_r, 64)
                    if not woke or _STOP_READER in woke:
                        ending = _QUIET  # the walk is over: nothing more to tell it
                        return
                    sig = next((n for n in woke if n in ENDING_SIGNALS), None)
                    if sig is not None:
                        # what the client wrote before signalling is all in the pipe by now:
                        # it is read and queued before the ending
                        drain = select.poll()
                        drain.register(self.in_fd, select.POLLIN)
                        while drain.poll(0):
                            chunk = os.read(self.in_fd, 65536)
                            if not chunk:
                                break
                            buf = self._lines(buf + chunk)
                        ending = ("signal", signal.Signals(sig).name)
                        return
                    continue
                chunk = os.read(self.in_fd, 65536)
                if not chunk:
                    return
                buf = self._lines(buf + chunk)
        except OSError:
            pass
        finally:
            if ending is not _QUIET:
                if buf:
                    self.inbox.put((time.monotonic_ns(), buf, False))
                self.inbox.put(ending)

    def _lines(self, buf: bytes) -> bytes:
        """Queue the complete lines of buf; the incomplete rest back."""
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                return buf
            self.inbox.put((time.monotonic_ns(), buf[:nl], True))
            buf = buf[nl + 1:]

    def _emit(self, raw: bytes, newline: bool = True) -> str:
        """Write a frame to the client: ok, left (an ending signal came while writing) or
        broken (nobody reads our stdout)."""
        data = raw + (b"\n" if newline else b"")
        try:  # (not a finally: the handler raises while writing is set, never out of here)
            self.writing = True
            while data:
                n = os.write(self.out_fd, data)
                data = data[n:]
            self.writing = False
        except _LeftWhileWriting:
            # the signal's own item follows what the client wrote before it, through the inbox
            self.writing = False
            return "left"
        except (BrokenPipeError, OSError):
            self.writing = False
            return "broken"
        self.frames.append(LiveFrame("a2c", time.monotonic_ns(), time.time_ns(), raw, newline))
        return "ok"

    def _event(self, item: Any) -> E.Event:
        """A reader item as the engine's event, noted among the frames seen."""
        now = time.monotonic()
        if item is _EOF:
            self.frames.append(LiveFrame("proxy", time.monotonic_ns(), time.time_ns(), b"",
                                         event="client_eof", data={}))
            return E.PeerClosed(now)
        if item[0] == "signal":
            self.frames.append(LiveFrame("proxy", time.monotonic_ns(), time.time_ns(), b"",
                                         event="signal", data={"signal": item[1]}))
            return E.ClientSignal(now, item[1])
        t_ns, raw, nl = item
        self.frames.append(LiveFrame("c2a", t_ns, time.time_ns(), raw, nl))
        return E.PeerFrame(now, t_ns, raw, nl)

    # -- the walk ------------------------------------------------------------------------------
    def run(self) -> ReplayResult:
        t0 = time.monotonic()
        self.reader.start()
        eng = self.engine
        try:
            actions = eng.handle(E.Started(t0, time.monotonic_ns()))
            while actions and not eng.done:
                last = actions[-1]  # the one that waits (Diverge: the engine keeps it)
                if isinstance(last, A.SendFrame):
                    how = self._emit(last.raw, last.newline)
                    actions = eng.handle(E.Written(time.monotonic(), how == "ok", how == "left"))
                elif isinstance(last, A.Sleep):
                    time.sleep(last.seconds)
                    actions = eng.handle(E.Tick(time.monotonic()))
                elif isinstance(last, A.AwaitClient):
                    try:
                        item = self.inbox.get(timeout=max(0.0005, last.deadline - time.monotonic()))
                    except queue.Empty:
                        actions = eng.handle(E.Tick(time.monotonic()))
                    else:
                        actions = eng.handle(self._event(item))
                else:
                    break
        except _LeftWhileWriting:  # a second signal, in the first's handling
            pass
        finally:
            with contextlib.suppress(BlockingIOError):  # full: it has plenty to wake on
                os.write(self.wake_w, bytes([_STOP_READER]))  # (if it has not ended already)
            self.reader.join(5.0)
        eng.end_walk()
        while True:  # whatever is still queued
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                break
            eng.handle(self._event(item))
        eng.leftovers()
        return ReplayResult(self.rec, "serve", [], eng.divs, eng.stopped, None,
                            time.monotonic() - t0, dict(eng.stats), self.frames)


def serve_session(recording: Recording | str | os.PathLike, *, session_id: str | None = None,
                  options: ReplayOptions | None = None, stdin_fd: int | None = None,
                  stdout_fd: int | None = None, hold_signals: bool = False) -> ReplayResult:
    """Act as the recorded agent on stdin/stdout until the recorded session is over.
    hold_signals: leave SIGTERM, SIGINT and SIGHUP ignored afterwards (a command that writes its
    report next: a client may close stdin and then signal, the session being over already)."""
    opts = (options or ReplayOptions()).validate()
    rec = recording if isinstance(recording, Recording) else load(recording, session_id)
    serve = _Serve(rec, opts, stdin_fd if stdin_fd is not None else sys.stdin.fileno(),
                   stdout_fd if stdout_fd is not None else sys.stdout.fileno())
    try:
        with _signals_end_session(serve, hold_signals):
            return serve.run()
    finally:
        # only once the handlers are gone: a signal's byte to a pipe without a reader would
        # print "Exception ignored ... BrokenPipeError" on stderr
        os.close(serve.wake_w)
        if not serve.reader.is_alive():  # (it is not: run() stopped it and waited)
            os.close(serve.wake_r)


def hold_ending_signals() -> None:
    """Block SIGTERM, SIGINT and SIGHUP until serve_session takes them as the client's end: one
    sent while the recording still loads then gets a report too, not a silent death."""
    signal.pthread_sigmask(signal.SIG_BLOCK, ENDING_SIGNALS)


class _signals_end_session:
    """While serving: SIGTERM, SIGINT and SIGHUP write their number to the wake pipe (Python's
    wakeup fd, written by the C handler itself) instead of killing us or raising
    KeyboardInterrupt. Only the main thread can set handlers; elsewhere the defaults stay."""

    def __init__(self, serve: _Serve, hold: bool):
        self.serve, self.hold = serve, hold
        self.old: dict[int, Any] = {}
        self.old_wakeup: int | None = None
        self.old_mask: set | None = None

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self.old_wakeup = signal.set_wakeup_fd(self.serve.wake_w, warn_on_full_buffer=False)
        for sig in ENDING_SIGNALS:
            self.old[sig] = signal.signal(sig, self._noted)
        # one held back by hold_ending_signals() is delivered now, to the handler
        self.old_mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, ENDING_SIGNALS)

    def __exit__(self, *exc: object) -> None:
        for sig, old in self.old.items():
            signal.signal(sig, signal.SIG_IGN if self.hold else old)
        if self.old_wakeup is not None:
            signal.set_wakeup_fd(self.old_wakeup)
        if self.old_mask is not None and not self.hold:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.old_mask)

    def _noted(self, signum: int, frame: object) -> None:
        """The wakeup fd has the signal already: the handler keeps the default action away, and
        ends a write the client will never read (blocked on a full pipe, it would wait for the
        client's SIGKILL)."""
        if self.serve.writing:
            raise _LeftWhileWriting(signal.Signals(signum).name)
