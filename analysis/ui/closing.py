"""How `wire-ui` ends: Ctrl-C, SIGTERM or SIGHUP stop a running fork (forkjob), interrupt the
DuckDB queries its threads are in, wait for those threads, and exit 130, 143 or 129.

Why the threads are waited for: the index is built, and requests are answered, in daemon
threads that spend their time inside DuckDB with the GIL released. An interpreter that
finalizes while one of them is in there ends it when it asks for the GIL back (pthread_exit, a
forced unwind through DuckDB's C++), which DuckDB catches without rethrowing: "FATAL: exception
not rethrown", SIGABRT, exit -6 (measured: every Ctrl-C during the search-text pass of a
440,000-frame recording). So every connection those threads use is registered here
(`interruptible`), interrupted on closing (again and again: an interrupt that falls between two
statements is lost), the index's loops stop at their next check (`check`), and wire-ui waits
(SETTLE_S at most) for the threads to leave DuckDB (`using_duckdb`), so that their own clean-up
(their spill folders, the index's worker processes) is done. Then the process ends with
os._exit instead of finalizing: a thread that has left its block may still release a
connection its error's traceback held (waiting alone: 3 of 5 such ends still aborted), and nothing
is left for the finalization to do (stdout and stderr are flushed first).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

# how long a closing wire-ui waits for its threads to leave DuckDB once interrupted
SETTLE_S = 30.0
# how often the interrupt is sent again while they have not
AGAIN_S = 0.1
# SIGTERM and SIGHUP end wire-ui as Ctrl-C does, with their own exit codes (128 + the signal)
ENDING: dict[int, int] = {signal.SIGTERM: 143, signal.SIGHUP: 129}


class Closed(Exception):
    """wire-ui is closing: what a thread was doing is abandoned."""


_closing = threading.Event()
_cond = threading.Condition()
_busy: set[Any] = set()  # what has .interrupt(): DuckDB connections, index worker processes
_inside: dict[threading.Thread, int] = {}  # threads in a using_duckdb block (nested: a count)
_signal: int | None = None


def reset() -> None:
    """A new wire-ui (in this process) starts open."""
    global _signal
    _closing.clear()
    _signal = None


def closed() -> bool:
    return _closing.is_set()


def check() -> None:
    if _closing.is_set():
        raise Closed


@contextlib.contextmanager
def using_duckdb() -> Iterator[None]:
    """The calling thread may be inside DuckDB until the block ends (a connection opened,
    used and closed in it): closing waits for it to leave. None is entered once closing."""
    check()
    with _counted():
        yield


@contextlib.contextmanager
def _counted() -> Iterator[None]:
    me = threading.current_thread()
    with _cond:
        _inside[me] = _inside.get(me, 0) + 1
    try:
        yield
    finally:
        with _cond:
            _inside[me] -= 1
            if not _inside[me]:
                del _inside[me]
            _cond.notify_all()


@contextlib.contextmanager
def quietly() -> Iterator[None]:
    """A thread's outermost DuckDB work: using_duckdb, and what wire-ui closing cut short
    (Closed, the interrupted statement's error) ends the block quietly. Caught inside the
    block, not after it: the error's traceback holds the frames that hold the connection, whose
    release is DuckDB work too, done before closing is told the thread has left."""
    with _counted():
        try:
            yield
        except Exception:
            if not _closing.is_set():
                raise


@contextlib.contextmanager
def interruptible(thing: Any) -> Iterator[Any]:
    """Register `thing` (a DuckDB connection, or anything with .interrupt()) while it is used;
    wire-ui closing interrupts it. Leave before the connection is closed."""
    add(thing)
    try:
        yield thing
    finally:
        discard(thing)


def add(thing: Any) -> None:
    check()
    with _cond:
        _busy.add(thing)


def discard(thing: Any) -> None:
    with _cond:
        _busy.discard(thing)


def _interrupt_all() -> None:
    with _cond:
        for thing in list(_busy):
            try:
                thing.interrupt()
            except Exception:  # noqa: BLE001, S110 - one already closing: nothing to stop
                pass


def on_signals() -> dict[int, Any]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread, as Ctrl-C does (the same
    clean-up); the exit code says which it was. Returns the handlers to put back (Ctrl-C's
    with them)."""
    def ended(signum: int, frame: Any) -> None:
        global _signal
        _signal = signum
        raise KeyboardInterrupt

    previous: dict[int, Any] = {signal.SIGINT: signal.getsignal(signal.SIGINT)}
    for s in ENDING:
        previous[s] = signal.signal(s, ended)
    return previous


def close_down(server: Any, previous: dict[int, Any]) -> None:
    """The server stopped serving (a signal, or its loop ended): stop the fork, close the
    socket, interrupt and wait for the threads. A second Ctrl-C meanwhile is not a way out of
    it (the fork's clean-up is bounded by forkjob.STOP_WAIT_S, this one by SETTLE_S)."""
    from wire_recorder.recorder.edge import say

    for s in (signal.SIGINT, *ENDING):
        signal.signal(s, signal.SIG_IGN)
    try:
        _closing.set()
        _interrupt_all()
        if server.forks is not None and server.forks.stop():
            say("wire-ui", "the fork that was running is stopped: no branch was stored")
        server.server_close()
        until = time.monotonic() + SETTLE_S
        with _cond:
            while _inside and time.monotonic() < until:
                _cond.wait(AGAIN_S)
                for thing in list(_busy):  # again: one that fell between two statements
                    with contextlib.suppress(Exception):
                        thing.interrupt()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def exit_code(code: int) -> int:
    """The CLI's exit code, after close_down: 143 or 129 for SIGTERM or SIGHUP (Ctrl-C is 130
    already); a wire-ui that served ends here (see the module's doc)."""
    if code == 130 and _signal in ENDING:
        code = ENDING[_signal]
    if _closing.is_set():
        for f in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                f.flush()
        os._exit(code)
    return code
