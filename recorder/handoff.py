"""The hand-off from an ending proxy to its loader, seen from a reader.

wire-proxy exits as soon as its agent has exited and the client's input has ended (`--wait`
asks it to stay longer): whatever its loader has not stored yet, the loader (a separate process
in its own session) stores on its own. A reader that opens the file in between would see part
of the session, so every read-only open waits here first: for each spool beside the file whose
proxy is done (its writer closed it) and that a live loader still holds, until the loader has
stored it and deleted it. After NOTE_AFTER_S it says so on stderr, once; after the limit it
gives up with one line (DBLocked, exit 2), so nothing hangs forever. A spool nobody holds any
more (the loader was killed) is left alone: `wire-proxy recover` brings it in.

A spool whose proxy still runs is not waited for: that session is being recorded live (read it
with `wire-show --follow`).
"""

from __future__ import annotations

import os
import sys
import threading
import time

from .errors import DBLocked

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess

WAIT_LIMIT_S = 60.0
NOTE_AFTER_S = 1.0
POLL_S = 0.02
SPOOL_SUFFIX = ".spool"
NOTES_LOG_NAME = "loader.log"

# folder -> (its mtime, spool names in it): a reader attaching thousands of files of one folder
# lists it once, not once a file (creating or deleting a spool changes the folder's mtime). A
# folder changed in the last LISTING_FRESH_NS is listed again: its mtime has the kernel's coarse
# clock, so a spool made within the same tick as the listing would leave it unchanged.
_listings: dict[str, tuple[int, list[str]]] = {}
LISTING_FRESH_NS = 2_000_000_000


def _spools_in(folder: str) -> list[str]:
    try:
        mtime = os.stat(folder).st_mtime_ns
    except OSError:
        return []
    cached = _listings.get(folder)
    if cached is not None and cached[0] == mtime and time.time_ns() - mtime > LISTING_FRESH_NS:
        return cached[1]
    try:
        names = [n for n in os.listdir(folder) if n.endswith(SPOOL_SUFFIX)]
    except OSError:
        names = []
    _listings[folder] = (mtime, names)
    return names


def handed_over(db: str) -> list[tuple[str, str]]:
    """(session id, spool path) of each session of `db` its proxy has handed to a loader that
    is still storing it."""
    from .spool import lock_held, writer_closed

    folder = os.path.dirname(os.path.abspath(db)) or "."
    base = os.path.basename(db) + "."
    found = []
    for name in _spools_in(folder):
        if not name.startswith(base):
            continue
        path = os.path.join(folder, name)
        if writer_closed(path) and lock_held(path):
            found.append((name[len(base):-len(SPOOL_SUFFIX)], path))
    return found


