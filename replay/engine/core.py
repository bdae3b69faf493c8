"""The agent replay's core, sans IO: events in (engine.events), actions out (engine.actions).

The recorded client stands in for the human and the IDE: its own frames are sent in causal
order (engine.plan), each agent request is answered with the recorded answer of the recorded
request it matches (replay.matchers), and the live agent->client stream is kept for the
comparison at the end (engine.verdict). Nothing waits forever: silence longer than
`frame_timeout` while something is expected, or the whole-run `timeout`, fails the replay and
ends the agent. Start-up is not a frame timeout: until the agent has said anything (kimi:
answered initialize) it may stay silent `startup_timeout`.

No threads, no processes, no clock: the runner (replay.driver) owns the agent process, reads its
output and tells the engine the time with every event, so tests drive the engine with scripted
events (tests/test_replay_engine.py).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..compare import Divergence, Position
from ..labels import describe
from ..matchers import Request, RequestBook, fallback_answer, parse_match_on, rewrite_answer
from ..normalize import Normalizer, WorkDirRewrite, environment_values
from ..recording import Msg, Recording, parse_msg
from ..settings import STARTUP_ENV, STARTUP_TIMEOUT_S, ReplayOptions, ReplayProgress
from ..workdir import recorded_workdir
from . import actions as A
from . import events as E
from . import values as V
from .plan import Step, first_missing, plan_steps, ready
from .scheduler import Scheduler

# The adapter's racy methods (Wire cancel and steer, ACP session/cancel) act on whatever the agent
# is doing at that moment (wire spec §5: an immediate cancel changes which frames appear), so even
# "as fast as possible" keeps their recorded delay after the frame they followed, up to this cap.
RACY_DELAY_CAP_S = 5.0
HOLD_MAX_S = 5.0  # longest an answer waits for client frames recorded before it
STOP_GRACE_S = 2.0  # after a stop: time for the agent to exit on stdin EOF
IDLE_WAIT_S = 0.25  # longest the runner waits for a frame before it ticks again
HELD_WAIT_S = 0.005  # ... while answers are held (what they wait for can be due any moment)


class AgentEngine:
    def __init__(self, rec: Recording, argv: list[str], env: Mapping[str, str] | None,
                 cwd: str | None, opts: ReplayOptions, values: Mapping[bytes, bytes] | None = None,
                 own_model: bool = False):
        self.rec, self.argv, self.cwd, self.opts = rec, argv, cwd, opts
        # the agent asks its own configured model (--live-llm, or nothing to pin it to): when
        # that model fails, the report leads with it. A pinned model's error (it has no answer
        # left for a changed agent) is a symptom of the change, not the cause.
        self.own_model = own_model
        self.adapter = rec.adapter
        rules = opts.rules(self.adapter)
        # the recorded work dir (an ACP client's session/new cwd) stands for the live one
        workdir = recorded_workdir(rec)
        rec_values = environment_values(rec.command, rec.cwd, adapter=self.adapter)
        if workdir and workdir != rec.cwd:
            rec_values = sorted(set(rec_values + environment_values([], workdir)),
                                key=lambda x: -len(x[0]))
        self.rec_norm = Normalizer(rules, rec_values, self.adapter)
        # recorded answers are re-served into the live run, so the recorded paths in them can come
        # back in live frames (an MCP server echoing the roots it was given)
        # the agent runs where the replay runs when no dir is given: that dir is masked too
        live_values = environment_values(argv, cwd or os.getcwd(), dict(env) if env else None,
                                         self.adapter)
        self.live_norm = Normalizer(rules, sorted(set(live_values + rec_values),
                                                  key=lambda x: -len(x[0])), self.adapter)
        self.book = RequestBook(parse_match_on(opts.match_on, self.adapter.default_match_on))
        # Recorded values the client sends back, and what the live run has instead: the work dir
        # (an ACP client names it in session/new) and values the agent mints in its responses
        # (ACP sessionId, MCP requestState). Rewritten in the client's frames before they go out.
        self.value_map: dict[bytes, bytes] = dict(values or {})  # whole JSON strings
        self._paths = WorkDirRewrite(workdir, cwd)
        self.rec_responses = V.recorded_responses(rec)
        self.rec_payloads: dict[int, Any] = {}
        for m in rec.requests():
            p = self.rec_norm.payload(m)
            self.rec_payloads[m.index] = p
            self.book.add(m, Request(m.method, m.msg_type, p))
        self.steps: list[Step] = plan_steps(rec)
        self.divs: list[Divergence] = []
        self.live: list[Msg] = []
        self.counts: Counter = Counter()
        self.snapshots: dict[bytes, Counter] = {}
        self.scheduled = Scheduler()
        # answers waiting for client frames recorded before them: (recorded index, give-up time,
        # delay, raw)
        self.held: list[tuple[int, float, float, bytes]] = []
        self.step_i = 0
        self.step_scheduled = False
        self.stdin_closed = False
        self.stdout_eof = False
        self.stopped: str | None = None
        self.stop_deadline = 0.0
        self.timed_out = False
        self.kill_asked = False
        self.done = False
        self.turn_keys = rec.turn_ids()
        self.pos = Position(self.turn_keys)
        self.cut_open = False  # a cut_short_by frame went out and its turn has not ended
        self.live_optional: set[int] = set()
        self.stats: Counter[str] = Counter()
        self.signals_sent: list[str] = []
        self.setup_failed: str | None = None
        # starting up until the agent says anything (kimi's first frame is its answer to
        # initialize): silence is allowed startup_timeout till then
        self.started = False
        self.t0 = 0.0
        self.t0_ns = 0
        self.deadline = float("inf")
        self.last_activity = 0.0
        self._out: list[A.Action] = []

    # -- events in, actions out ----------------------------------------------------------------
    def handle(self, event: E.Event) -> list[A.Action]:
        """Take one event; the actions it calls for, in order. An action that asks for an
        outcome (actions.py) is the last of its list: the outcome, handed back, goes on."""
        self._out = []
        if isinstance(event, E.PeerFrame):  # the most frequent first
            self._on_frame(event.now, event.t_ns, event.raw, event.newline)
        elif isinstance(event, E.Tick):
            self._tick(event.now)
        elif isinstance(event, E.PeerClosed):
            self.stdout_eof = True
        elif isinstance(event, E.Written):
            if event.ok:
                self.stats["sent"] += 1
            else:
                self.stdin_closed = True
        elif isinstance(event, E.SignalResult):
            if event.sent:
                self.signals_sent.append(event.name)
                self.stats["signals_sent"] += 1
            else:
                self.stats["signals_not_sent"] += 1
            self._tick(event.now)  # the tick the signal was sent from goes on
        elif isinstance(event, E.Killed):
            self.timed_out = self.timed_out or event.alive
        elif isinstance(event, E.AgentExited):
            self._agent_gone(event.code)
        elif isinstance(event, E.Started):
            self.t0, self.t0_ns = event.now, event.t_ns
            self.last_activity = event.now
            self.deadline = event.now + self.opts.timeout
        elif isinstance(event, E.RunEnding):
            self._close_stdin()
        elif isinstance(event, E.ExitOverdue):
            if not self.stopped:
                self._diverge(Divergence("agent_exit", "", f"the agent did not exit within "
                                         f"{event.waited:g}s after its input closed; killed"))
        else:
            raise TypeError(f"not an engine event: {event!r}")
        out, self._out = self._out, []
        return out

    def wait_time(self, now: float) -> float:
        """How long the runner may wait for agent output before the next Tick."""
        wait = IDLE_WAIT_S
        when = self.scheduled.next_when()
        if when is not None:
            wait = min(wait, when - now)
        if self.held:
            wait = min(wait, HELD_WAIT_S)
        return max(0.0005, wait)

    def progress(self) -> ReplayProgress:
        return ReplayProgress(max(self.pos.turn, self.pos.turns_done), len(self.turn_keys),
                              self.step_i, len(self.steps), len(self.live))

    # -- time ----------------------------------------------------------------------------------
    def _tick(self, now: float) -> None:
        if self.done:
            return
        if not self.kill_asked and now >= self.deadline:
            self.kill_asked = True  # the whole-run timeout: the agent's EOF follows its end
            self._out.append(A.Kill())
        while True:
            if self.held:
                self._release_held(now)
            while (item := self.scheduled.pop_due(now)) is not None:
                sent_signal = False
                if item.what == "eof":
                    self._close_stdin()
                elif item.what == "signal":
                    self._out.append(A.SendSignal(item.raw.decode()))
                    sent_signal = True
                elif item.what == "step":  # a dead agent shows up as stdout EOF
                    self._out.append(A.SendFrame(self._rewrite(item.raw), item.newline))
                    step_msg = self.steps[self.step_i].msg
                    if step_msg is not None and step_msg.method in self.adapter.cut_short_by:
                        self.cut_open = True
                else:
                    self._out.append(A.Answer(item.raw, item.newline))
                if item.what in ("step", "eof", "signal"):
                    self.step_i += 1
                    self.step_scheduled = False
                    self.last_activity = now
                    if self.held:  # right behind the frame they waited for, as recorded
                        self._release_held(now)
                if sent_signal:
                    return  # on with the SignalResult
            if not self.stopped and not self.step_scheduled and self.step_i < len(self.steps):
                s = self.steps[self.step_i]
                if ready(s, self.counts, self.snapshots):
                    self.step_scheduled = True
                    if s.signal is not None:
                        self.scheduled.add(now + self._delay(s), "signal", s.signal.encode())
                    elif s.msg is None:
                        self.scheduled.add(now + self._delay(s), "eof")
                    else:
                        self.scheduled.add(now + self._delay(s), "step", s.msg.raw, s.msg.newline)
                    continue
            if self.stdout_eof:
                # an agent recorded exiting on its own may do so before the client's EOF
                own_exit = self.rec.eof_at is None and self.step_i == len(self.steps) - 1
                # after a replayed signal the agent may be gone; before a signal still due,
                # it may have ended on its own first (compared at the exit status)
                own_exit = own_exit or bool(self.signals_sent) or \
                    all(st.signal is not None for st in self.steps[self.step_i:])
                if not self.stopped and self.step_i < len(self.steps) and not own_exit:
                    self._out.append(A.ReapAgent(2.0))  # on with AgentExited
                    return
                self._end()
                return
            if self.stopped and now >= self.stop_deadline:
                self._end()
                return
            waiting = not self.stopped and not self.step_scheduled and self.step_i < len(self.steps)
            after_eof = self.step_i >= len(self.steps)
            if (waiting or after_eof) and not self.stopped and \
                    now - self.last_activity > self._allowed_silence():
                self._silence(now, waiting)
                continue
            return

    def _end(self) -> None:
        self.done = True
        self._out.append(A.Done())

    def _delay(self, s: Step) -> float:
        if self.opts.speed > 0:
            return s.gap_prev / self.opts.speed
        if s.signal is not None:  # like a racy message: it acts on what the agent is doing
            return min(s.gap_prev, RACY_DELAY_CAP_S)
        if s.msg is not None and s.msg.method in self.adapter.racy_methods:
            return min(s.gap_agent, RACY_DELAY_CAP_S)
        return 0.0

    def _allowed_silence(self) -> float:
        """--frame-timeout, or more where the recorded agent itself was silent longer (a slow
        tool), so that an unchanged agent is not failed for being as slow as it was; while the
        agent starts up (has said nothing yet), at least --startup-timeout."""
        if self.step_i < len(self.steps):
            t = max(self.opts.frame_timeout, 2 * self.steps[self.step_i].max_silence + 1)
        else:
            t = self.opts.frame_timeout
        if not self.started:
            t = max(t, self.opts.startup_timeout or STARTUP_TIMEOUT_S)
        return t

    def _silence(self, now: float, waiting: bool) -> None:
        t = self._allowed_silence()
        if waiting:
            s = self.steps[self.step_i]
            miss = first_missing(self.rec, s, self.counts)
            exp = describe(miss) if miss is not None else "its next frame"
            if not self.started:
                self._diverge(Divergence(
                    "timeout", self.pos.where(),
                    f"gave up at start-up: the agent did not answer its first request within "
                    f"{t:.3g}s of starting (expected {exp}); on a slow machine raise the wait "
                    f"with --startup-timeout S or {STARTUP_ENV}=S"))
                self._stop(now, f"the agent did not start within {t:.3g}s (--startup-timeout)")
                return
            self._diverge(Divergence("timeout", self.pos.where(),
                                     f"waited {t:.3g}s for the agent: expected {exp} before the "
                                     f"client {s.label()}"))
            self._stop(now, f"no frame from the agent for {t:.3g}s")
        else:
            self._diverge(Divergence("agent_exit", self.pos.where(),
                                     f"the agent did not close its output within {t:.3g}s after "
                                     f"its input closed"))
            self._stop(now, "agent did not exit")

    # -- agent frames --------------------------------------------------------------------------
    def _on_frame(self, now: float, t_ns: int, raw: bytes, nl: bool) -> None:
        m = parse_msg(raw, "a2c", (t_ns - self.t0_ns) / 1e9, nl, self.adapter)
        m.index = len(self.live)
        self.live.append(m)
        self.counts[m.coarse] += 1
        self.started = True
        self.last_activity = now
        where = self.pos.see(m)
        if self.cut_open:
            if m.kind in ("response", "error") and m.id_key in self.turn_keys:
                self.cut_open = False
            elif m.kind == "notification":
                self.live_optional.add(m.index)
        if m.kind in ("response", "error") and m.id_key is not None:
            self.snapshots.setdefault(m.id_key, Counter(self.counts))
            self._learn_values(m)
        if m.kind == "request" and m.method is not None:
            self._on_request(now, m, where)

    def _on_request(self, now: float, m: Msg, where: str) -> None:
        if self.stopped or self.stdin_closed:
            return
        req = Request(m.method, m.msg_type, self.live_norm.payload(m))
        entry = self.book.match(m, req)
        if entry is not None:
            self.stats["requests_matched"] += 1
            ans = self._answer(entry.msg, m)
            if ans is not None and ans.kind == "response":
                self._out.append(A.ClientEffects(m))
            if ans is not None:
                delay = (ans.t - entry.msg.t) / self.opts.speed if self.opts.speed > 0 else 0.0
                raw = self._paths(rewrite_answer(ans, entry.msg, m))
                if self._before(ans.index):
                    # the recorded client sent something else first (ACP: session/cancel, then
                    # the pending permission answered `cancelled`); answering now would turn
                    # the cancel into a no-op
                    self.held.append((ans.index, now + HOLD_MAX_S, delay, raw))
                    self.stats["answers_held"] += 1
                else:
                    self.scheduled.add(now + max(0.0, delay), "answer", raw)
                self.stats["answers_sent"] += 1
            return
        near = self.book.near_misses(req)
        mode = self.opts.on_unmatched
        what = f"no recorded request matches {describe(m, req.payload)}"
        details = ["nearest recorded requests:"] + [n.line(describe) for n in near] if near else \
            ["the recording holds no agent requests"]
        if mode == "fail":
            self._diverge(Divergence("unmatched_request", where, what, None, None, details))
            self._stop(now, f"unmatched {m.msg_type or m.method} (use --on-unmatched reject|error "
                            f"to answer it and go on)")
        else:
            self._diverge(Divergence("unmatched_request", where,
                                     f"{what}; answered with {'a rejection' if mode == 'reject' else 'a JSON-RPC error'}",
                                     None, None, details))
            self.scheduled.add(now, "answer", fallback_answer(m, mode))

    def _answer(self, recorded: Msg, live: Msg) -> Msg | None:
        """The recorded client's answer to `recorded`, which `live` matched (None: it left it
        unanswered). A fork (engine.fork) gives another."""
        return self.rec.answer_to(recorded)

    def _before(self, index: int) -> bool:
        """Is a client frame recorded before recorded message `index` still unsent?"""
        return self.step_i < len(self.steps) and self.steps[self.step_i].msg is not None and \
            self.steps[self.step_i].pos < index

    def _release_held(self, now: float) -> None:
        """Schedule held answers whose earlier client frames are out, or that waited too long
        (a live agent that never sends what those frames wait for must not stall its answer)."""
        keep = []
        for idx, give_up, delay, raw in self.held:
            if self.stopped:
                continue
            if not self._before(idx) or now >= give_up:
                self.scheduled.add(now + max(0.0, delay), "answer", raw)
            else:
                keep.append((idx, give_up, delay, raw))
        self.held = keep

    def _learn_values(self, live: Msg) -> None:
        self.stats["values_rewritten"] += V.learn(self.value_map, self.rec, self.rec_responses,
                                                  live)

    def _rewrite(self, raw: bytes) -> bytes:
        return self._paths(V.rewrite(self.value_map, raw))

    # -- endings -------------------------------------------------------------------------------
    def _diverge(self, d: Divergence) -> None:
        self.divs.append(d)
        self._out.append(A.Diverge(d))

    def _close_stdin(self) -> None:
        if not self.stdin_closed:
            self.stdin_closed = True
            self._out.append(A.CloseInput())

    def _stop(self, now: float, why: str) -> None:
        if self.stopped is None:
            self.stopped = why
            self.stop_deadline = now + STOP_GRACE_S
            self.scheduled.clear()
            self._out.append(A.Stop(why))
            self._close_stdin()

    def _agent_gone(self, code: int | None) -> None:
        """The agent's output ended before the recorded client was done with it."""
        s = self.steps[self.step_i]
        if self.timed_out:
            self.stopped = "whole-run timeout"
            self._end()
            return
        miss = first_missing(self.rec, s, self.counts)
        exp = f"; still expected {describe(miss)}" if miss is not None else ""
        if not any(k[0] == "response" for k in self.counts) and \
                any(m.direction == "a2c" and m.kind in ("response", "error") for m in self.rec.msgs):
            first = next((m for m in self.rec.msgs if m.direction == "c2a"
                          and m.kind == "request"), None)
            what = first.method if first is not None and first.method else "the first request"
            self.setup_failed = f"the agent exited (code {code}) before answering {what}"
        self._diverge(Divergence("agent_exit", self.pos.where(),
                                 f"the agent exited (code {code}) before the client {s.label()}{exp}"))
        self.stopped = "agent exited"
        self._end()
