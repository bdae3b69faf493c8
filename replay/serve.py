"""`wire-replay SESSION --serve`: a stand-in agent for testing a client, with no LLM and no
network.

It reads the client's frames on stdin and walks the recording in order: recorded agent frames go
out on stdout (responses re-addressed to the live request ids), and wherever the recorded agent
waited for the client — for a request (initialize, prompt, cancel, …), for an answer to one of
its requests, or for the end of input — it waits for the live client and checks what it sent
against the recording. Divergences are collected; stdout carries protocol frames only.

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
from collections.abc import Callable
from typing import Any, NoReturn

import orjson

from .compare import Divergence, Position
from .driver import LiveFrame, ReplayOptions, ReplayResult
from .labels import describe, field_diff
from .normalize import Normalizer, WorkDirRewrite, environment_values, rerooted_command
from .recording import Msg, Recording, load, parse_msg

_EOF = None
# signals that end the session as EOF does (a client's stop, a terminal's ^C or hang-up)
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_STOP_READER = 0  # a byte on the wake pipe that is no signal: the walk is over
_QUIET = object()  # the reader's ending when it was told to stop


class _Stop(Exception):
    pass


class _LeftWhileWriting(Exception):
    """A client's ending signal, raised into a write to a stdout nobody reads any more."""


def _is_answer(m: Msg) -> bool:
    return m.kind in ("response", "error")


