"""`--serve`'s walk, sans IO: the replay engine standing in for the recorded agent.

It walks the recording in order: recorded agent frames go out (responses re-addressed to the
live request ids), and wherever the recorded agent waited for the client — for a request, for an
answer to one of its requests, or for the end of input — it waits for the live client and checks
what it sent against the recording. The runner (replay.serve) owns stdin, stdout, the signals
and the clock: it hands the engine the client's frames, its EOF or ending signal, and the time
(engine.events), and carries out what the engine asks (engine.actions): the agent replay's
vocabulary, with the client as the peer.

The walk is a generator (as mitmproxy's layers are): where the original loop blocked, it yields
an action that asks for an outcome, and the engine resumes it with the next event.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, NoReturn

import orjson

from ..compare import Divergence, Position
from ..labels import describe, field_diff
from ..normalize import Normalizer, WorkDirRewrite, environment_values, rerooted_command
from ..recording import Msg, Recording, parse_msg
from ..settings import ReplayOptions
from . import actions as A
from . import events as E

Walk = Generator[A.Action, Any, None]


class _Stop(Exception):
    pass


def _is_answer(m: Msg) -> bool:
    return m.kind in ("response", "error")


class ServeEngine:
    def __init__(self, rec: Recording, opts: ReplayOptions, cwd: str, eof_at: int):
        """cwd: where the client under test started us; eof_at: the index of the recorded
        frame where the recorded client ended the session (EOF, or a signal that ends it)."""
        self.rec, self.opts = rec, opts
        rules = opts.rules(rec.adapter)
        self.rec_norm = Normalizer(rules, environment_values(rec.command, rec.cwd,
                                                             adapter=rec.adapter), rec.adapter)
        # the client under test started us in its work dir (its roots, its paths), and its paths
        # lie where the recorded command's did, relative to it (normalize.rerooted_command)
        self.live_norm = Normalizer(rules, environment_values(
            rerooted_command(rec.command, rec.cwd, cwd), cwd, adapter=rec.adapter), rec.adapter)
        # an ACP agent names files by absolute path, inside the work dir the client gave it
        self._paths = WorkDirRewrite(rec.cwd, cwd)
        self.buffer: list[Msg] = []  # live client frames not consumed yet
        self.client_eof = False
        self.ended_by: str | None = None  # the signal that ended the session, if one did
        self.silent = False  # the client has left: nothing more goes to it
        self.id_map: dict[bytes, Any] = {}  # recorded client request id -> live id
        self.divs: list[Divergence] = []
        self.pos = Position(rec.turn_ids())
        self.stats: dict[str, int] = {"received": 0, "emitted": 0, "answers_checked": 0}
        self.stopped: str | None = None
        self.agent_ids = {r.id_key for r in rec.requests()}  # ids a stray client answer lacks
        self.at = 0  # the index of the recorded frame the walk is at
        self.eof_at = eof_at
        self.n_live = 0
        self.now = 0.0
        self.t0_ns = 0
        self.hard_deadline = float("inf")
        self.done = False
        self._walk: Walk | None = None
        self._out: list[A.Action] = []

    # -- events in, actions out ----------------------------------------------------------------
    def handle(self, event: E.Event) -> list[A.Action]:
        """Take one event; the actions it calls for. The last one is Done, or one that waits
        for an outcome (SendFrame, Sleep, AwaitClient): the next event resumes the walk."""
        self._out = []
        self.now = event.now
        if isinstance(event, E.Started):
            self.t0_ns = event.t_ns
            self.hard_deadline = event.now + self.opts.timeout
            self._walk = self._run()
            self._resume(None)
        elif isinstance(event, E.Written):
            self._resume(event)
        elif isinstance(event, E.PeerFrame | E.PeerClosed | E.ClientSignal):
            self._absorb(event)
            self._resume(None)
        elif isinstance(event, E.Tick):
            self._resume(None)
        else:
            raise TypeError(f"not a serve event: {event!r}")
        out, self._out = self._out, []
        return out

    def _resume(self, value: Any) -> None:
        if self._walk is None or self.done:
            return
        try:
            self._out.append(self._walk.send(value))
        except StopIteration:
            self.done = True
            self._out.append(A.Done())

    def _absorb(self, event: E.Event) -> None:
        if isinstance(event, E.PeerClosed):
            self.client_eof = True
        elif isinstance(event, E.ClientSignal):
            self.client_eof, self.ended_by, self.silent = True, event.name, True
        elif isinstance(event, E.PeerFrame):
            m = parse_msg(event.raw, "c2a", (event.t_ns - self.t0_ns) / 1e9, event.newline,
                          self.rec.adapter)
            m.index = self.n_live
            self.n_live += 1
            self.stats["received"] += 1
            self.buffer.append(m)

    def _diverge(self, d: Divergence) -> None:
        self.divs.append(d)
        self._out.append(A.Diverge(d))

    # -- waiting -------------------------------------------------------------------------------
    def _emit(self, raw: bytes, newline: bool = True) -> Walk:
        if self.silent:
            return  # the client has gone: nobody reads, and a full pipe would block us
        written = yield A.SendFrame(raw, newline)
        if written.left:  # an ending signal came while writing: nothing more goes out
            self.silent = True
        elif not written.ok:
            self.stopped = "the client closed its input (our stdout)"
            raise _Stop
        else:
            self.stats["emitted"] += 1

    def _wait_for(self, pred: Callable[[Msg], bool], what: str,
                  answer: bool = False) -> Generator[A.Action, Any, Msg | None]:
        """The first buffered live frame for which pred holds, waiting for more as needed.
        None when the client closed its input first. Raises _Stop on timeout.
        answer: waiting for an answer, so a live request or notification that is not the recorded
        client's next one is unexpected here: refused and reported as it comes."""
        deadline = self.now + self.opts.frame_timeout
        while True:
            if answer:
                yield from self._refuse_unexpected(what)
            for i, m in enumerate(self.buffer):
                if pred(m):
                    return self.buffer.pop(i)
            if self.client_eof:
                return None
            if self.now >= min(deadline, self.hard_deadline):
                limit = "the whole-run timeout" if self.now >= self.hard_deadline else \
                    f"{self.opts.frame_timeout:g}s"
                self._diverge(Divergence("timeout", self.pos.where(),
                                         f"waited {limit} for the client to {what}"))
                self.stopped = "client timeout"
                raise _Stop
            yield A.AwaitClient(min(deadline, self.hard_deadline))

    # -- the walk ------------------------------------------------------------------------------
    def _run(self) -> Walk:
        rec = self.rec
        answer_of = {a: r for r, a in rec.answers.items()}  # answer index -> request index
        t_prev = 0.0
        try:
            for m in rec.msgs:
                self.at = m.index
                if m.index == self.eof_at:
                    yield from self._expect_eof()
                if self.opts.speed > 0 and m.direction == "a2c":
                    yield A.Sleep(max(0.0, (m.t - t_prev) / self.opts.speed))
                t_prev = m.t
                if m.direction == "a2c":
                    yield from self._serve_agent_frame(m)
                elif m.index in answer_of:
                    yield from self._check_answer(rec.msgs[answer_of[m.index]], m)
                elif _is_answer(m):
                    yield from self._check_stray_answer(m)
                else:
                    yield from self._check_client_frame(m)
            if self.eof_at >= len(rec.msgs):
                yield from self._expect_eof()
        except _Stop:
            pass

    def _serve_agent_frame(self, m: Msg) -> Walk:
        self.pos.see(m)
        if _is_answer(m) and m.id_key in self.rec.client_requests:
            if m.id_key not in self.id_map:
                return  # the client never sent that request; already reported
            obj = dict(m.obj)
            obj["id"] = self.id_map[m.id_key]
            yield from self._emit(self._paths(orjson.dumps(obj)), m.newline)
        else:
            yield from self._emit(self._paths(m.raw), m.newline)

    def _check_client_frame(self, m: Msg) -> Walk:
        label = describe(m)
        live = yield from self._wait_for(lambda x: not _is_answer(x), f"send {label}")
        if live is None:
            self._closed_early(f"{self._ended()} instead of sending {label}")
        if m.kind == "request" and live.kind == "request" and m.method == live.method \
                and m.id_key is not None:
            self.id_map[m.id_key] = live.rpc_id
        exp, got = self._client_view(m, self.rec_norm), self._client_view(live, self.live_norm)
        if exp != got:
            if (m.kind, m.method) != (live.kind, live.method):
                self._diverge(Divergence("client", self.pos.where(),
                                         f"expected the client to send {label}, got "
                                         f"{describe(live)}", exp, got))
                if live.kind == "request":
                    yield from self._refuse(live)
                    if m.id_key is not None:
                        self.id_map.pop(m.id_key, None)
                    yield from self._check_client_frame(m)
                    return
            else:
                self._diverge(Divergence("client", self.pos.where(),
                                         f"expected the client to send {label}, got "
                                         f"{describe(live)}", exp, got, field_diff(exp, got)))

    def _refuse_unexpected(self, what: str) -> Walk:
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
            self._diverge(Divergence("client", self.pos.where(),
                                     f"the client sent {describe(x)} while the recorded "
                                     f"client was to {what}; the recording has none here"))
            if x.kind == "request":
                yield from self._refuse(x)

    def _refuse(self, live: Msg) -> Walk:
        """A request the recording cannot answer gets an error, so the client does not hang."""
        yield from self._emit(orjson.dumps({"jsonrpc": "2.0", "id": live.rpc_id, "error": {
            "code": -32000, "message": "wire-replay --serve: this request is not in the recording",
            "data": None}}))

    def _client_view(self, m: Msg, norm: Normalizer) -> Any:
        v = norm.value(m)
        if isinstance(v, dict) and "method" in v:
            return {k: x for k, x in v.items() if k != "id"}
        return v

    def _check_answer(self, req: Msg, ans: Msg) -> Walk:
        what = f"answer {describe(req)}"
        live = yield from self._wait_for(lambda x: _is_answer(x) and x.id_key == req.id_key,
                                         what, answer=True)
        if live is None:
            self._closed_early(f"{self._ended()} without answering {describe(req)}")
        self._compare(ans, live, lambda exp, got: f"the client answered {describe(req)} with "
                      f"{_short_answer(got)}, recorded {_short_answer(exp)}")

    def _check_stray_answer(self, m: Msg) -> Walk:
        """A response the recorded client sent to no request of the agent's (an id the agent
        never used): the live client is expected to do the same, and is not kept waiting for
        something else meanwhile."""
        live = yield from self._wait_for(
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
        self._diverge(Divergence("client", self.pos.where(), message))
        self.stopped = "client closed its input early" if self.ended_by is None else \
            f"client ended the session early ({self.ended_by})"
        raise _Stop

    def _compare(self, recorded: Msg, live: Msg, say: Callable[[Any, Any], str]) -> None:
        """The live client's answer against the recorded one (ids aside): a divergence if not."""
        self.stats["answers_checked"] += 1
        exp = self._answer_view(recorded, self.rec_norm)
        got = self._answer_view(live, self.live_norm)
        if exp != got:
            self._diverge(Divergence("client", self.pos.where(), say(exp, got), exp, got,
                                     field_diff(exp, got)))

    def _answer_view(self, m: Msg, norm: Normalizer) -> Any:
        v = norm.value(m)
        return {k: x for k, x in v.items() if k != "id"} if isinstance(v, dict) else v

    def _expect_eof(self) -> Walk:
        deadline = self.now + self.opts.frame_timeout
        while not self.client_eof:
            extra = [x for x in self.buffer if x.kind == "request"]
            for x in extra:  # requests past the end of the recording: refuse and report
                self.buffer.remove(x)
                self._diverge(Divergence("client", self.pos.where(),
                                         f"the client sent {describe(x)}, which the recorded "
                                         f"client did not send"))
                yield from self._refuse(x)
            if self.now >= min(deadline, self.hard_deadline):
                how = "close its input" if self.rec.eof_at is not None else \
                    "end the session (close its input or send SIGTERM)"
                self._diverge(Divergence("timeout", self.pos.where(),
                                         f"waited {self.opts.frame_timeout:g}s for the client "
                                         f"to {how}, as the recorded client did"))
                self.stopped = "client timeout"
                raise _Stop
            yield A.AwaitClient(min(deadline, self.hard_deadline))

    # -- the end -------------------------------------------------------------------------------
    def end_walk(self) -> None:
        """The runner stopped walking (the client left in the middle of a write): what comes
        after is only absorbed, for leftovers()."""
        if self._walk is not None:
            self._walk.close()
        self.done = True

    def leftovers(self) -> None:
        """Report what the client sent that the walk did not consume (the runner hands over
        what was still queued first)."""
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
