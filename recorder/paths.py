"""Where recordings go. Kept import-light: it runs before the agent is spawned."""

from __future__ import annotations

import os
import time

from .errors import UserError

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
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK | os.X_OK) else None


def spool_path_for(db_path: str, session_id: str) -> str:
    return f"{db_path}.{session_id}.spool"