def held_by_another_program(db: str) -> bool:
    """Whether a process other than a wire-recorder writer holds DuckDB's lock on `db` now (a
    user's DuckDB, a long query): the loader then records into a sibling file. Asked without
    taking any lock (F_GETLK); False where that cannot be asked (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    import fcntl
    import struct

    from .spool import lock_held

    if lock_held(db + ".lock"):  # another session's loader: they take turns, no sibling
        return False
    try:
        fd = os.open(db, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        # struct flock on Linux: l_type, l_whence, l_start, l_len, l_pid
        layout = struct.Struct("hhqqi4x")
        got = fcntl.fcntl(fd, fcntl.F_GETLK, layout.pack(fcntl.F_WRLCK, 0, 0, 0, 0))
        return layout.unpack(got)[0] != fcntl.F_UNLCK
    except OSError:
        return False
    finally:
        os.close(fd)


def others_recording(db: str, own_spool: str | None = None) -> bool:
    """Whether a session other than `own_spool`'s is being recorded into `db` now (its spool
    beside the file is held by its live proxy or loader): loaders of one file take turns
    (recorder/loader.py, `DB`)."""
    from .spool import lock_held

    folder = os.path.dirname(os.path.abspath(db)) or "."
    base = os.path.basename(db) + "."
    own = os.path.abspath(own_spool) if own_spool else None
    for name in _spools_in(folder):
        path = os.path.join(folder, name)
        if name.startswith(base) and path != own and lock_held(path):
            return True
    return False


def wait_for_loaders(db: str, limit: float | None = None, note_after: float = NOTE_AFTER_S,
                     prog: str | None = None, skip: str | None = None) -> bool:
    """Return once no loader is storing a handed-over session of `db` (at once when none is);
    raise DBLocked after `limit` seconds (WAIT_LIMIT_S by default). `skip`: a spool not to wait
    for (a loader's own). True when there was one to wait for."""
    pending = [(sid, spool) for sid, spool in handed_over(db) if spool != skip]
    if not pending:
        return False
    from .spool import lock_held

    if limit is None:
        limit = _limit()
    start = time.monotonic()
    noted = False
    while pending:
        sid, spool = pending[0]
        if not lock_held(spool):
            # stored and deleted, or its loader is gone (a leftover for `recover`)
            pending.pop(0)
            continue
        waited = time.monotonic() - start
        if waited >= limit:
            raise DBLocked(f"{db}: the loader is still storing session {sid} after "
                           f"{limit:.0f} s", f"try again later; its notes go to {notes_log()}")
        if not noted and waited >= note_after:
            _note(prog, f"waiting for the loader to finish storing session {sid}")
            noted = True
        time.sleep(POLL_S)
    return True


def exists_after_loaders(path: str) -> bool:
    """Whether `path` exists, once the loaders storing sessions into it are done: a proxy that
    exited at once may leave the file still to be created by its loader."""
    if os.path.exists(path):
        return True
    return wait_for_loaders(path) and os.path.exists(path)


def _limit() -> float:
    try:
        return float(os.environ.get("WIRE_RECORDER_LOADER_WAIT", WAIT_LIMIT_S))
    except ValueError:
        return WAIT_LIMIT_S


def _note(prog: str | None, msg: str) -> None:
    from .edge import say

    say(prog or os.path.basename(sys.argv[0] or "") or "wire-recorder", msg)


def notes_log() -> str:
    """Where a loader writes its notes once its proxy has gone: the data folder's loader.log."""
    from .paths import data_dir

    return os.path.join(data_dir(), NOTES_LOG_NAME)


class LoaderNotes(threading.Thread):
    """In the proxy: relays its loader's notes (a pipe) to its stderr while it runs and follows
    whether the loader says the DB is held by another process (for `--wait`)."""

    def __init__(self, fd: int, held_grace: float):
        super().__init__(name="loader-notes", daemon=True)
        self.fd = fd
        self.held_grace = held_grace
        self.held_since: float | None = None
        self.stored = False  # the loader's session is complete in the DB
        self.chosen = False  # the loader has chosen its file (the DB, or a sibling)
        self.changed = threading.Event()

    def run(self) -> None:
        buf = b""
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                break
            if not data:
                break
            *lines, buf = (buf + data).split(b"\n")
            for line in lines:
                if line == b"held":
                    if self.held_since is None:
                        self.held_since = time.monotonic()
                elif line == b"free":
                    self.held_since = None
                elif line == b"stored":
                    self.stored = True
                elif line == b"chosen":
                    self.chosen = True
                else:
                    try:
                        os.write(2, line + b"\n")
                    except OSError:
                        pass
            self.changed.set()
        os.close(self.fd)  # (only this thread reads it)
        self.changed.set()

    def wait_chosen(self, loader: subprocess.Popen[bytes], timeout: float) -> None:
        """Until the loader has chosen its file (its note on a sibling relayed), has exited, or
        `timeout` s."""
        deadline = time.monotonic() + timeout
        while not self.chosen and loader.poll() is None and self.is_alive():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.changed.wait(min(left, 0.05))
            self.changed.clear()

    def wait_for(self, loader: subprocess.Popen[bytes], timeout: float) -> str:
        """'done' when the loader exited, 'held' when it waited for the DB for held_grace s,
        'timeout' otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            if self.stored or loader.poll() is not None:
                return "done"
            now = time.monotonic()
            held = self.held_since
            if held is not None and now - held >= self.held_grace:
                return "held"
            if now >= deadline:
                return "timeout"
            until = deadline if held is None else min(deadline, held + self.held_grace)
            # its pipe closes when it exits: the wake-up comes from there, not from a poll
            self.changed.wait(max(0.0, min(until - now, 0.005 if not self.is_alive() else 5.0)))
            self.changed.clear()
