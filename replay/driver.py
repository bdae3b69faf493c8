"""Replay a recorded session against an agent under test.

The recorded client stands in for the human and the IDE: its own frames (initialize, prompt,
cancel, …, even garbage lines) are sent byte for byte in causal order, and each agent request is
answered with the recorded answer of the recorded request it matches (replay.matchers). The live
agent→client stream is kept and compared with the recording (replay.compare) at the end.

Causal order: a client frame is sent once every agent frame recorded before it has a live
counterpart of the same kind (counted by kind/type, not content, so a changed text still lets
the replay go on), or once the response that closed the previous exchange (e.g. the previous
turn's prompt response) has arrived and everything recorded after it has too. Nothing waits
forever: silence longer than `frame_timeout` while something is expected, or the whole-run
`timeout`, fails the replay and ends the agent. Start-up is not a frame timeout: until the agent
has said anything (kimi: answered initialize) it may stay silent `startup_timeout` (kimi can take a minute to
start on a busy machine, and a transcript has no recorded times to stretch a budget from).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import orjson

from wire_recorder.recorder.errors import InputError, UsageError, UserError

from .compare import (
    Divergence,
    Position,
    cut_short,
    diff_streams,
    lead_with_model_failure,
    make_items,
)
from .labels import describe
from .matchers import Request, RequestBook, fallback_answer, parse_match_on, rewrite_answer
from .normalize import (
    IgnoreRule,
    Normalizer,
    WorkDirRewrite,
    _json_inner,
    default_rules,
    environment_values,
)
from .options import OnUnmatched, values
from .origins import find_origins, resume_args
from .recording import Msg, Recording, load, parse_msg
from .workdir import recorded_workdir

# The adapter's racy methods (Wire cancel and steer, ACP session/cancel) act on whatever the agent
# is doing at that moment (wire spec §5: an immediate cancel changes which frames appear), so even
# "as fast as possible" keeps their recorded delay after the frame they followed, up to this cap.
RACY_DELAY_CAP_S = 5.0
HOLD_MAX_S = 5.0  # longest an answer waits for client frames recorded before it
STOP_GRACE_S = 2.0  # after a stop: time for the agent to exit on stdin EOF
ON_UNMATCHED = values(OnUnmatched)
# divergence kinds that are differences in behaviour, as opposed to their symptoms (a timeout,
# a recorded request left unused, frames not reached after a stop); "model": the agent's own
# model failed (compare.lead_with_model_failure), which comes first whatever it caused
CAUSES = frozenset({"model", "changed", "missing", "extra", "unmatched_request", "client"})


PROGRESS_EVERY_S = 0.2  # how often ReplayOptions.progress is called while a replay runs
# Start-up is not a frame timeout: an agent process that is alive and has not said anything yet
# (kimi's first frame answers initialize) is waited for this long (kimi takes up to a minute on a busy 2-core runner, and
# a transcript has no recorded times to stretch a budget from); frame timeouts apply once it speaks.
STARTUP_TIMEOUT_S = 300.0
STARTUP_ENV = "WIRE_REPLAY_STARTUP_TIMEOUT"


def startup_default() -> float:
    """The start-up wait when none is given: $WIRE_REPLAY_STARTUP_TIMEOUT, else 300 s."""
    text = os.environ.get(STARTUP_ENV, "").strip()
    if not text:
        return STARTUP_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{STARTUP_ENV}={text[:40]!r} is not a positive number of seconds",
                         f"unset it, or give e.g. {STARTUP_ENV}=600")
    return value


@dataclass(frozen=True)
class ReplayProgress:
    """Where a running replay is, for a progress line (ReplayOptions.progress)."""

    turn: int  # turns the agent has begun (Wire) or finished (ACP); 0 for MCP
    turns: int  # turns in the recording
    sent: int  # client frames (and the closing EOF) sent so far
    to_send: int  # of these in all
    received: int  # agent frames received so far


@dataclass
class ReplayOptions:
    match_on: Sequence[str] | None = None  # None: the protocol adapter's defaults
    ignore: Sequence[IgnoreRule] = ()  # in addition to the defaults
    default_ignores: bool = True
    on_unmatched: str = "fail"  # fail | reject | error
    speed: float = 0.0  # 0: as fast as possible; 1: recorded gaps; N: gaps / N
    frame_timeout: float = 30.0  # silence while something is expected
    # silence of an agent that has said nothing yet (None: startup_default())
    startup_timeout: float | None = None
    timeout: float = 600.0  # whole run
    # run the command stored in the recording when no agent command is given: a recording is
    # untrusted input, so only on explicit request (wire-replay --recorded-command)
    recorded_command: bool = False
    live_llm: bool = False  # keep the agent's own model instead of pinning it to the recording
    write_llm_script: str | None = None  # write the pinned LLM's scripts there
    # called from the replay loop every PROGRESS_EVERY_S or so (a CLI draws a progress line from
    # it); also for each origin session replayed first. It must be quick and must not raise.
    progress: Callable[[ReplayProgress], None] | None = None

    def validate(self) -> ReplayOptions:
        if self.match_on is not None:
            self.match_on = parse_match_on(self.match_on)
        if self.on_unmatched not in ON_UNMATCHED:
            raise UsageError(f"--on-unmatched {self.on_unmatched!r} is not one of "
                             f"{', '.join(ON_UNMATCHED)}")
        if self.speed < 0:
            raise UsageError("--speed must be 0 (as fast as possible) or positive")
        if self.startup_timeout is None:
            self.startup_timeout = startup_default()
        if self.frame_timeout <= 0 or self.timeout <= 0 or self.startup_timeout <= 0:
            raise UsageError("timeouts must be positive numbers of seconds")
        if self.live_llm and self.write_llm_script:
            raise UsageError("--write-llm-script writes the scripts of the pinned LLM: not with "
                             "--live-llm")
        return self

    def rules(self, adapter) -> tuple[IgnoreRule, ...]:
        return (default_rules(adapter) if self.default_ignores else ()) + tuple(self.ignore)


STDERR_TAIL_LINES = 8
TIMING_GAP_S = 1.0  # a recorded client that waited this long on a silent agent waited on time


class AgentSetupError(UserError):
    """The agent ended before answering the first request (initialize): its set-up failed (a
    bad config, a missing key, a crash at start). Exit 2; the message ends with its stderr."""


_BOX = "│┃║╭╮╰╯─━═┌┐└┘"


def stderr_tail(data: bytes, n: int = STDERR_TAIL_LINES, width: int = 300) -> list[str]:
    """The last `n` non-empty lines of an agent's stderr, printable (control characters shown
    escaped: the text is the agent's, not ours)."""
    out = []
    for line in data.decode("utf-8", "replace").splitlines()[::-1]:
        line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line.rstrip())
        line = line.strip().strip(_BOX).strip()  # a rich error panel's frame is no news
        if line.strip():
            out.append(line if len(line) <= width else line[:width] + "…")
            if len(out) >= n:
                break
    return out[::-1]


