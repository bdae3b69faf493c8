"""wire-proxy as a library: spawn the agent, relay byte for byte, spool every chunk, hand the
spool to a loader process that writes DuckDB.

The agent is spawned before anything the relay does not need at that moment is imported or
opened (the spool, its JSON, the relay threads, the loader process): measured here, each module
imported first delays every IDE start by its import time.
"""

from __future__ import annotations

import os
import sys
import time

from . import __version__
from .edge import NOTES_LOG_ENV, PROXY, say
from .errors import AgentStartError, UsageError
from .paths import check_existing_db, default_db_path, spool_path_for, writable_dir

try:
    # the C module: `signal` builds its IntEnums when imported (with `threading`, ~1.5 ms
    # measured here), which waits until the agent is spawned (_import_after_spawn)
    import _signal as _sig
except ImportError:  # not CPython
    import signal as _sig

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    import subprocess
    import threading

    from .spool import SpoolWriter

FORWARDED_SIGNALS = (_sig.SIGINT, _sig.SIGTERM, _sig.SIGHUP)
PUMP_DRAIN_AFTER_EXIT_S = 2.0
# A client that hangs up (closes the proxy's stdout) ends the session: the agent's stdin is
# closed at once, SIGTERM goes to its process group after HANGUP_TERM_S if it still runs, SIGKILL
# HANGUP_KILL_S later. Meanwhile what it writes is read (so it never blocks on a full pipe) and
# recorded up to HANGUP_RECORD_BYTES; the rest is counted in a recording_gap.
HANGUP_TERM_S = 1.0
HANGUP_KILL_S = 3.0
HANGUP_RECORD_BYTES = 64 << 10
HANGUP_GAP = "not recorded: the client had hung up"
# A DB held by another process delays the proxy's exit by at most this much: the loader then
# finishes in the background (or leaves the spool to the next load).
HELD_GRACE_S = 1.0
# A DB held by a program other than wire-recorder when the proxy ends: it waits up to this long
# for its loader to choose the sibling file, so the note saying so reaches its stderr (the
# loader waits LOCKED_AT_START_S for the lock after its start-up).
CHOICE_WAIT_S = 5.0


class ProxyOptions:
    """What `wire-proxy` was asked for. A plain class, not a dataclass: `dataclasses` (and the
    `inspect` it imports) would be imported before the agent is spawned."""

    def __init__(self, command: list[str], db: str | None = None, name: str | None = None,
                 tags: dict[str, str] | None = None, protocol: str | None = None,
                 record: bool = True, redact: bool = True, snapshot_workdir: bool = False,
                 quiet: bool = False, loader_wait_s: float = 0.0,
                 max_pending: int | None = None, no_loss: bool = False, llm: bool = False):
        self.command = command
        self.db = db
        self.name = name
        self.tags: dict[str, str] = {} if tags is None else tags
        self.protocol = protocol
        self.record = record
        self.redact = redact  # the loader redacts the stored copy (docs/design.md, "Redaction")
        # the loader stores the work dir's files, not only a manifest
        self.snapshot_workdir = snapshot_workdir
        self.quiet = quiet
        # 0: exit at once and leave what is not stored yet to the loader (recorder/handoff.py)
        self.loader_wait_s = loader_wait_s
        self.max_pending = max_pending
        self.no_loss = no_loss  # slow the relay down rather than drop chunks from the recording
        self.llm = llm  # also stand between the agent and its model (recorder/llm_leg.py)

    def __repr__(self) -> str:
        return f"ProxyOptions({vars(self)!r})"


def new_session_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + "-" + os.urandom(4).hex()


class _Notes:
    def __init__(self, quiet: bool):
        self.quiet = quiet

    def __call__(self, msg: str, *, always: bool = False) -> None:
        if always or not self.quiet:
            say(PROXY, msg)


def _explicit_db(opts: ProxyOptions) -> str | None:
    """The DB the user named, checked: a bad one is a user error before the agent starts."""
    explicit = opts.db or os.environ.get("WIRE_PROXY_DB")
    if explicit:
        check_existing_db(explicit)
    return explicit


