"""Where recordings go. Kept import-light: it runs before the agent is spawned."""

from __future__ import annotations

import os
import stat
import time

from .errors import UserError

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs ~2 ms to import, paid before the agent is spawned
    from typing import IO, Any

DUCKDB_MAGIC = b"DUCK"  # bytes 8..12 of every DuckDB database file


def data_dir() -> str:
    """The data folder: $WIRE_RECORDER_HOME, else $XDG_DATA_HOME/wire-recorder,
    else ~/.local/share/wire-recorder."""
    home = os.environ.get("WIRE_RECORDER_HOME")
    if home:
        return home
    xdg = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(xdg, "wire-recorder")


def default_db_path(session_id: str, name: str | None = None) -> str:
    """One new file per session, so two IDE windows never fight over one file."""
    day = time.strftime("%Y-%m-%d")
    stem = session_id if not name else f"{session_id}-{_safe(name)}"
    return os.path.join(data_dir(), "sessions", day, stem + ".db")


def _safe(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
    return keep.strip("-.")[:60] or "session"


def check_existing_db(path: str) -> None:
    """A path that exists must be a readable DuckDB file: recording into anything else would
    destroy it or fail later, so it is a user error up front."""
    if not os.path.lexists(path):
        return
    if os.path.isdir(path):
        raise UserError(f"--db {path} is a directory", "give a file path such as session.db")
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError as e:
        raise UserError(f"cannot read --db {path}: {e.strerror}",
                        "fix its permissions or choose another path") from None
    if head and head[8:12] != DUCKDB_MAGIC:
        raise UserError(f"--db {path} is not a DuckDB file",
                        "choose a new path or an existing wire-recorder .db")


def writable_dir(path: str) -> str | None:
    """Create the folder for a DB if needed; None when that is impossible here."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        make_private_dirs(folder)  # every folder made on the way, not only the last (makedirs)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK | os.X_OK) else None


def spool_path_for(db_path: str, session_id: str) -> str:
    return f"{db_path}.{session_id}.spool"


def open_private(path: str, mode: str = "wb", encoding: str | None = None) -> IO[Any]:
    """Open `path` for writing as a file only its owner may read (0600), whatever the umask and
    also when it exists already (O_CREAT's mode applies to new files only): exports and reports
    hold what the recording holds. `mode` is "w"/"a"/"x" with "b" or text (UTF-8 by default).
    A path that is not a regular file (/dev/stdout, a FIFO) is written as is, its mode left alone."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    if "a" in mode:
        flags |= os.O_APPEND
    elif "x" in mode:
        flags |= os.O_EXCL
    else:
        flags |= os.O_TRUNC
    fd = os.open(path, flags, 0o600)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.fchmod(fd, 0o600)
        if "b" in mode:
            return os.fdopen(fd, "ab" if "a" in mode else "wb")
        return os.fdopen(fd, "a" if "a" in mode else "w", encoding=encoding or "utf-8")
    except BaseException:
        os.close(fd)
        raise


def make_private_dirs(path: str) -> None:
    """`os.makedirs` whose new folders are 0700 whatever the umask (existing ones are left
    alone: they may be shared on purpose)."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise
            continue
        os.chmod(folder, 0o700)


def fsync_file(path: str) -> None:
    """Put a file's bytes on the disk (before it is renamed over another)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(folder: str) -> None:
    """Put a folder's entries on the disk (after a rename in it): best effort, as some file
    systems cannot."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
