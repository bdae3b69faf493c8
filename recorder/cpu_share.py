"""The loader's share of the CPU while the relay is busy.

The loader (DuckDB, a second interpreter) competes with the relay threads, the agent and the
client for the same cores; on a 2-core machine that took a quarter of the relay's throughput
(docs/design.md, "Relay hot path"). While the relay is busy, the proxy gives the loader the least
weight the scheduler has, and gives it back once the relay has been quiet for a moment or is
over, so the loader catches up at full speed (and is never held back long on a machine that is
busy with other work: at weight 15 a loader beside a few busy processes gets almost nothing).

The loader runs in a session of its own (recorder/proxy.py), which on Linux gives it an
autogroup of its own: the scheduler first shares the CPU between autogroups, so a process's own
nice value counts only inside its group, and the group's nice (`/proc/PID/autogroup`) is the one
that counts. Any user may raise it and set it back to 0 (only going below 0 needs privilege),
unlike a process's nice value or SCHED_IDLE, which an unprivileged process cannot undo. Where
there is no autogroup (another OS, the cpu controller of a cgroup in use) nothing is changed.
"""

from __future__ import annotations

import os
import threading
import time

# the weakest weight: 15 against 1024 for a group at 0
BACKGROUND_NICE = 19


def _in_effect() -> bool:
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            if f.read().strip() != "1":
                return False
        # the cpu controller of a cgroup other than the root decides instead
        with open("/proc/self/cgroup") as f:
            for line in f:
                _id, controllers, path = line.rstrip("\n").split(":", 2)
                if "cpu" in controllers.split(",") and path != "/":
                    return False
    except (OSError, ValueError):
        return False
    return True


def _set(pid: int, nice: int) -> bool:
    try:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(str(nice))
        return True
    except OSError:  # gone, not ours, or no autogroups here
        return False


class LoaderShare:
    """The CPU share of a loader process (a subprocess.Popen started in a session of its own),
    switched by the spool writer: the least weight while the relay is busy, back to normal once
    it has been quiet a while (recorder/spool.py: SpoolWriter.on_busy), and for good once `end`
    is called (the agent has exited). A quiet relay, an interactive session, keeps the loader at
    full weight, so a machine busy with other work never holds the recording back for long."""

    def __init__(self, proc) -> None:
        self.proc = proc
        self.active = _in_effect()
        self.started = False  # the loader is past its start-up
        self.lowered = False
        self.lock = threading.Lock()

    def busy(self, busy: bool) -> None:
        with self.lock:
            if not self.active or busy == self.lowered or self.proc.returncode is not None:
                return
            # Not before its parent-watch runs (_started).
            if busy and not self.started:
                self.started = _started(self.proc.pid)
                if not self.started:
                    return
            self.lowered = busy
            _set(self.proc.pid, BACKGROUND_NICE if busy else 0)

    def end(self) -> None:
        with self.lock:
            if self.lowered and self.proc.poll() is None:  # (not reaped: still its pid)
                _set(self.proc.pid, 0)
            self.active = self.lowered = False


def watch_parent(parent: int) -> None:
    """In the loader: a thread that gives the loader its weight back once its proxy is gone (a
    proxy killed while it had lowered it). A thread of its own, because it needs almost no CPU:
    a lowered loader beside busy processes gets so little that its own loop can take minutes to
    come round, while this thread gets the GIL within one switch interval of the loader's time."""

    def run() -> None:
        while os.getppid() == parent:
            time.sleep(0.25)
        _set(os.getpid(), 0)
    threading.Thread(target=run, name="parent-watch", daemon=True).start()


def _started(pid: int) -> bool:
    """Whether the loader `pid` has its parent-watch thread (its first, started before its
    imports: recorder/loader_process.py), which gives it its weight back if we die while it is
    lowered; before that, a lowered loader whose proxy is killed could take minutes to start
    on a busy machine."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1]) > 1
    except (OSError, ValueError):
        pass
    return False