def _open_spool(opts: ProxyOptions, explicit: str | None, session_id: str, meta: dict,
                note: _Notes) -> tuple[SpoolWriter | None, str | None]:
    """Pick the DB and create its spool; fall back to the data folder when the chosen place is
    not writable. Returns (spool writer or None, db path or None)."""
    from .spool import SpoolWriter

    candidates = []
    if explicit:
        candidates.append(os.path.abspath(explicit))
    candidates.append(default_db_path(session_id, opts.name))
    last_error = "no writable place"
    for i, db in enumerate(candidates):
        if writable_dir(db) is None:
            last_error = f"cannot write to {os.path.dirname(db)}"
            continue
        spool = spool_path_for(db, session_id)
        try:
            writer = SpoolWriter(spool, dict(meta, db=db), no_loss=opts.no_loss, **(
                {"max_pending": opts.max_pending} if opts.max_pending else {}))
        except OSError as e:
            last_error = f"cannot create {spool}: {e.strerror}"
            continue
        if i > 0 and explicit:
            note(f"{last_error}; recording into {db} instead", always=True)
        return writer, db
    note(f"recording disabled ({last_error}); relaying only", always=True)
    return None, None


def _start_loader(spool_path: str, note: _Notes):
    """The loader process and the read end of the pipe that carries its notes and its word on
    the DB (`held` / `free`): the client's stderr is never the loader's, so a loader finishing in
    the background does not keep the client waiting for EOF there."""
    # The loader runs in the interpreter that runs us, where wire_recorder is installed. (No
    # PYTHONPATH of our own: the package's parent folder would put its `recorder`, `replay` and
    # `analysis` on the path as top-level names.)
    import subprocess

    from .handoff import notes_log
    from .spool import lock_shared

    # A descriptor holding a shared lock on the spool, for the loader to inherit: the lock then
    # passes from us to the loader without a gap, so a reader that comes after we exit but before
    # the loader has started up sees a session being stored, not a leftover
    # (recorder/handoff.py). The loader keeps it, unaware, until it exits.
    hold = lock_shared(spool_path)
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            # -P: nothing from the user's folder on the path (a duckdb.py there would be imported
            # instead of DuckDB: the loader failed silently)
            [sys.executable, "-P", "-m", "wire_recorder.recorder.loader_process", spool_path],
            stdin=subprocess.DEVNULL, stdout=w, stderr=w,
            pass_fds=() if hold is None else (hold,),
            # Its own session: neither a Ctrl-C for the agent nor the terminal's hang-up stops
            # the recording mid-write, also after we have exited.
            start_new_session=True,
            # once we are gone (no reader on the pipe), its notes go to this log
            env=dict(os.environ, **{NOTES_LOG_ENV: notes_log()}),
        )
    except OSError as e:
        os.close(r)
        note(f"cannot start the recorder process ({e.strerror}); the spool {spool_path} "
             f"keeps the session: run `{PROXY} recover {spool_path}` later", always=True)
        return None, None
    finally:
        os.close(w)
        if hold is not None:
            os.close(hold)
    return proc, r


class _signals_for_main_thread_only:
    """Threads started inside block the forwarded signals (a new thread inherits its creator's
    mask), so the kernel delivers them to the main thread only: a relay thread's read or write
    is never interrupted by one, and the main thread's wait is (the forwarding itself works
    whichever thread the C handler runs in: _SignalForwarder). Nothing may be spawned inside,
    or the child would start with the signals blocked. (A class, not contextlib: one import
    less before the agent is spawned.)"""

    def __enter__(self) -> None:
        self.old = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)

    def __exit__(self, *exc: object) -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, self.old)


class _Agent:
    """The agent spawned with os.posix_spawnp: the part of subprocess.Popen the proxy uses,
    without importing subprocess (and the locale, re, selectors it imports: ~6 ms measured here
    from a wheel install) before the spawn. As with every posix_spawn on glibc (Rust's Command
    too), the agent starts with glibc's two internal signals (32, 33) ignored, which its own
    libc sets up again when it needs them."""

    def __init__(self, command: list[str], env=None):
        fds: list[int] = []
        try:
            for _ in range(3):
                fds.extend(os.pipe())  # non-inheritable: only the dup2 copies reach the agent
            if min(fds) < 3:
                # a closed stdio fd of ours was reused: dup2 onto itself would keep it
                # close-on-exec, the case subprocess takes care of
                raise _UseSubprocess
            in_r, in_w, out_r, out_w, err_r, err_w = fds
            self.pid = os.posix_spawnp(
                command[0], command, os.environ if env is None else env,
                file_actions=[(os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_DUP2, out_w, 1),
                              (os.POSIX_SPAWN_DUP2, err_w, 2)],
                # Its own process group: signals reach it once, forwarded by us, never twice.
                setpgroup=0,
                # what Python ignores for itself, the agent gets by default (as subprocess does)
                setsigdef=(_sig.SIGPIPE, _sig.SIGXFSZ),
            )
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        for fd in (in_r, out_w, err_w):
            os.close(fd)
        self.stdin = open(in_w, "wb", buffering=0)
        self.stdout = open(out_r, "rb", buffering=0)
        self.stderr = open(err_r, "rb", buffering=0)
        self.returncode: int | None = None

    def _reaped(self, flags: int) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped elsewhere: its status is lost (as in subprocess)
                self.returncode = 0
                return 0
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def poll(self) -> int | None:
        return self._reaped(os.WNOHANG)

    def wait(self) -> int:
        rc = self._reaped(0)
        assert rc is not None
        return rc

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # never a pid the system may have reused
            os.kill(self.pid, signum)


