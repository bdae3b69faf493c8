"""wire-ui's index entry of a recording, written by its loader once the file is closed.

A folder of 10,000 one-session files cannot be indexed in a second by reading them: an ATTACH
alone costs ~1 ms a file. So the background loader, which has just stored a session, reads its
closed file the way wire-ui's cold index does (`coldindex.read_files`: the same rows, summary
and search text, one definition) and appends one line, {path, sig, rows}, to a log beside
wire-ui's cache. wire-ui folds the log into its cache at start (`take_log`) and then reads no
file whose size and time still match its entry (`data._file_sig`). Entries are untrusted input
like the cache (`data.valid_files`); a missing, garbled, forged or stale entry only means the
file is read as before. `WIRE_UI_RECORD_INDEX=0` turns the writing off.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import orjson

ENV = "WIRE_UI_RECORD_INDEX"
LOG_NAME = "ui-index.log"
# A log nobody folds (wire-ui never started) stops growing here: the entries then written only
# cost the speed of a later first start.
MAX_LOG_BYTES = 256 << 20
# A bigger file is not read again at each session appended to it: wire-ui reads it itself
# (a few big files cost little beside thousands of small ones).
MAX_FILE_BYTES = 64 << 20


def log_path(cache_path: str | None = None) -> str:
    """The log beside the cache (by default wire-ui's, under $XDG_CACHE_HOME)."""
    from .data import index_cache_path

    return os.path.join(os.path.dirname(cache_path or index_cache_path()), LOG_NAME)


def after_load(store: Any, session_id: str) -> Callable[[str], object] | None:
    """The `wire_recorder.after_load` hook: the entry is written once the loader has closed
    the file (its size and time are final only then)."""
    if os.environ.get(ENV, "1").strip() == "0":
        return None
    return write_entry


def entry_of(path: str) -> dict | None:
    """{"path", "sig", "rows"} of a closed recording, every session of it with its search text,
    as wire-ui's cold index reads it; None when it cannot be read whole and unchanged."""
    from .coldindex import read_files
    from .data import _file_sig

    p = os.path.abspath(path)
    sig = _file_sig(p)
    if sig[0] is None or sig[0] > MAX_FILE_BYTES or sig[2] is not None:  # a WAL: not closed
        return None
    got = read_files([p], "all")
    if got["problems"] or got["busy"] or p not in got["rows"] or _file_sig(p) != sig:
        return None
    return {"path": p, "sig": list(sig), "rows": got["rows"][p]}


def write_entry(path: str, log: str | None = None) -> bool:
    """Append the entry of a closed recording to the log (0600, one write); True when done."""
    entry = entry_of(path)
    if entry is None:
        return False
    line = orjson.dumps(entry, default=str) + b"\n"
    target = log or log_path()
    try:  # no place for it (a read-only or missing home): only a later start's speed is lost
        os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if os.path.getsize(target) + len(line) > MAX_LOG_BYTES:
                return False
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)  # one write() a line: appends of several loaders do not interleave
        finally:
            os.close(fd)
    except OSError:
        return False
    return True


def take_log(log: str) -> dict[str, dict]:
    """abspath -> {"sig", "rows"} of the log's valid entries (the last one of a file wins);
    the log is moved away first, so entries appended meanwhile wait for the next start, and
    removed once read. A line that is not a valid entry is skipped."""
    from .data import valid_files

    taken = f"{log}.{os.getpid()}.taken"
    try:
        os.rename(log, taken)
    except OSError:
        return {}
    out: dict[str, dict] = {}
    try:
        if os.path.getsize(taken) > MAX_LOG_BYTES + (1 << 20):  # not what loaders write
            return out
        with open(taken, "rb") as fh:
            for line in fh:
                try:
                    e = orjson.loads(line)
                    got = valid_files({e["path"]: e}) if isinstance(e, dict) else None
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    got = None
                if got:
                    out |= got
    except OSError:
        return out
    finally:
        with contextlib.suppress(OSError):
            os.unlink(taken)
    return out
