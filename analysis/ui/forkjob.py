"""A fork started from `wire-ui` ("answer differently and continue"): `wire-replay SESSION
--fork-at N --answer CHANGE -o BRANCHES.db --json -- AGENT` run as a subprocess of the UI
server, with the agent command the user gave `wire-ui --agent -- ...` (never one from a
recording).

Why a subprocess: analysis/ does not import replay/ (the walls), and a fork runs the agent for
minutes; the UI server only waits for its exit and reads its JSON report.

Why the branches go to their own .db (`--forks`, default the data folder's forks.db) and not
into the recording: the UI stays read-only towards recordings, and a recording the UI (or
another reader) holds open could not take a writer's lock. The branch keeps its links to the
parent (its tags fork_of, fork_at, fork_change, as `wire-replay --fork-at` stores them), and the
branches file joins the UI's index, so the branch opens as soon as the fork is done.

One fork at a time: two would fight over the branches file's write lock.

wire-ui closing (Ctrl-C, SIGTERM, SIGHUP: ui.closing) stops a running fork: wire-replay runs in
a process group of its own, which gets SIGINT (the replay's own clean-up ends its agent, which
runs in a group of its own too), then, after STOP_WAIT_S, SIGKILL, with the groups of the
processes it had started. An interrupted fork stores no branch: wire-replay stores the branch
once its run is over, in one transaction (replay.fork), so forks.db holds a whole branch or none
of it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from wire_recorder.recorder.visible import visible

from . import closing

# the tail of the fork's stderr kept to show (its progress and its error line)
TAIL = 4000
# how long a closing wire-ui waits for an interrupted fork to end (then kills it)
STOP_WAIT_S = 30.0


def replay_command() -> list[str]:
    """`wire-replay` of this install: the script beside this interpreter, else the same entry
    point through this interpreter (a wheel installed without scripts on PATH)."""
    script = os.path.join(os.path.dirname(sys.executable), "wire-replay")
    if os.path.isfile(script) and os.access(script, os.X_OK):
        return [script]
    return [sys.executable, "-P", "-c",  # -P: not the user's folder on the path
            "import sys; from wire_recorder.replay.cli import main; sys.exit(main())"]


@dataclass
class Job:
    id: str
    argv: list[str]
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    state: str = "running"  # running, done, failed, stopped (wire-ui closed under it)
    stderr: str = ""
    summary: str = ""
    error: str = ""
    branch: dict | None = None  # {session_id, path, key, at, change}
    proc: subprocess.Popen | None = None
    thread: threading.Thread | None = None

    def to_dict(self) -> dict:
        return {"job": self.id, "state": self.state,
                "seconds": round((self.ended or time.monotonic()) - self.started, 1),
                "progress": self.stderr.strip().splitlines()[-1:] if self.stderr else [],
                "summary": self.summary, "error": self.error, "branch": self.branch}


class Forks:
    """The forks of one `wire-ui`: started, followed, their branches added to the index."""

    def __init__(self, agent: Sequence[str] | None, store: str,
                 on_branch: Callable[[str, str], str | None], cwd: str | None = None,
                 options: Sequence[str] = ()):
        self.agent = list(agent or [])
        self.options = list(options)  # wire-replay's, given after --agent
        self.store = os.path.abspath(store)
        self.on_branch = on_branch  # (branches .db, session id) -> the branch's UI key
        self.cwd = cwd
        self.jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self.closing = False  # wire-ui is closing: a fork that ends now joins no index

    def describe(self) -> dict:
        return {"agent": shlex.join(self.agent) if self.agent else None, "store": self.store,
                "how": None if self.agent else
                "start wire-ui with the agent command to fork with, after --agent: "
                "wire-ui SESSION.db --agent -- kimi --wire"}

    def start(self, source_file: str, session_id: str, n: int, answer: str) -> Job:
        if not self.agent:
            raise ForkRefused(self.describe()["how"])
        with self._lock:
            if self.closing:
                raise ForkRefused("wire-ui is closing")
            if any(j.state == "running" for j in self.jobs.values()):
                raise ForkRefused("a fork is running: wait until it is done")
            os.makedirs(os.path.dirname(self.store) or ".", exist_ok=True)
            # NAME=VALUE and an absolute path: no value can pass for an option
            argv = [*replay_command(), os.path.abspath(source_file), f"--session={session_id}",
                    f"--fork-at={n}", f"--answer={answer}", f"--output={self.store}", "--json",
                    *self.options, "--", *self.agent]
            job = Job(secrets.token_hex(8), argv)
            self.jobs[job.id] = job
        job.thread = threading.Thread(target=self._run, args=(job,), daemon=True,
                                      name=f"wire-ui-fork-{job.id}")
        job.thread.start()
        return job

    def stop(self) -> bool:
        """wire-ui is closing: a fork still running is interrupted as Ctrl-C would (SIGINT: the
        replay's own clean-up runs, where SIGTERM would end it at once), and nothing it started
        is left running. True when a fork was stopped before its branch was stored."""
        self.closing = True
        stopped = False
        for job in list(self.jobs.values()):
            proc = job.proc
            if job.state == "running" and proc is not None and proc.poll() is None:
                groups = _groups_below(proc.pid)  # the agent's, while wire-replay is there
                _signal_group(proc, signal.SIGINT)
                try:
                    proc.wait(timeout=STOP_WAIT_S)
                except subprocess.TimeoutExpired:
                    groups |= _groups_below(proc.pid)
                    _signal_group(proc, signal.SIGKILL)
                    proc.wait()
                # what is left of its groups (an agent its clean-up did not reach)
                for pgid in groups | {proc.pid}:
                    with contextlib.suppress(OSError):
                        os.killpg(pgid, signal.SIGKILL)
            # its thread ends before the interpreter does (one cut off at exit can abort it)
            if job.thread is not None:
                job.thread.join(timeout=STOP_WAIT_S)
            if job.state == "stopped":
                stopped = True
        return stopped

    def get(self, job_id: str) -> Job:
        return self.jobs[job_id]

    def _run(self, job: Job) -> None:
        try:
            # a group of its own: stopped by wire-ui as a whole (stop), never by a Ctrl-C
            # meant for wire-ui reaching it first
            proc = job.proc = subprocess.Popen(job.argv, stdin=subprocess.DEVNULL,
                                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                               cwd=self.cwd, start_new_session=True)
        except OSError as e:
            job.state, job.error = "failed", f"cannot start wire-replay: {e.strerror}"
            job.ended = time.monotonic()
            return
        out: list[bytes] = []
        reader = threading.Thread(target=lambda: out.append(proc.stdout.read()  # type: ignore[union-attr]
                                                            ), daemon=True)
        reader.start()
        assert proc.stderr is not None
        for line in iter(proc.stderr.readline, b""):
            job.stderr = (job.stderr + visible(line.decode("utf-8", "replace"), lines=True))[-TAIL:]
        code = proc.wait()
        reader.join()
        try:
            with closing.quietly():  # its branch joining the index, cut short by wire-ui closing
                self._finish(job, code, b"".join(out))
        finally:
            job.ended = time.monotonic()

    def _finish(self, job: Job, code: int, stdout: bytes) -> None:
        try:
            report: Any = orjson.loads(stdout) if stdout.strip() else None
        except orjson.JSONDecodeError:
            report = None
        fork = report.get("fork") if isinstance(report, dict) else None
        if code == 0 and isinstance(fork, dict) and fork.get("session_id"):
            # (wire-ui closing: no index to join)
            key = None if self.closing else self.on_branch(str(fork["path"]),
                                                            str(fork["session_id"]))
            job.branch = {k: fork.get(k) for k in ("session_id", "path", "at", "change",
                                                   "applied")} | {"key": key}
            job.summary = (f"branch {fork['session_id']} stored in {fork['path']}")
            job.state = "done"
            return
        job.state = "failed"
        if self.closing:
            job.state, job.error = "stopped", "stopped: wire-ui was closing (no branch stored)"
        elif isinstance(fork, dict):  # ran, never reached the fork point
            job.error = (f"not forked: the replay never reached {fork.get('at')} "
                         f"(it stopped: {report.get('stopped') or 'the agent never asked it'})")
        else:
            lines = [ln for ln in job.stderr.strip().splitlines() if ln.strip()]
            job.error = lines[-1] if lines else f"wire-replay exited with {code}"


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except OSError:
        with contextlib.suppress(OSError):
            proc.send_signal(sig)


def _groups_below(pid: int) -> set[int]:
    """The process groups of `pid`'s descendants other than its own (Linux: /proc; elsewhere
    none, and the replay's own clean-up is what ends its agent)."""
    parent: dict[int, int] = {}
    group: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
                fields = f.read().rpartition(b")")[2].split()
        except OSError:
            continue
        parent[int(name)], group[int(name)] = int(fields[1]), int(fields[2])
    below, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in below]
        below.update(kids)
        todo += kids
    return {group[c] for c in below} - {group.get(pid, pid), os.getpgrp()}


class ForkRefused(ValueError):
    """A fork the UI does not start (no agent command, one already running): answered 409."""


def branch_key(server: Any, db: str, session_id: str) -> str | None:
    """The UI key of a branch just stored: its .db joins the index (once), which is rebuilt."""
    cat = server.catalog
    db = os.path.abspath(db)
    with server._rebuilding:  # not at the same time as a background rebuild
        if db not in (os.path.abspath(os.path.expanduser(s)) for s in cat.specs):
            cat.specs.append(db)
        cat.build()
    found = [r["key"] for r in cat.rows
             if r.get("session_id") == session_id
             and os.path.abspath(r.get("source_file") or "") == db]
    return found[0] if found else None