class _UseSubprocess(Exception):
    pass


def _spawn(command: list[str], env=None) -> _Agent | subprocess.Popen:
    if hasattr(os, "posix_spawnp"):
        try:
            return _Agent(command, env)
        except _UseSubprocess:
            pass
    import subprocess

    return subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        bufsize=0, process_group=0, env=env)


class _SignalForwarder:
    """Passes SIGINT, SIGTERM and SIGHUP on to the agent's process group, from a thread of its
    own that reads the signal wakeup fd, never from a Python-level signal handler.

    A Python handler runs only when the main thread notices the signal: at an eval-breaker
    check, or when a system call it is in fails with EINTR. A signal whose C handler runs just
    before the main thread enters a blocking call is noticed only when that call returns by
    itself (for the proxy's wait: when the agent exits). The C handler always writes the
    signal's number to the wakeup fd, whichever thread it runs in, so reading that fd depends on
    nothing the main thread does. (The agent has the same race if it sleeps with a handler: a
    signal that lands between its last bytecode and the sleep's system call waits for the sleep
    to end, seen here with gdb in a test agent.)"""

    def __init__(self, forward) -> None:
        self.forward = forward
        self.r, self.w = os.pipe()
        os.set_blocking(self.w, False)  # what set_wakeup_fd requires
        self.old_handlers: dict[int, object] = {}
        self.old_wakeup: int | None = None

    def install(self) -> None:
        try:
            self.old_wakeup = signal.set_wakeup_fd(self.w, warn_on_full_buffer=False)
        except ValueError:  # not the main thread (a library caller): nothing is forwarded
            os.close(self.r)
            return
        for sig in FORWARDED_SIGNALS:
            try:
                self.old_handlers[sig] = signal.signal(sig, _noted)
            except (OSError, ValueError):
                pass
        threading.Thread(target=self._run, name="signals", daemon=True).start()

    def _run(self) -> None:
        wanted = set(FORWARDED_SIGNALS)
        try:
            while data := os.read(self.r, 512):
                for signum in data:
                    if signum in wanted:
                        self.forward(signum)
        except OSError:
            pass
        finally:
            os.close(self.r)

    def uninstall(self) -> None:
        """Back to what was there before (run_proxy may be called in a longer-lived process)."""
        for sig, old in self.old_handlers.items():
            try:
                signal.signal(sig, old)  # type: ignore[arg-type]
            except (OSError, ValueError, TypeError):
                pass
        if self.old_wakeup is not None:
            signal.set_wakeup_fd(self.old_wakeup)
        os.close(self.w)  # the thread reads EOF and ends


def _noted(signum, frame) -> None:
    """The Python-level handler: the forwarding happens in _SignalForwarder's thread."""


def _import_after_spawn() -> None:
    """What the relay needs once the agent runs, imported then (see _sig)."""
    global signal, threading
    import signal
    import threading