class _Serve:
    def __init__(self, rec: Recording, opts: ReplayOptions, stdin_fd: int, stdout_fd: int):
        self.rec, self.opts = rec, opts
        self.in_fd, self.out_fd = stdin_fd, stdout_fd
        rules = opts.rules(rec.adapter)
        self.rec_norm = Normalizer(rules, environment_values(rec.command, rec.cwd,
                                                             adapter=rec.adapter), rec.adapter)
        # the client under test started us in its work dir (its roots, its paths), and its paths
        # lie where the recorded command's did, relative to it (normalize.rerooted_command)
        self.live_norm = Normalizer(rules, environment_values(
            rerooted_command(rec.command, rec.cwd, os.getcwd()), os.getcwd(),
            adapter=rec.adapter), rec.adapter)
        # an ACP agent names files by absolute path, inside the work dir the client gave it
        self._paths = WorkDirRewrite(rec.cwd, os.getcwd())
        self.inbox: queue.Queue = queue.Queue()
        self.buffer: list[Msg] = []  # live client frames not consumed yet
        self.client_eof = False
        self.ended_by: str | None = None  # the signal that ended the session, if one did
        self.silent = False  # the client has left: nothing more goes to stdout
        self.writing = False  # in _emit's write (a signal then ends that write)
        # the reader polls stdin and this pipe: the signal wakeup fd writes the signal's number
        # here, so a signal is seen after every byte the client wrote before sending it
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.id_map: dict[bytes, Any] = {}  # recorded client request id -> live id
        self.divs: list[Divergence] = []
        self.frames: list[LiveFrame] = []
        self.pos = Position(rec.turn_ids())
        self.stats: dict[str, int] = {"received": 0, "emitted": 0, "answers_checked": 0}
        self.stopped: str | None = None
        self.agent_ids = {r.id_key for r in rec.requests()}  # ids a stray client answer lacks
        self.at = 0  # the index of the recorded frame the walk is at
        self.eof_at = len(rec.msgs)  # where the recorded client ended the session
        self.n_live = 0

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

    def _emit(self, raw: bytes, newline: bool = True) -> None:
        if self.silent:
            return  # the client has gone: nobody reads, and a full pipe would block us
        data = raw + (b"\n" if newline else b"")
        try:  # (not a finally: the handler raises while writing is set, never out of here)
            self.writing = True
            while data:
                n = os.write(self.out_fd, data)
                data = data[n:]
            self.writing = False
        except _LeftWhileWriting:
            # the signal's own item follows what the client wrote before it, through the inbox
            self.writing, self.silent = False, True
            return
        except (BrokenPipeError, OSError):
            self.writing = False
            self.stopped = "the client closed its input (our stdout)"
            raise _Stop from None
        self.frames.append(LiveFrame("a2c", time.monotonic_ns(), time.time_ns(), raw, newline))
        self.stats["emitted"] += 1

    def _pull(self, deadline: float) -> bool:
        """Move one live frame (or EOF) from the reader into the buffer. False on timeout."""
        try:
            item = self.inbox.get(timeout=max(0.0005, deadline - time.monotonic()))
        except queue.Empty:
            return False
        self._absorb(item)
        return True

    def _absorb(self, item) -> None:
        if item is _EOF:
            self.client_eof = True
            self.frames.append(LiveFrame("proxy", time.monotonic_ns(), time.time_ns(), b"",
                                         event="client_eof", data={}))
            return
        if item[0] == "signal":
            self.client_eof, self.ended_by, self.silent = True, item[1], True
            self.frames.append(LiveFrame("proxy", time.monotonic_ns(), time.time_ns(), b"",
                                         event="signal", data={"signal": item[1]}))
            return
        t_ns, raw, nl = item
        m = parse_msg(raw, "c2a", (t_ns - self.t0_ns) / 1e9, nl, self.rec.adapter)
        m.index = self.n_live
        self.n_live += 1
        self.frames.append(LiveFrame("c2a", t_ns, time.time_ns(), raw, nl))
        self.stats["received"] += 1
        self.buffer.append(m)

    def _wait_for(self, pred, what: str, answer: bool = False) -> Msg | None:
        """The first buffered live frame for which pred holds, waiting for more as needed.
        None when the client closed its input first. Raises _Stop on timeout.
        answer: waiting for an answer, so a live request or notification that is not the recorded
        client's next one is unexpected here: refused and reported as it comes."""
        deadline = time.monotonic() + self.opts.frame_timeout
        while True:
            if answer:
                self._refuse_unexpected(what)
            for i, m in enumerate(self.buffer):
                if pred(m):
                    return self.buffer.pop(i)
            if self.client_eof:
                return None
            if time.monotonic() >= min(deadline, self.hard_deadline):
                limit = "the whole-run timeout" if time.monotonic() >= self.hard_deadline else \
                    f"{self.opts.frame_timeout:g}s"
                self.divs.append(Divergence("timeout", self.pos.where(),
                                            f"waited {limit} for the client to {what}"))
                self.stopped = "client timeout"
                raise _Stop
            self._pull(min(deadline, self.hard_deadline))

    # -- the walk ------------------------------------------------------------------------------
    def run(self) -> ReplayResult:
        self.t0 = time.monotonic()
        self.t0_ns = time.monotonic_ns()
        self.hard_deadline = self.t0 + self.opts.timeout
        self.reader.start()
        rec = self.rec
        answer_of = {a: r for r, a in rec.answers.items()}  # answer index -> request index
        eof_at = rec.eof_at if rec.eof_at is not None else len(rec.msgs)
        # the recorded client may have ended by a signal instead (or first): the same ending
        eof_at = min([eof_at, *(at for at, _, name in rec.signals
                                if getattr(signal, name, None) in ENDING_SIGNALS)])
        self.eof_at = eof_at
        t_prev = 0.0
        try:
            for m in rec.msgs:
                self.at = m.index
                if m.index == eof_at:
                    self._expect_eof()
                if self.opts.speed > 0 and m.direction == "a2c":
                    time.sleep(max(0.0, (m.t - t_prev) / self.opts.speed))
                t_prev = m.t
                if m.direction == "a2c":
                    self._serve_agent_frame(m)
                elif m.index in answer_of:
                    self._check_answer(rec.msgs[answer_of[m.index]], m)
                elif _is_answer(m):
                    self._check_stray_answer(m)
                else:
                    self._check_client_frame(m)
            if eof_at >= len(rec.msgs):
                self._expect_eof()
        except (_Stop, _LeftWhileWriting):  # the latter: a second signal, in the first's handling
            pass
        finally:
            with contextlib.suppress(BlockingIOError):  # full: it has plenty to wake on
                os.write(self.wake_w, bytes([_STOP_READER]))  # (if it has not ended already)
            self.reader.join(5.0)
        self._leftovers()
        return ReplayResult(rec, "serve", [], self.divs, self.stopped, None,
                            time.monotonic() - self.t0, dict(self.stats), self.frames)

    def _serve_agent_frame(self, m: Msg) -> None:
        self.pos.see(m)
        if _is_answer(m) and m.id_key in self.rec.client_requests:
            if m.id_key not in self.id_map:
                return  # the client never sent that request; already reported
            obj = dict(m.obj)
            obj["id"] = self.id_map[m.id_key]
            self._emit(self._paths(orjson.dumps(obj)), m.newline)
        else:
            self._emit(self._paths(m.raw), m.newline)

    def _check_client_frame(self, m: Msg) -> None:
        label = describe(m)
        live = self._wait_for(lambda x: not _is_answer(x), f"send {label}")
        if live is None:
            self._closed_early(f"{self._ended()} instead of sending {label}")
        if m.kind == "request" and live.kind == "request" and m.method == live.method \
                and m.id_key is not None:
            self.id_map[m.id_key] = live.rpc_id
        exp, got = self._client_view(m, self.rec_norm), self._client_view(live, self.live_norm)
        if exp != got:
            if (m.kind, m.method) != (live.kind, live.method):
                self.divs.append(Divergence("client", self.pos.where(),
                                            f"expected the client to send {label}, got "
                                            f"{describe(live)}", exp, got))
                if live.kind == "request":
                    self._refuse(live)
                    if m.id_key is not None:
                        self.id_map.pop(m.id_key, None)
                    return self._check_client_frame(m)
            else:
                self.divs.append(Divergence("client", self.pos.where(),
                                            f"expected the client to send {label}, got "
                                            f"{describe(live)}", exp, got, field_diff(exp, got)))

    def _refuse_unexpected(self, what: str) -> None:
        """Live requests and notifications sent while the recording waits for an answer, other
        than the recorded client's next one (that one may only have overtaken the answer): e.g. a
        `cancel` where the recorded client answered. A request gets -32000 now, so the client is
        not left waiting for a reply that the walk would never give."""
        nxt = next((m for m in self.rec.msgs[self.at + 1:self.eof_at]
                    if m.direction == "c2a" and not _is_answer(m)), None)
        for x in [x for x in self.buffer if not _is_answer(x)]:
            if nxt is not None and (x.kind, x.method) == (nxt.kind, nxt.method):
                continue
            self.buffer.remove(x)
            self.divs.append(Divergence("client", self.pos.where(),
                                        f"the client sent {describe(x)} while the recorded "
                                        f"client was to {what}; the recording has none here"))
            if x.kind == "request":
                self._refuse(x)

    def _refuse(self, live: Msg) -> None:
        """A request the recording cannot answer gets an error, so the client does not hang."""
        self._emit(orjson.dumps({"jsonrpc": "2.0", "id": live.rpc_id, "error": {
            "code": -32000, "message": "wire-replay --serve: this request is not in the recording",
            "data": None}}))

    def _client_view(self, m: Msg, norm: Normalizer) -> Any:
        v = norm.value(m)
        if isinstance(v, dict) and "method" in v:
            return {k: x for k, x in v.items() if k != "id"}
        return v

    def _check_answer(self, req: Msg, ans: Msg) -> None:
        what = f"answer {describe(req)}"
        live = self._wait_for(lambda x: _is_answer(x) and x.id_key == req.id_key, what,
                              answer=True)
        if live is None:
            self._closed_early(f"{self._ended()} without answering {describe(req)}")
        self._compare(ans, live, lambda exp, got: f"the client answered {describe(req)} with "
                      f"{_short_answer(got)}, recorded {_short_answer(exp)}")

    def _check_stray_answer(self, m: Msg) -> None:
        """A response the recorded client sent to no request of the agent's (an id the agent
        never used): the live client is expected to do the same, and is not kept waiting for
        something else meanwhile."""
        live = self._wait_for(
            lambda x: _is_answer(x) and (x.id_key == m.id_key or x.id_key not in self.agent_ids),
            f"send {describe(m)}, to no request (as the recorded client did)", answer=True)
        if live is None:
            self._closed_early(f"{self._ended()} instead of sending {describe(m)}, to no request")
        self._compare(m, live, lambda exp, got: f"the client sent {describe(live)} to no "
                      f"request, recorded {describe(m)}")

    def _ended(self) -> str:
        return "the client closed its input" if self.ended_by is None else \
            f"the client ended the session ({self.ended_by})"

    def _closed_early(self, message: str) -> NoReturn:
        self.divs.append(Divergence("client", self.pos.where(), message))
        self.stopped = "client closed its input early" if self.ended_by is None else \
            f"client ended the session early ({self.ended_by})"
        raise _Stop

    def _compare(self, recorded: Msg, live: Msg, say: Callable[[Any, Any], str]) -> None:
        """The live client's answer against the recorded one (ids aside): a divergence if not."""
        self.stats["answers_checked"] += 1
        exp = self._answer_view(recorded, self.rec_norm)
        got = self._answer_view(live, self.live_norm)
        if exp != got:
            self.divs.append(Divergence("client", self.pos.where(), say(exp, got), exp, got,
                                        field_diff(exp, got)))

    def _answer_view(self, m: Msg, norm: Normalizer) -> Any:
        v = norm.value(m)
        return {k: x for k, x in v.items() if k != "id"} if isinstance(v, dict) else v

    def _expect_eof(self) -> None:
        deadline = time.monotonic() + self.opts.frame_timeout
        while not self.client_eof:
            extra = [x for x in self.buffer if x.kind == "request"]
            for x in extra:  # requests past the end of the recording: refuse and report
                self.buffer.remove(x)
                self.divs.append(Divergence("client", self.pos.where(),
                                            f"the client sent {describe(x)}, which the recorded "
                                            f"client did not send"))
                self._refuse(x)
            if time.monotonic() >= min(deadline, self.hard_deadline):
                how = "close its input" if self.rec.eof_at is not None else \
                    "end the session (close its input or send SIGTERM)"
                self.divs.append(Divergence("timeout", self.pos.where(),
                                            f"waited {self.opts.frame_timeout:g}s for the client "
                                            f"to {how}, as the recorded client did"))
                self.stopped = "client timeout"
                raise _Stop
            self._pull(min(deadline, self.hard_deadline))

    def _leftovers(self) -> None:
        while True:  # whatever is still queued
            try:
                self._absorb(self.inbox.get_nowait())
            except queue.Empty:
                break
        for x in self.buffer:
            if _is_answer(x):
                req = next((r for r in self.rec.requests() if r.id_key == x.id_key), None)
                what = f"an answer to {describe(req)}, which the recorded client left " \
                       f"unanswered" if req is not None else f"{describe(x)}, to no request"
                self.divs.append(Divergence("client", "", f"the client sent {what}"))
            elif not self.stopped:
                self.divs.append(Divergence("client", "", f"the client sent {describe(x)}, which "
                                                          f"the recorded client did not send"))


def _short_answer(v: Any) -> str:
    if isinstance(v, dict):
        r = v.get("result")
        if isinstance(r, dict):
            for k in ("response", "action"):
                if k in r:
                    return repr(r[k])
        if "error" in v:
            return "an error"
        return describe(parse_msg(orjson.dumps(v), "c2a"))
    return str(v)


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
