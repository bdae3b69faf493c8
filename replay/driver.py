"""Replay a recorded session against an agent under test: the runner.

The replay itself (causal order, matching, answers, timeouts, the comparison at the end) is the
sans-IO engine in replay.engine; this runner owns what it cannot: the agent process, the threads
that read its stdout and stderr, the clock, and the frames it saw (for `--update`). It feeds the
engine events (agent frames, ticks, EOF, outcomes) and carries out the actions it returns
(writes, signals, kills). replay_session sets up a chain of runs (origins first, a pinned LLM).
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from wire_recorder.recorder.errors import InputError, UsageError, UserError

from .engine import actions as A
from .engine import events as E
from .engine.core import HOLD_MAX_S, RACY_DELAY_CAP_S, STOP_GRACE_S, AgentEngine
from .engine.effects import apply_effects
from .engine.plan import Step as _Step
from .engine.plan import plan_steps
from .engine.verdict import TIMING_GAP_S, finish, timing_hint
from .mode_note import name_the_mode
from .origins import find_origins, resume_args
from .recording import Recording, load
from .result import CAUSES, STDERR_TAIL_LINES, LiveFrame, ReplayResult, stderr_tail
from .settings import (
    ON_UNMATCHED,
    PROGRESS_EVERY_S,
    STARTUP_ENV,
    STARTUP_TIMEOUT_S,
    ReplayOptions,
    ReplayProgress,
    startup_default,
)
from .workdir import recorded_workdir

if TYPE_CHECKING:
    from .agents import LlmPin

# the names replay's other modules, its plugin and users import from here
__all__ = [
    "CAUSES", "HOLD_MAX_S", "ON_UNMATCHED", "PROGRESS_EVERY_S", "RACY_DELAY_CAP_S",
    "STARTUP_ENV", "STARTUP_TIMEOUT_S", "STDERR_TAIL_LINES", "STOP_GRACE_S", "TIMING_GAP_S",
    "AgentSetupError", "LiveFrame", "ReplayOptions", "ReplayProgress", "ReplayResult", "_Step",
    "check_command", "command_hint", "gc_paused", "kill_group", "no_agent_command", "plan_steps",
    "replay_session", "spawn", "startup_default", "stderr_tail",
]


class AgentSetupError(UserError):
    """The agent ended before answering the first request (initialize): its set-up failed (a
    bad config, a missing key, a crash at start). Exit 2; the message ends with its stderr."""


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


class _AgentReplay:
    """One run of one recording against one agent process: the engine's IO side."""

    engine_class = AgentEngine

    def __init__(self, rec: Recording, argv: list[str], env: Mapping[str, str] | None,
                 cwd: str | None, opts: ReplayOptions, values: Mapping[bytes, bytes] | None = None,
                 own_model: bool = False, engine: Callable[..., AgentEngine] | None = None):
        """engine: makes the engine (default: engine_class), from the same arguments."""
        self.rec, self.argv, self.env, self.cwd, self.opts = rec, argv, env, cwd, opts
        self.engine = (engine or self.engine_class)(rec, argv, env, cwd, opts, values, own_model)
        self.inbox: queue.Queue = queue.Queue()
        self.frames: list[LiveFrame] = []
        self.stderr_chunks: list[bytes] = []
        self.stdin_closed = False

    @property
    def value_map(self) -> dict[bytes, bytes]:
        """The recorded values the client sends back and the live ones (for the next run)."""
        return self.engine.value_map

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

    def _send_signal(self, name: str) -> bool:
        """The recorded client's signal, to the agent's process group (as wire-proxy sends it)."""
        signum = getattr(signal, name, None)
        if not isinstance(signum, int) or self.proc.poll() is not None:
            return False
        self._frame("proxy", b"", event="signal", data={"signal": name,
                                                         "forwarded_to": self.proc.pid})
        try:
            os.killpg(self.proc.pid, signum)
        except OSError:
            try:
                self.proc.send_signal(signum)
            except OSError:
                return False
        return True

    def _execute(self, actions: list[A.Action]) -> None:
        """Carry out the engine's actions in order, handing each outcome back at once."""
        for a in actions:
            if isinstance(a, A.SendFrame | A.Answer):
                ok = self._write(a.raw, a.newline)
                self._execute(self.engine.handle(E.Written(time.monotonic(), ok)))
            elif isinstance(a, A.CloseInput):
                self._close_stdin()
            elif isinstance(a, A.SendSignal):
                sent = self._send_signal(a.name)
                self._execute(self.engine.handle(E.SignalResult(time.monotonic(), a.name, sent)))
            elif isinstance(a, A.ClientEffects):
                self.engine.stats.update(apply_effects(self.rec.adapter, a.msg, self.cwd))
            elif isinstance(a, A.Kill):
                alive = self.proc.poll() is None
                if alive:
                    kill_group(self.proc)
                self._execute(self.engine.handle(E.Killed(time.monotonic(), alive)))
            elif isinstance(a, A.ReapAgent):
                try:
                    code: int | None = self.proc.wait(timeout=a.timeout)
                except subprocess.TimeoutExpired:
                    code = None
                self._execute(self.engine.handle(E.AgentExited(time.monotonic(), code)))
            # Diverge, Stop, Done: the engine keeps them; the loop looks at engine.done

    def _agent_output(self, items: list) -> None:
        now = time.monotonic()  # one reading for a chunk's lines: they came in one read
        for t_ns, raw, nl in items:
            self._frame("a2c", raw, nl, mono_ns=t_ns)
            actions = self.engine.handle(E.PeerFrame(now, t_ns, raw, nl))
            if actions:
                self._execute(actions)

    def _await_exit(self, wait: float) -> bool:
        """Wait up to `wait` s for the agent to exit (False: it has not), killing it when the
        whole-run timeout falls in the wait."""
        end = time.monotonic() + wait
        deadline = self.engine.deadline
        if not self.engine.kill_asked and deadline < end:
            try:
                self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                return True
            except subprocess.TimeoutExpired:
                self._execute([A.Kill()])
        try:
            self.proc.wait(timeout=max(0.0, end - time.monotonic()))
            return True
        except subprocess.TimeoutExpired:
            return False

    # -- main loop -----------------------------------------------------------------------------
    def run(self) -> ReplayResult:
        opts, eng = self.opts, self.engine
        t0 = time.monotonic()
        t0_ns = time.monotonic_ns()
        self.proc = spawn(self.argv, self.env, self.cwd)
        self._frame("proxy", b"", event="spawn",
                    data={"argv": self.argv, "cwd": self.cwd or os.getcwd(), "pid": self.proc.pid})
        self._execute(eng.handle(E.Started(t0, t0_ns)))
        readers = [threading.Thread(target=self._read_stdout, daemon=True),
                   threading.Thread(target=self._read_stderr, daemon=True)]
        for th in readers:
            th.start()
        next_progress = t0
        try:
            while True:
                now = time.monotonic()
                if opts.progress is not None and now >= next_progress:
                    next_progress = now + PROGRESS_EVERY_S
                    opts.progress(eng.progress())
                self._execute(eng.handle(E.Tick(now)))
                if eng.done:
                    break
                try:
                    item = self.inbox.get(timeout=eng.wait_time(now))
                except queue.Empty:
                    continue
                while True:
                    if item is _EOF:
                        self._execute(eng.handle(E.PeerClosed(time.monotonic())))
                        break
                    self._agent_output(item)
                    try:
                        item = self.inbox.get_nowait()
                    except queue.Empty:
                        break
        except BaseException:  # Ctrl-C and the like: do not leave the agent behind
            kill_group(self.proc)
            raise
        finally:
            self._execute(eng.handle(E.RunEnding(time.monotonic())))
            if eng.stopped:
                wait = max(0.1, eng.stop_deadline - time.monotonic())
            else:
                wait = opts.frame_timeout
            if not self._await_exit(wait):
                self._execute(eng.handle(E.ExitOverdue(time.monotonic(), opts.frame_timeout)))
                kill_group(self.proc)
                self.proc.wait()
            for th in readers:
                th.join(timeout=2)
            while True:  # frames that came after the loop ended
                try:
                    item = self.inbox.get_nowait()
                except queue.Empty:
                    break
                if item is not _EOF:
                    self._agent_output(item)
            for pipe in (self.proc.stdout, self.proc.stderr):
                try:
                    if pipe is not None:
                        pipe.close()
                except OSError:
                    pass
        code = self.proc.returncode
        self._frame("proxy", b"", event="exit", data={"code": code})
        if eng.setup_failed:
            tail = stderr_tail(b"".join(self.stderr_chunks), 3, 200)
            said = f"; its stderr ends: {' | '.join(tail)}" if tail else "; nothing on its stderr"
            raise AgentSetupError(eng.setup_failed + said,
                                  "check the agent command, its config and environment")
        divs = finish(eng, code)
        result = ReplayResult(self.rec, "agent", self.argv, divs, eng.stopped, code,
                              time.monotonic() - t0, dict(eng.stats), self.frames,
                              b"".join(self.stderr_chunks))
        result.timing_hint = timing_hint(eng, result)
        return result


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
        self.pin: LlmPin | None = None
        prepare = _optional("workdir", "prepare_workdir")
        if prepare is not None:
            # the snapshot is copied unless a dir was asked for (--cwd; not the recorded cwd
            # that --recorded-command defaults to)
            self.plan = prepare(rec, cwd, copy_snapshot=given_cwd is None)
            self.cwd = self.plan.cwd or cwd
            self.differences = list(self.plan.differences or [])
            self.notes += list(self.plan.notes or [])
        if not opts.live_llm:
            self._pin(rec, argv, env, opts.journal)
        if opts.write_llm_script and self.pin is None:
            self.notes.append(f"--write-llm-script: nothing written to {opts.write_llm_script}: "
                              f"this agent's model is not pinned (not an agent replay knows how "
                              f"to pin, or its recording says nothing of the model)")

    def _pin(self, rec: Recording, argv: list[str], env: Mapping[str, str] | None,
             journal: str | None = None) -> None:
        pin_llm = _optional("agents", "pin_llm")
        if pin_llm is None:
            return
        try:
            self.pin = pin_llm(rec, list(argv), dict(env) if env is not None else None,
                               **({"journal": journal} if journal else {}))
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
                    options: ReplayOptions | None, origin_files: Sequence[str],
                    engine: Callable[..., AgentEngine] | None = None) -> ReplayResult:
    """replay_session's body; `engine` makes the engine of the session's own run (a fork's),
    not of its origins'."""
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
                              own_model=setup.pin is None, engine=engine).run()
        # a recorded model leg: what the agent asked its model, compared (replay/agents)
        if setup.pin is not None:
            result.divergences[:0] = setup.pin.divergences()
        name_the_mode(result, setup.pin)
        result.command = [*argv, *flags[-1]]
        for o, extra in zip(before, flags, strict=False):
            o.command = [*argv, *extra]
    finally:
        setup.cleanup()
    result.origins = before
    result.notes = found.notes + setup.notes
    result.workdir_differences = setup.differences
    return result