@dataclass
class LiveFrame:
    """A frame as the replay saw it, for `--update` (re-recording)."""

    direction: str  # c2a | a2c | stderr | proxy
    mono_ns: int
    wall_ns: int
    raw: bytes
    newline: bool = True
    event: str | None = None  # proxy lifecycle event
    data: dict | None = None


@dataclass
class ReplayResult:
    recording: Recording
    mode: str  # agent | serve
    argv: list[str]
    divergences: list[Divergence] = field(default_factory=list)
    stopped: str | None = None  # why the replay ended early
    agent_exit_code: int | None = None
    duration_s: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    frames: list[LiveFrame] = field(default_factory=list)
    stderr: bytes = b""
    # sessions replayed first because this one refers to what they created (ACP session/load)
    origins: list[ReplayResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # how the work dir differs from the one recorded (a likely cause of a divergence)
    workdir_differences: list[str] = field(default_factory=list)
    # why the first divergence may be timing (a background task's notice, a recorded wait)
    timing_hint: str | None = None
    # the agent command as given (with the resume flag replay added), before the set-up around
    # it (a pinned LLM's argv is `argv`)
    command: list[str] = field(default_factory=list)

    def stderr_tail(self, n: int = STDERR_TAIL_LINES) -> list[str]:
        return stderr_tail(self.stderr, n)

    @property
    def ok(self) -> bool:
        return not self.divergences and all(o.ok for o in self.origins)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    @property
    def first(self) -> Divergence | None:
        """The first divergence in conversation order (stream differences before the symptoms
        they cause, like a timeout or an unused recorded request)."""
        for d in self.divergences:
            if d.kind in CAUSES:
                return d
        return self.divergences[0] if self.divergences else None

    def of_kind(self, *kinds: str) -> list[Divergence]:
        return [d for d in self.divergences if d.kind in kinds]


@dataclass
class _Step:
    """A client frame the recorded client sent on its own (not an answer), or its stdin EOF."""

    msg: Msg | None  # None: close stdin (or send `signal`)
    pos: int  # number of recorded messages before it
    need: Counter
    last_resp: bytes | None
    need_after: Counter
    gap_prev: float
    gap_agent: float
    max_silence: float = 0.0  # longest recorded agent silence since the previous client frame
    signal: str | None = None  # a signal the recorded client sent the agent

    def label(self) -> str:
        if self.signal is not None:
            return f"sent the agent {self.signal}"
        return "closed its input (EOF)" if self.msg is None else f"sent {describe(self.msg)}"


def plan_steps(rec: Recording) -> list[_Step]:
    answer_idx = set(rec.answers.values())
    steps: list[_Step] = []
    need: Counter = Counter()
    after: Counter = Counter()
    last_resp: bytes | None = None
    t_prev = 0.0
    t_agent = 0.0
    silence = 0.0
    eof_pos = rec.eof_at if rec.eof_at is not None else len(rec.msgs)
    signals = list(rec.signals)

    def signals_until(pos: int) -> None:
        nonlocal t_prev, silence
        while signals and signals[0][0] <= pos:
            at, t, name = signals.pop(0)
            steps.append(_Step(None, at, Counter(need), last_resp, Counter(after),
                               max(0.0, t - t_prev), max(0.0, t - t_agent),
                               max(silence, t - t_prev), signal=name))
            silence = 0.0
            t_prev = max(t_prev, t)

    for m in rec.msgs[:eof_pos]:
        signals_until(m.index)
        silence = max(silence, m.t - t_prev)
        if m.direction == "a2c":
            need[m.coarse] += 1
            if m.kind in ("response", "error") and m.id_key in rec.client_requests:
                last_resp, after = m.id_key, Counter()
            else:
                after[m.coarse] += 1
            t_agent = m.t
        elif m.index not in answer_idx:
            steps.append(_Step(m, m.index, Counter(need), last_resp, Counter(after),
                               max(0.0, m.t - t_prev), max(0.0, m.t - t_agent), silence))
            silence = 0.0
        t_prev = m.t
    signals_until(eof_pos)
    t_eof = rec.eof_t if rec.eof_t is not None else t_prev
    steps.append(_Step(None, eof_pos, Counter(need), last_resp, Counter(after),
                       max(0.0, t_eof - t_prev), max(0.0, t_eof - t_agent),
                       max(silence, t_eof - t_prev)))
    # a signal after the client's EOF: the agent frames recorded before it are awaited too
    for m in rec.msgs[eof_pos:]:
        signals_until(m.index)
        if m.direction == "a2c":
            need[m.coarse] += 1
            t_agent = m.t
        t_prev = m.t
    signals_until(len(rec.msgs))
    return steps


def check_command(argv: Sequence[str], cwd: str | None, recorded: bool) -> None:
    """Fail early, with the reason, when the agent cannot start."""
    if not argv:
        raise UsageError("no agent command", "give one after --, e.g. wire-replay S.db -- kimi --wire")
    where = "the recorded work dir" if recorded else "the work dir"
    hint = "give the agent command after -- (and --cwd)" if recorded else None
    if cwd and not os.path.isdir(cwd):
        raise InputError(f"{where} {cwd} does not exist", hint)
    if recorded:
        for a in argv[1:]:
            if a.startswith("/") and not os.path.exists(a) and not os.path.isdir(os.path.dirname(a)):
                raise InputError(f"the recorded agent command refers to {a}, which no longer "
                                 f"exists", "give the agent command after -- "
                                            "(e.g. a fresh kimi config and scripts)")


def spawn(argv: Sequence[str], env: Mapping[str, str] | None, cwd: str | None) -> subprocess.Popen:
    # A replay that cannot start its agent is a set-up error (exit 2), like an agent that dies
    # before answering: the test never ran. (wire-proxy, which stands in for the agent, says 127
    # as a shell would.)
    try:
        return subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=dict(env) if env is not None else None,
                                cwd=cwd, start_new_session=True)
    except FileNotFoundError:
        raise AgentSetupError(f"cannot start the agent: {argv[0]}: command not found",
                              "give the agent command after --, e.g. -- kimi --wire") from None
    except PermissionError:
        raise AgentSetupError(f"cannot start the agent: {argv[0]}: permission denied") from None
    except OSError as e:
        raise AgentSetupError(f"cannot start the agent: {argv[0]}: {e.strerror or e}") from None


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except OSError:
            pass