def run_proxy(opts: ProxyOptions) -> int:
    if not opts.command:
        raise UsageError("no agent command given", f"usage: {PROXY} [OPTIONS] -- CMD [ARGS...]")
    note = _Notes(opts.quiet)
    explicit = _explicit_db(opts) if opts.record else None
    session_id = new_session_id()
    mono_start = time.monotonic_ns()
    started_wall_ns = time.time_ns()
    cwd = os.getcwd()
    leg, agent_env, leg_note = None, None, None
    if opts.llm:
        from .llm_leg import prepare

        leg, agent_env, leg_note = prepare(opts.command, os.environ)
    try:
        proc = _spawn(opts.command, agent_env)
    except OSError as e:
        raise AgentStartError(f"cannot start {opts.command[0]!r}: {e.strerror or e}",
                        "check the command after --") from None
    # From here on the agent runs; what it writes waits in its pipes until the pumps start, and
    # nothing is relayed before the spool is there to record it.
    _import_after_spawn()
    from .handoff import LoaderNotes, held_by_another_program
    from .relay import Pump
    from .spool import A2C, C2A, C2A_LATE, STDERR

    meta = {
        "session_id": session_id,
        "name": opts.name,
        "tags": opts.tags,
        "command": opts.command,
        "cwd": cwd,
        "protocol": opts.protocol,
        "started_wall_ns": started_wall_ns,
        "mono_start_ns": mono_start,
        "proxy_version": __version__,
        "proxy_pid": os.getpid(),
        "host": os.uname().nodename,  # what socket.gethostname() says, without importing it
        "quiet": opts.quiet,  # the loader's notes (protocol anomalies) follow -q too
        "redact": opts.redact,
        "snapshot_workdir": opts.snapshot_workdir,
    }
    with _signals_for_main_thread_only():
        writer, db = (_open_spool(opts, explicit, session_id, meta, note) if opts.record
                      else (None, None))
    unrecorded = [0, 0]  # frames, bytes relayed while recording was off
    agent_done = threading.Event()

    def recorder_for(stream: int):
        if writer is not None:
            put = writer.put
            if stream == C2A:
                # what the client sends once the agent is gone is recorded as such
                return lambda data: put(C2A_LATE if agent_done.is_set() else C2A, data)
            return lambda data: put(stream, data)

        def count(data: bytes) -> None:
            unrecorded[0] += data.count(b"\n")
            unrecorded[1] += len(data)
        return count if opts.record else None

    if writer is not None:
        writer.event("spawn", argv=opts.command, cwd=meta["cwd"], pid=proc.pid)
        note(f"recording session {session_id} into {db}")
    if leg is not None:
        leg.start(writer.event if writer is not None else None)
    if leg_note:
        note(leg_note, always=leg is None)

    def forward(signum: int) -> None:
        # Recorded before it is sent: a replay re-sends it before the agent's answer to it.
        if writer is not None:
            writer.event("signal", signal=signal.Signals(signum).name, forwarded_to=proc.pid)
        try:
            os.killpg(proc.pid, signum)
        except OSError:
            try:
                proc.send_signal(signum)
            except OSError:
                pass

    signals = _SignalForwarder(forward)
    with _signals_for_main_thread_only():
        signals.install()

    def event(name: str, **data):
        if writer is not None:
            writer.event(name, **data)

    # all three are pipes (Popen above): never None
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    agent_stdin = proc.stdin
    stop_r, stop_w = os.pipe()  # ends the c2a pump from another thread (hang-up, agent exit)
    hung_up = threading.Event()

    def client_eof():
        if hung_up.is_set() and not agent_done.is_set():
            event("agent_stdin_closed", reason="client hung up")
        elif not pumps[0].stopped:
            event("client_eof")
        try:
            agent_stdin.close()
        except OSError:
            pass

    def hangup_sequence():
        for sig, delay in ((signal.SIGTERM, HANGUP_TERM_S), (signal.SIGKILL, HANGUP_KILL_S)):
            if agent_done.wait(delay):
                return
            event("signal", signal=sig.name, forwarded_to=proc.pid, reason="client hung up")
            try:
                os.killpg(proc.pid, sig)
            except OSError:
                pass

    def client_hangup(e: OSError) -> None:
        event("client_hangup", where="write to client stdout", error=e.strerror or str(e))
        hung_up.set()
        os.write(stop_w, b"x")  # the c2a pump closes the agent's stdin: EOF first
        threading.Thread(target=hangup_sequence, name="hangup", daemon=True).start()

    a2c_record = recorder_for(A2C)
    if writer is not None and a2c_record is not None:
        put, after_hangup = writer.put, [0]

        def a2c_record(data: bytes) -> None:
            if hung_up.is_set():
                if after_hangup[0] >= HANGUP_RECORD_BYTES:
                    writer.discard(A2C, data, HANGUP_GAP)
                    return
                after_hangup[0] += len(data)
            put(A2C, data)

    pumps = [
        Pump("c2a", 0, agent_stdin.fileno(), recorder_for(C2A), on_eof=client_eof,
             on_dst_error=lambda e: event("proxy_error", where="write to agent stdin",
                                          error=e.strerror or str(e)),
             on_src_error=lambda e: event("proxy_error", where="read client stdin",
                                          error=e.strerror or str(e)),
             stop_fd=stop_r),
        Pump("a2c", proc.stdout.fileno(), 1, a2c_record,
             on_eof=lambda: event("agent_stdout_eof"), on_dst_error=client_hangup),
        Pump("stderr", proc.stderr.fileno(), 2, recorder_for(STDERR),
             on_eof=lambda: event("agent_stderr_eof")),
    ]
    with _signals_for_main_thread_only():
        for p in pumps:
            p.start()
    # The loader (a second interpreter) starts once the relay runs: the client's first frames
    # do not wait for its fork, and it reads the spool from the start whenever it comes.
    loader, notes_fd = _start_loader(writer.path, note) if writer is not None else (None, None)
    notes = LoaderNotes(notes_fd, HELD_GRACE_S) if notes_fd is not None else None
    share = None
    if loader is not None and writer is not None:
        from .cpu_share import LoaderShare

        # the loader yields the CPU while the relay is busy (recorder/cpu_share.py)
        share = LoaderShare(loader)
        writer.on_busy = share.busy
    if notes is not None:
        with _signals_for_main_thread_only():
            notes.start()

    while True:
        try:
            rc = proc.wait()
            break
        except KeyboardInterrupt:  # only if a handler could not be installed
            continue
    agent_done.set()
    if share is not None:
        share.end()  # the relay is over: the loader catches up at full speed
    deadline = time.monotonic() + PUMP_DRAIN_AFTER_EXIT_S
    for p in pumps[1:]:
        p.join(max(0.0, deadline - time.monotonic()))
    code = 128 - rc if rc < 0 else rc
    if rc < 0:
        event("exit", code=None, signal=signal.Signals(-rc).name, signum=-rc, exit_status=code)
    else:
        event("exit", code=rc, signal=None, signum=None, exit_status=code)
    # What the client sent meanwhile is taken in and recorded (after the exit row: never
    # delivered), then the c2a pump stops: nothing it reads later goes unrecorded.
    os.write(stop_w, b"x")
    pumps[0].join(max(0.5, deadline - time.monotonic()))
    if leg is not None:
        leg.stop()  # an exchange still open is stored before the spool closes (cut if streaming)

    if writer is not None:
        writer.set_exit(code)
        writer.close(exit_status=code)
        if writer.lost_frames or writer.lost_chunks:
            note(f"{writer.lost_frames} frames ({writer.lost_bytes} bytes) were relayed but could "
                 f"not be recorded ({writer.write_error or 'disk too slow'}); the gap is marked "
                 "in the recording", always=True)
        if writer.discarded_frames or writer.discarded_bytes:
            note(f"the client hung up: the agent's last {writer.discarded_frames} frames "
                 f"({writer.discarded_bytes} bytes) were not recorded (counted in the recording)")
        if loader is not None and notes is not None:
            if not notes.chosen and db is not None and held_by_another_program(db):
                # the loader is about to record into a sibling file: its note is for the
                # user's terminal, not only loader.log
                notes.wait_chosen(loader, CHOICE_WAIT_S)
            how = notes.wait_for(loader, opts.loader_wait_s)
            if how == "done" and not notes.stored:
                notes.join(1.0)  # its last notes are on their way through the pipe
            if how == "held":
                note(f"{db} cannot be written now (in use by another process, or its disk is "
                     f"full): the recording is saved in the background once it can be (pid "
                     f"{loader.pid}); until then it is in {writer.path}", always=True)
            elif how == "timeout" and opts.loader_wait_s > 0:
                note(f"still saving the recording in the background (pid {loader.pid}) into {db}",
                     always=True)
    elif opts.record:
        note(f"{unrecorded[0]} frames ({unrecorded[1]} bytes) were relayed but not recorded",
             always=True)
    # Only now: until the loader is handed the session, a Ctrl-C meant for the agent must not
    # end the proxy with a KeyboardInterrupt.
    signals.uninstall()
    stop_pipe = [lambda: os.close(stop_r), lambda: os.close(stop_w)]
    _close_after([(pumps[0], stop_pipe), (pumps[1], [proc.stdout.close]),
                  (pumps[2], [proc.stderr.close])])
    return code


def _close_after(owned: list) -> None:
    """Close what each pump that has ended read from, given as (pump, closers) (run_proxy may be
    called in a longer-lived process); a pump still reading (a grandchild holds the agent's
    pipe) keeps its fd: a closed number is reused at once."""
    for pump, closers in owned:
        if pump.is_alive():
            continue
        for close in closers:
            try:
                close()
            except OSError:
                pass