_EOF = None


def _signum(name: str) -> int:
    return int(getattr(signal, name, 0))


def _sig_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class _AgentReplay:
    def __init__(self, rec: Recording, argv: list[str], env: Mapping[str, str] | None,
                 cwd: str | None, opts: ReplayOptions, values: Mapping[bytes, bytes] | None = None,
                 own_model: bool = False):
        self.rec, self.argv, self.env, self.cwd, self.opts = rec, argv, env, cwd, opts
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
        self.rec_responses = {m.id_key: m for m in rec.msgs
                              if m.direction == "a2c" and m.kind in ("response", "error")
                              and m.id_key in rec.client_requests}
        self.rec_payloads: dict[int, Any] = {}
        for m in rec.requests():
            p = self.rec_norm.payload(m)
            self.rec_payloads[m.index] = p
            self.book.add(m, Request(m.method, m.msg_type, p))
        self.steps = plan_steps(rec)
        self.divs: list[Divergence] = []
        self.live: list[Msg] = []
        self.frames: list[LiveFrame] = []
        self.counts: Counter = Counter()
        self.snapshots: dict[bytes, Counter] = {}
        self.inbox: queue.Queue = queue.Queue()
        self.scheduled: list[tuple[float, int, str, bytes, bool]] = []  # when, order, what, raw, nl
        # answers waiting for client frames recorded before them: (recorded index, give-up time,
        # delay, raw)
        self.held: list[tuple[int, float, float, bytes]] = []
        self.order = 0
        self.step_i = 0
        self.step_scheduled = False
        self.stdin_closed = False
        self.stdout_eof = False
        self.stopped: str | None = None
        self.timed_out = False
        self.turn_keys = rec.turn_ids()
        self.pos = Position(self.turn_keys)
        self.cut_open = False  # a cut_short_by frame went out and its turn has not ended
        self.live_optional: set[int] = set()
        self.stderr_chunks: list[bytes] = []
        self.stats: Counter[str] = Counter()
        self.signals_sent: list[str] = []
        self.setup_failed: str | None = None
        # starting up until the agent says anything (kimi's first frame is its answer to
        # initialize): silence is allowed startup_timeout till then
        self.started = False

    # -- io ------------------------------------------------------------------------------------
    def _read_stdout(self) -> None:
        # raw reads, one queue item per chunk: a 10,000-frame burst costs a few queue operations
        assert self.proc.stdout is not None  # spawn() opens all three pipes
        fd = self.proc.stdout.fileno()
        buf = b""
        try:
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                t = time.monotonic_ns()
                buf += chunk
                if b"\n" not in chunk:
                    continue
                lines = buf.split(b"\n")
                buf = lines.pop()
                self.inbox.put([(t, line, True) for line in lines])
        except OSError:
            pass
        finally:
            if buf:
                self.inbox.put([(time.monotonic_ns(), buf, False)])
            self.inbox.put(_EOF)

    def _read_stderr(self) -> None:
        # spawn() opens stderr buffered: read1 returns what one read gives, and raises
        # ValueError (not a read of a reused fd number) once the main loop has closed it
        err = cast(io.BufferedReader, self.proc.stderr)
        try:
            while True:
                chunk = err.read1(65536)
                if not chunk:
                    break
                self.stderr_chunks.append(chunk)
                self._frame("stderr", chunk)
        except (OSError, ValueError):
            pass

    def _frame(self, direction: str, raw: bytes, newline: bool = True, mono_ns: int | None = None,
               event: str | None = None, data: dict | None = None) -> None:
        self.frames.append(LiveFrame(direction, mono_ns or time.monotonic_ns(), time.time_ns(),
                                     raw, newline, event, data))

    def _write(self, raw: bytes, newline: bool = True) -> bool:
        if self.stdin_closed:
            return False
        t = time.monotonic_ns()  # before the write: the agent may answer before it returns
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(raw + (b"\n" if newline else b""))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            self.stdin_closed = True
            return False
        self._frame("c2a", raw, newline, mono_ns=t)
        self.stats["sent"] += 1
        return True

    def _close_stdin(self) -> None:
        if not self.stdin_closed:
            self.stdin_closed = True
            self._frame("proxy", b"", event="client_eof", data={})
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            except (OSError, ValueError):
                pass

    def _schedule(self, when: float, what: str, raw: bytes, newline: bool = True) -> None:
        self.order += 1
        self.scheduled.append((when, self.order, what, raw, newline))
        self.scheduled.sort(key=lambda x: (x[0], x[1]))

    # -- causal order --------------------------------------------------------------------------
    def _ready(self, s: _Step) -> bool:
        c = self.counts
        if all(c[k] >= v for k, v in s.need.items()):
            return True
        snap = self.snapshots.get(s.last_resp) if s.last_resp is not None else None
        if snap is not None:
            # the responses recorded before this step must be in too: a server that handles
            # requests concurrently may answer them in another order (MCP), and the client's
            # next frame (its EOF above all) would cut the late ones off
            return all(c[k] - snap[k] >= v for k, v in s.need_after.items()) and \
                all(c[k] >= v for k, v in s.need.items() if k[0] == "response")
        return False

    def _first_missing(self, s: _Step) -> Msg | None:
        seen: Counter = Counter()
        for m in self.rec.msgs[:s.pos]:
            if m.direction == "a2c":
                seen[m.coarse] += 1
                if seen[m.coarse] > self.counts[m.coarse]:
                    return m
        return None

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

    def _delay(self, s: _Step) -> float:
        if self.opts.speed > 0:
            return s.gap_prev / self.opts.speed
        if s.signal is not None:  # like a racy message: it acts on what the agent is doing
            return min(s.gap_prev, RACY_DELAY_CAP_S)
        if s.msg is not None and s.msg.method in self.adapter.racy_methods:
            return min(s.gap_agent, RACY_DELAY_CAP_S)
        return 0.0

    # -- agent frames --------------------------------------------------------------------------
    def _on_frame(self, t_ns: int, raw: bytes, nl: bool) -> None:
        m = parse_msg(raw, "a2c", (t_ns - self.t0_ns) / 1e9, nl, self.adapter)
        m.index = len(self.live)
        self.live.append(m)
        self._frame("a2c", raw, nl, mono_ns=t_ns)
        self.counts[m.coarse] += 1
        self.started = True
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
            self._on_request(m, where)

    def _on_request(self, m: Msg, where: str) -> None:
        if self.stopped or self.stdin_closed:
            return
        req = Request(m.method, m.msg_type, self.live_norm.payload(m))
        entry = self.book.match(m, req)
        now = time.monotonic()
        if entry is not None:
            self.stats["requests_matched"] += 1
            ans = self.rec.answer_to(entry.msg)
            if ans is not None and ans.kind == "response":
                self._effects(m)
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
                    self._schedule(now + max(0.0, delay), "answer", raw)
                self.stats["answers_sent"] += 1
            return
        near = self.book.near_misses(req)
        mode = self.opts.on_unmatched
        what = f"no recorded request matches {describe(m, req.payload)}"
        details = ["nearest recorded requests:"] + [n.line(describe) for n in near] if near else \
            ["the recording holds no agent requests"]
        if mode == "fail":
            self.divs.append(Divergence("unmatched_request", where, what, None, None, details))
            self._stop(f"unmatched {m.msg_type or m.method} (use --on-unmatched reject|error to "
                       f"answer it and go on)")
        else:
            self.divs.append(Divergence("unmatched_request", where,
                                        f"{what}; answered with {'a rejection' if mode == 'reject' else 'a JSON-RPC error'}",
                                        None, None, details))
            self._schedule(now, "answer", fallback_answer(m, mode))

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
                self._schedule(now + max(0.0, delay), "answer", raw)
            else:
                keep.append((idx, give_up, delay, raw))
        self.held = keep

    def _effects(self, live: Msg) -> None:
        """Repeat what the recorded client did besides answering (ACP: write the file), but
        never outside the replay's work dir."""
        params = live.obj.get("params") if isinstance(live.obj, dict) else None
        root = os.path.realpath(self.cwd or os.getcwd())
        for what, path, content in self.adapter.client_effects(live.method, params):
            target = os.path.realpath(path if os.path.isabs(path) else os.path.join(root, path))
            if what != "write_file" or os.path.commonpath([root, target]) != root:
                self.stats["effects_skipped"] += 1
                continue
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "w", encoding="utf-8") as f:
                    f.write(content)
                self.stats["files_written"] += 1
            except OSError:
                self.stats["effects_failed"] += 1

    def _learn_values(self, live: Msg) -> None:
        if live.id_key is None:
            return
        recorded = self.rec_responses.get(live.id_key)
        if recorded is None:
            return
        method = self.rec.client_requests.get(live.id_key)
        pairs = zip(self.adapter.minted(method, recorded.payload),
                    self.adapter.minted(method, live.payload), strict=False)
        for old, new in pairs:
            if old != new:
                self.value_map[_json_inner(old)] = _json_inner(new)
                self.stats["values_rewritten"] += 1

    def _rewrite(self, raw: bytes) -> bytes:
        for old, new in self.value_map.items():
            if old in raw:
                raw = raw.replace(b'"' + old + b'"', b'"' + new + b'"')
        return self._paths(raw)

    def _send_signal(self, name: str) -> None:
        """The recorded client's signal, to the agent's process group (as wire-proxy sends it)."""
        signum = getattr(signal, name, None)
        if not isinstance(signum, int) or self.proc.poll() is not None:
            self.stats["signals_not_sent"] += 1
            return
        self._frame("proxy", b"", event="signal", data={"signal": name,
                                                         "forwarded_to": self.proc.pid})
        try:
            os.killpg(self.proc.pid, signum)
        except OSError:
            try:
                self.proc.send_signal(signum)
            except OSError:
                self.stats["signals_not_sent"] += 1
                return
        self.signals_sent.append(name)
        self.stats["signals_sent"] += 1

    def _stop(self, why: str) -> None:
        if self.stopped is None:
            self.stopped = why
            self.stop_deadline = time.monotonic() + STOP_GRACE_S
            self.scheduled.clear()
            self._close_stdin()

    # -- main loop -----------------------------------------------------------------------------
    def run(self) -> ReplayResult:
        opts = self.opts
        self.t0 = time.monotonic()
        self.t0_ns = time.monotonic_ns()
        self.proc = spawn(self.argv, self.env, self.cwd)
        self._frame("proxy", b"", event="spawn",
                    data={"argv": self.argv, "cwd": self.cwd or os.getcwd(), "pid": self.proc.pid})
        watchdog = threading.Timer(opts.timeout, self._watchdog)
        watchdog.daemon = True
        watchdog.start()
        readers = [threading.Thread(target=self._read_stdout, daemon=True),
                   threading.Thread(target=self._read_stderr, daemon=True)]
        for th in readers:
            th.start()
        last_activity = time.monotonic()
        next_progress = self.t0
        try:
            while True:
                now = time.monotonic()
                if opts.progress is not None and now >= next_progress:
                    next_progress = now + PROGRESS_EVERY_S
                    opts.progress(ReplayProgress(
                        max(self.pos.turn, self.pos.turns_done), len(self.turn_keys),
                        self.step_i, len(self.steps), len(self.live)))
                if self.held:
                    self._release_held(now)
                while self.scheduled and self.scheduled[0][0] <= now:
                    _, _, what, raw, nl = self.scheduled.pop(0)
                    if what == "eof":
                        self._close_stdin()
                    elif what == "signal":
                        self._send_signal(raw.decode())
                    else:  # a dead agent shows up as stdout EOF
                        self._write(self._rewrite(raw) if what == "step" else raw, nl)
                        step_msg = self.steps[self.step_i].msg if what == "step" else None
                        if step_msg is not None and step_msg.method in self.adapter.cut_short_by:
                            self.cut_open = True
                    if what in ("step", "eof", "signal"):
                        self.step_i += 1
                        self.step_scheduled = False
                        last_activity = time.monotonic()
                        if self.held:  # right behind the frame they waited for, as recorded
                            self._release_held(now)
                if not self.stopped and not self.step_scheduled and self.step_i < len(self.steps):
                    s = self.steps[self.step_i]
                    if self._ready(s):
                        self.step_scheduled = True
                        if s.signal is not None:
                            self._schedule(now + self._delay(s), "signal", s.signal.encode())
                        elif s.msg is None:
                            self._schedule(now + self._delay(s), "eof", b"")
                        else:
                            self._schedule(now + self._delay(s), "step", s.msg.raw, s.msg.newline)
                        continue
                if self.stdout_eof:
                    # an agent recorded exiting on its own may do so before the client's EOF
                    own_exit = self.rec.eof_at is None and self.step_i == len(self.steps) - 1
                    # after a replayed signal the agent may be gone; before a signal still due,
                    # it may have ended on its own first (compared at the exit status)
                    own_exit = own_exit or bool(self.signals_sent) or \
                        all(st.signal is not None for st in self.steps[self.step_i:])
                    if not self.stopped and self.step_i < len(self.steps) and not own_exit:
                        self._agent_gone()
                    break
                if self.stopped and now >= self.stop_deadline:
                    break
                waiting = not self.stopped and not self.step_scheduled and self.step_i < len(self.steps)
                after_eof = self.step_i >= len(self.steps)
                if (waiting or after_eof) and not self.stopped and \
                        now - last_activity > self._allowed_silence():
                    self._silence(waiting)
                    continue
                wait = 0.25
                if self.scheduled:
                    wait = min(wait, self.scheduled[0][0] - now)
                if self.held:
                    wait = min(wait, 0.005)
                try:
                    item = self.inbox.get(timeout=max(0.0005, wait))
                except queue.Empty:
                    continue
                while True:
                    if item is _EOF:
                        self.stdout_eof = True
                        break
                    for frame in item:
                        self._on_frame(*frame)
                    last_activity = time.monotonic()
                    try:
                        item = self.inbox.get_nowait()
                    except queue.Empty:
                        break
        except BaseException:  # Ctrl-C and the like: do not leave the agent behind
            kill_group(self.proc)
            raise
        finally:
            self._close_stdin()
            if self.stopped:
                wait = max(0.1, getattr(self, "stop_deadline", 0.0) - time.monotonic())
            else:
                wait = opts.frame_timeout
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                if not self.stopped:
                    self.divs.append(Divergence("agent_exit", "", f"the agent did not exit within "
                                                f"{opts.frame_timeout:g}s after its input closed; killed"))
                kill_group(self.proc)
                self.proc.wait()
            watchdog.cancel()
            for th in readers:
                th.join(timeout=2)
            while True:  # frames that came after the loop ended
                try:
                    item = self.inbox.get_nowait()
                except queue.Empty:
                    break
                if item is not _EOF:
                    for frame in item:
                        self._on_frame(*frame)
            for pipe in (self.proc.stdout, self.proc.stderr):
                try:
                    if pipe is not None:
                        pipe.close()
                except OSError:
                    pass
        self._frame("proxy", b"", event="exit", data={"code": self.proc.returncode})
        if self.setup_failed:
            tail = stderr_tail(b"".join(self.stderr_chunks), 3, 200)
            said = f"; its stderr ends: {' | '.join(tail)}" if tail else "; nothing on its stderr"
            raise AgentSetupError(self.setup_failed + said,
                                  "check the agent command, its config and environment")
        if self.timed_out:
            self.divs.append(Divergence("timeout", self.pos.where(),
                                        f"the whole replay took longer than {opts.timeout:g}s; agent killed"))
            self.stopped = self.stopped or "whole-run timeout"
        return self._finish()

    def _exit_differs(self, code: int) -> str | None:
        """Why the live exit status is not the recorded one, or None. The status is compared as
        wire-proxy records it (128 + N for signal N).

        A session the recorded client ended with a signal (an IDE closing the agent with
        SIGTERM) is compared by its ending, not its number: an agent that handles the signal
        exits 0, one that does not is ended by it (143), and which of the two happens depends on
        what the agent was doing when it came. So where the recorded agent ended either way,
        the live one matches when it ended either way too (or had exited cleanly before the
        signal was due); any other status (a crash on the signal) is compared as is."""
        rec = self.rec
        status = 128 - code if code < 0 else code
        got = f"was ended by {_sig_name(-code)}" if code < 0 else f"exited with code {code}"
        sent = [name for _, _, name in rec.signals]
        if sent:
            endings = {0} | {128 + _signum(n) for n in sent}
            if rec.exit_signal in sent or rec.exit_code in endings:
                if status in endings:
                    return None
                after = (f" after the replayed {', '.join(self.signals_sent)}"
                         if self.signals_sent else "")
                if rec.exit_signal:
                    how, other = f"ended by {rec.exit_signal}", "an exit 0"
                else:
                    how = f"exited with code {rec.exit_code} on the client's {sent[-1]}"
                    other = f"ended by {sent[-1]}"
                return f"the agent {got}{after}, recorded: {how} ({other} would match too)"
        if rec.exit_code is None or status == rec.exit_code:
            return None
        if rec.exit_signal:
            return f"the agent {got}, recorded: ended by {rec.exit_signal} (status {rec.exit_code})"
        return f"the agent {got}, recorded {rec.exit_code}"

    def _watchdog(self) -> None:
        if self.proc.poll() is None:
            self.timed_out = True
            kill_group(self.proc)

    def _agent_gone(self) -> None:
        s = self.steps[self.step_i]
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        if self.timed_out:
            self.stopped = "whole-run timeout"
            return
        miss = self._first_missing(s)
        exp = f"; still expected {describe(miss)}" if miss is not None else ""
        if not any(k[0] == "response" for k in self.counts) and \
                any(m.direction == "a2c" and m.kind in ("response", "error") for m in self.rec.msgs):
            first = next((m for m in self.rec.msgs if m.direction == "c2a"
                          and m.kind == "request"), None)
            what = first.method if first is not None and first.method else "the first request"
            self.setup_failed = f"the agent exited (code {code}) before answering {what}"
        self.divs.append(Divergence("agent_exit", self.pos.where(),
                                    f"the agent exited (code {code}) before the client {s.label()}{exp}"))
        self.stopped = "agent exited"

    def _silence(self, waiting: bool) -> None:
        t = self._allowed_silence()
        if waiting:
            s = self.steps[self.step_i]
            miss = self._first_missing(s)
            exp = describe(miss) if miss is not None else "its next frame"
            if not self.started:
                self.divs.append(Divergence(
                    "timeout", self.pos.where(),
                    f"gave up at start-up: the agent did not answer its first request within "
                    f"{t:.3g}s of starting (expected {exp}); on a slow machine raise the wait "
                    f"with --startup-timeout S or {STARTUP_ENV}=S"))
                self._stop(f"the agent did not start within {t:.3g}s (--startup-timeout)")
                return
            self.divs.append(Divergence("timeout", self.pos.where(),
                                        f"waited {t:.3g}s for the agent: expected {exp} before the "
                                        f"client {s.label()}"))
            self._stop(f"no frame from the agent for {t:.3g}s")
        else:
            self.divs.append(Divergence("agent_exit", self.pos.where(),
                                        f"the agent did not close its output within {t:.3g}s after "
                                        f"its input closed"))
            self._stop("agent did not exit")

    # -- comparison ----------------------------------------------------------------------------
    def _finish(self) -> ReplayResult:
        rec = self.rec
        if self.step_i < len(self.steps):
            cut = self.steps[self.step_i].pos  # nothing after the first frame we did not send
        else:
            cut = len(rec.msgs)
        rec_msgs = [m for m in rec.msgs[:cut] if m.direction == "a2c"]
        anchors = rec.anchor_ids()
        shared: dict = {}
        lits = tuple(lit for lit, _ in self.live_norm.values)
        turns = rec.turn_ids()
        rec_items = make_items(rec_msgs, self.rec_norm, anchors, shared, lits, turns,
                               cut_short(rec.msgs[:cut], self.adapter, turns))
        live_items = make_items(self.live, self.live_norm, anchors, shared, lits, turns,
                                self.live_optional)
        tolerated: list = []
        stream = diff_streams(rec_items, live_items, tolerated)
        if tolerated:
            self.stats["cut_short_frames_tolerated"] = len(tolerated)
        not_reached = sum(1 for m in rec.msgs[cut:] if m.direction == "a2c")
        if self.stopped:
            # the live stream was cut short: the recorded frames it never reached are no news
            reached = live_items[-1].seg if live_items else 0
            kept = [d for d in stream if d.kind != "missing" or d.seg < reached]
            not_reached += len(stream) - len(kept)
            stream = kept
        divs = stream + self.divs
        if self.own_model and self.adapter.model_errors:
            advice = "check the model it is configured with" + (
                ", or drop --live-llm to pin the recorded model" if self.opts.live_llm else "")
            divs = lead_with_model_failure(divs, live_items, self.adapter.model_errors, advice)
        where_of = {it.msg.index: it.where for it in rec_items}
        for e in self.book.unused():
            if e.msg.index < cut and not self.stopped:
                divs.append(Divergence("unused_request", where_of.get(e.msg.index, ""),
                                       f"recorded {describe(e.msg, self.rec_payloads[e.msg.index])} "
                                       f"was never asked by the agent"))
        if self.stopped and not_reached:
            divs.append(Divergence("not_reached", "", f"{not_reached} recorded agent frames were "
                                                      f"not reached before the replay stopped"))
        code = self.proc.returncode
        if not self.stopped and code is not None:
            bad = self._exit_differs(code)
            if bad:
                divs.append(Divergence("exit_code", "", bad))
        self.stats.update(recorded_agent_frames=len(rec_msgs), live_agent_frames=len(self.live),
                          recorded_requests=len(self.book.entries))
        result = ReplayResult(rec, "agent", self.argv, divs, self.stopped, code,
                              time.monotonic() - self.t0, dict(self.stats), self.frames,
                              b"".join(self.stderr_chunks))
        result.timing_hint = self._timing_hint(result)
        return result

    def _timing_hint(self, result: ReplayResult) -> str | None:
        """Why the first divergence may be a matter of timing, with what to try."""
        first = result.first
        if first is None or first.kind == "model" or self.opts.speed == 1:
            return None
        near = [d for d in result.divergences if d.kind in CAUSES][:5] or [first]
        if any(b"<task>" in orjson.dumps(v, default=str) for d in near
               for v in (d.expected, d.got) if v is not None):
            why = "it involves a background task, whose completion the recorded client waited for"
        else:
            # the client frame just before the diverging one, if the recorded client sent it
            # only after waiting on a silent agent (what it waited for may come later live)
            before = [s for s in self.steps if s.msg is not None and s.pos <= first.index]
            last = before[-1] if before and first.index >= 0 else None
            if last is None or last.gap_agent < TIMING_GAP_S or \
                    last.msg is None or last.msg.method in self.adapter.racy_methods:
                return None
            why = (f"the recorded client waited {last.gap_agent:.1f}s on a silent agent before "
                   f"it {last.label()}")
        return f"this may be timing: {why}; try --speed 1 (keep the recorded gaps)"


def command_hint(argv: Sequence[str], limit: int = 200) -> str:
    """A recorded command as one printable line: it comes from an untrusted file."""
    text = shlex.join(argv)
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[:limit] + "…"


def no_agent_command(rec: Recording, what: str = "replay") -> UsageError:
    cmd = rec.command
    hint = f"recorded: {command_hint(cmd)}; " if cmd else ""
    return UsageError(f"no agent command: give it after --, e.g. wire-replay {rec.path} -- "
                      f"kimi --wire ({what} never runs the command stored in a recording "
                      f"unasked)", f"{hint}--recorded-command runs the recorded one")


def _optional(module: str, name: str) -> Any:
    """`name` from a replay module that a tree may not have yet (None then)."""
    try:
        mod = importlib.import_module(f".{module}", __package__)
    except ImportError:
        return None
    return getattr(mod, name, None)


class _Setup:
    """What a chain of runs (origins, then the session) shares: the work dir (a fresh copy of
    the recorded snapshot when there is one) and the agent's pinned LLM with its scratch HOME.
    The set-up modules are optional: a tree without them replays as before."""

    def __init__(self, rec: Recording, argv: list[str], env: Mapping[str, str] | None,
                 cwd: str | None, opts: ReplayOptions, given_cwd: str | None = None):
        self.argv, self.env, self.cwd = argv, env, cwd
        self.notes: list[str] = []
        self.differences: list[str] = []
        self.plan: Any = None
        self.pin: Any = None
        prepare = _optional("workdir", "prepare_workdir")
        if prepare is not None:
            # the snapshot is copied unless a dir was asked for (--cwd; not the recorded cwd
            # that --recorded-command defaults to)
            self.plan = prepare(rec, cwd, copy_snapshot=given_cwd is None)
            self.cwd = self.plan.cwd or cwd
            self.differences = list(self.plan.differences or [])
            self.notes += list(self.plan.notes or [])
        if not opts.live_llm:
            self._pin(rec, argv, env)
        if opts.write_llm_script and self.pin is None:
            self.notes.append(f"--write-llm-script: nothing written to {opts.write_llm_script}: "
                              f"this agent's model is not pinned (not an agent replay knows how "
                              f"to pin, or its recording says nothing of the model)")

    def _pin(self, rec: Recording, argv: list[str], env: Mapping[str, str] | None) -> None:
        pin_llm = _optional("agents", "pin_llm")
        if pin_llm is None:
            return
        try:
            self.pin = pin_llm(rec, list(argv), dict(env) if env is not None else None)
        except BaseException:
            self.cleanup()
            raise
        if self.pin is not None:
            self.argv, self.env = list(self.pin.argv), self.pin.env
            self.notes += list(self.pin.notes or [])

    def use(self, r: Recording, extra: Sequence[str], path: str | None) -> tuple[list[str], Any]:
        """The argv and env of the run of `r`, its LLM scripts written."""
        if self.pin is not None:
            self.pin.use(r, recorded_workdir(r), self.cwd or os.getcwd())
            if path:
                self.pin.write_scripts(path)
        return self.argv + list(extra), self.env

    def cleanup(self) -> None:
        for part in (self.pin, self.plan):
            if part is not None:
                try:
                    part.cleanup()
                except OSError:
                    pass


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused (and then restored as it was) while a replay runs:
    it walked the recording's objects again and again, a fifth of the CPU time of a 10k-frame
    replay, and a replay makes almost no cycles (180 objects for that session), so refcounting
    alone frees what it drops."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def replay_session(recording: Recording | str | os.PathLike, agent: Sequence[str] | None = None,
                   *, env: Mapping[str, str] | None = None, cwd: str | None = None,
                   session_id: str | None = None,
                   options: ReplayOptions | None = None,
                   origin_files: Sequence[str] = ()) -> ReplayResult:
    """Replay `recording` against `agent`. Without `agent`, a UsageError names the recorded
    command; it is run (in the recorded cwd) only with `options.recorded_command`.

    A session that refers to what an earlier session created (ACP session/load, kimi `-S ID`
    / `-C`) gets that session replayed first, against the same agent set-up, HOME and work
    dir (see replay.origins; `origin_files` are searched besides the recording's own .db);
    those runs are in `result.origins`. For an agent replay knows (replay.agents: kimi), the
    model is pinned to what the recording says it answered, unless `options.live_llm`.

    Raises UserError kinds for input problems (recorder.errors: exit 2, or 127 for an agent
    that cannot start; AgentSetupError for an agent that exits before answering anything);
    divergences are in the result (`result.ok`, `result.first`, `result.divergences`)."""
    with gc_paused():
        return _replay_session(recording, agent, env=env, cwd=cwd, session_id=session_id,
                               options=options, origin_files=origin_files)


def _replay_session(recording: Recording | str | os.PathLike, agent: Sequence[str] | None,
                    *, env: Mapping[str, str] | None, cwd: str | None, session_id: str | None,
                    options: ReplayOptions | None, origin_files: Sequence[str]) -> ReplayResult:
    opts = (options or ReplayOptions()).validate()
    rec = recording if isinstance(recording, Recording) else load(recording, session_id)
    if agent:
        argv, run_cwd = [str(a) for a in agent], cwd
        if os.sep in argv[0] and not os.path.isabs(argv[0]):
            argv[0] = os.path.abspath(argv[0])  # as typed, not relative to --cwd
        check_command(argv, run_cwd, recorded=False)
    elif opts.recorded_command:
        argv, run_cwd = rec.command, cwd or rec.cwd
        if not argv:
            raise UsageError(f"session {rec.session_id} has no recorded agent command",
                             "give the agent command after --")
        check_command(argv, run_cwd, recorded=cwd is None)
    else:
        raise no_agent_command(rec)
    found = find_origins(rec, origin_files)
    setup = _Setup(rec, argv, env, run_cwd, opts, given_cwd=cwd)
    try:
        # the live work dir, which stands for the recorded one (replay.workdir)
        setup.cwd = os.path.abspath(setup.cwd or os.getcwd())
        flags = resume_args(found.chain + [rec], argv)
        values: dict[bytes, bytes] = {}
        before = []
        for origin, extra in zip(found.chain, flags, strict=False):
            o_argv, o_env = setup.use(origin, extra, None)
            r = _AgentReplay(origin, o_argv, o_env, setup.cwd, opts, values,
                             own_model=setup.pin is None)
            before.append(r.run())
            values = r.value_map
        s_argv, s_env = setup.use(rec, flags[-1], opts.write_llm_script)
        result = _AgentReplay(rec, s_argv, s_env, setup.cwd, opts, values,
                              own_model=setup.pin is None).run()
        # a recorded model leg: what the agent asked its model, compared (replay/agents)
        result.divergences[:0] = getattr(setup.pin, "divergences", list)()
        result.command = [*argv, *flags[-1]]
        for o, extra in zip(before, flags, strict=False):
            o.command = [*argv, *extra]
    finally:
        setup.cleanup()
    result.origins = before
    result.notes = found.notes + setup.notes
    result.workdir_differences = setup.differences
    return result
