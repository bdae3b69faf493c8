"""Many recordings as one set of views.

Every recording is ATTACHed read-only to an in-memory DuckDB connection; TEMP views `frames` and
`sessions` are the UNION ALL of them and the analysis views are installed on top, so a query
sees sessions from a hundred files as if they were one. The files are never written, so a file
written by an older wire-recorder gets the current views without being migrated.

Accepted inputs: `.db` files, globs of them, folders (every `*.db` below, or a Parquet export
made by `wire-export --format parquet`), `.jsonl` transcripts and kimi `wire.jsonl` logs (read
into memory).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import duckdb

from wire_recorder.recorder.errors import (
    DBLocked,
    NoRecordings,
    NotARecording,
    QueryError,
    SchemaTooNew,
)
from wire_recorder.recorder.handoff import wait_for_loaders
from wire_recorder.recorder.model import COLUMNS, FRAMES, SESSIONS
from wire_recorder.recorder.sessions import pick_session
from wire_recorder.recorder.store import (
    ADDED_COLUMNS,
    SCHEMA_VERSION,
    SESSION_COLUMNS,
    check_base_tables,
    check_columns,
    damaged,
    frame_select,
    is_duckdb_file,
    is_lock_error,
    schema_version,
    sql_str,
)

from .inputs import expand, files_below
from .views import install_views

# DuckDB's share of a reader's memory. What a query needs beyond it spills to a private temp
# folder, removed on close: the views over a 10^7-frame recording fit ~512 MB RSS (1M request
# frames: wire-stats 1.8 GB with 2 GB here, 0.5 GB with this; bench/bench_big.py)
MEMORY_LIMIT = "384MB"


def bound_memory(con: duckdb.DuckDBPyConnection, memory_limit: str = MEMORY_LIMIT) -> str:
    """Keep `con` (in memory) under `memory_limit`, spilling to a new private folder; returns
    the folder, for the caller to remove (`remove_spill`) when the connection is closed."""
    import tempfile

    spill = tempfile.mkdtemp(prefix="wire-recorder-spill-")  # 0700
    con.execute(f"SET memory_limit = {sql_str(memory_limit)}")
    con.execute(f"SET temp_directory = {sql_str(spill)}")
    return spill


def remove_spill(spill: str | None) -> None:
    if spill:
        import shutil

        shutil.rmtree(spill, ignore_errors=True)


@dataclass
class Workspace:
    """An in-memory connection whose `frames`, `sessions` and analysis views span all inputs."""

    con: duckdb.DuckDBPyConnection
    inputs: list[str] = field(default_factory=list)
    spill: str | None = None  # DuckDB's temp folder (bound_memory)

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            remove_spill(self.spill)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def session_ids(self) -> list[str]:
        return [r[0] for r in self.con.execute(
            "SELECT session_id FROM sessions ORDER BY started_at, session_id").fetchall()]

    def sessions(self) -> list[dict]:
        """id and name of every session, oldest first."""
        rows = self.con.execute("SELECT session_id, name FROM sessions "
                                "ORDER BY started_at, session_id").fetchall()
        return [{"session_id": r[0], "name": r[1]} for r in rows]

    def where(self) -> str:
        return ", ".join(self.inputs) if len(self.inputs) < 4 else f"{len(self.inputs)} files"

    def resolve_session(self, wanted: str | None) -> str:
        """The id of the session `wanted` names (exact name or id, or a unique prefix;
        `recorder.sessions.pick_session`), or of the only session there is."""
        return pick_session(self.sessions(), wanted, self.where())["session_id"]


def expand_inputs(specs: list[str]) -> list[str]:
    """Globs and folders to a list of files (or Parquet export folders). Each spec must match."""
    return expand(specs, lambda d: [d] if is_parquet_export(d) else files_below(d, "*.db"),
                  "{} is a folder without recordings (*.db)")


def is_parquet_export(path: str) -> bool:
    return os.path.isdir(os.path.join(path, "frames")) and bool(
        glob.glob(os.path.join(path, "frames", "**", "*.parquet"), recursive=True))


def attach_db(con: duckdb.DuckDBPyConnection, path: str, alias: str) -> int:
    """ATTACH one recording read-only, with the checks that make bad input one clear line.
    Returns its schema version."""
    wait_for_loaders(path)  # a session its proxy handed to a loader still storing it
    check_file(path)
    try:
        con.execute(f"ATTACH {sql_str(path)} AS {alias} (READ_ONLY)")
    except duckdb.Error as e:
        msg = str(e)
        if is_lock_error(msg):
            raise DBLocked(f"{path} is in use by another process (still recording?)",
                           "wait for the session to end, or follow it live with "
                           "wire-show --follow") from None
        raise damaged(path, e) from None
    try:
        check_base_tables(con, path, alias)
        found = schema_version(con, path, alias)
        version = check_version(path, found)
        check_columns(con, path, version, alias)
    except duckdb.Error as e:
        raise damaged(path, e) from None
    return version


def check_file(path: str) -> None:
    """What is checked before a file is attached (a reader attaching many checks each so)."""
    if not os.access(path, os.R_OK):
        raise NotARecording(f"{path} is not readable", "check its permissions")
    if os.path.getsize(path) == 0 or not is_duckdb_file(path):
        raise NotARecording(f"{path} is not a DuckDB file",
                            "give a .db written by wire-proxy, or import a .jsonl with wire-import")


def check_version(path: str, found: int | None) -> int:
    """The schema version of an attached recording, or why it cannot be read."""
    if found is None:
        raise NotARecording(f"{path} is a DuckDB file but not a wire-recorder recording")
    if found > SCHEMA_VERSION:
        raise SchemaTooNew(f"{path} was written by a newer wire-recorder (schema {found}; this "
                           f"one reads up to {SCHEMA_VERSION})", "upgrade wire-recorder")
    return found


def _memory_tables(con: duckdb.DuckDBPyConnection) -> None:
    # in registry order, so that INSERT ... VALUES lines up with SESSION_COLUMNS + source_file
    con.execute(FRAMES.create_current("mem_frames"))
    con.execute(SESSIONS.create_current("mem_sessions", "source_file VARCHAR"))


def load_jsonl_into(con: duckdb.DuckDBPyConnection, path: str) -> None:
    from .importers import read_any_jsonl

    session, frames = read_any_jsonl(path)
    values = {k: session.get(k) for k in SESSION_COLUMNS}
    import orjson
    for k in ("command", "tags"):
        if values.get(k) is not None and not isinstance(values[k], str):
            values[k] = orjson.dumps(values[k]).decode()
    try:
        con.execute(f"INSERT INTO mem_sessions VALUES "
                    f"({', '.join('?' * (len(SESSION_COLUMNS) + 1))})",
                    [values[k] for k in SESSION_COLUMNS] + [path])
    except (duckdb.ConversionException, duckdb.InvalidInputException) as e:
        # a header value of the wrong type ("exit_code": "x"): the file was edited by hand
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise NotARecording(f"{path}:1: a value in the header's session has the wrong type: "
                            f"{first}", "fix it, or remove it from the header") from None
    if frames:
        ap = con.appender("mem_frames", columns=list(COLUMNS))
        ap.append_rows([f.row() for f in frames])
        ap.flush()


def open_workspace(specs: list[str], memory_limit: str = MEMORY_LIMIT,
                   materialize: bool = True, unsafe: bool = False,
                   out_dir: str | None = None,
                   progress: Callable[[str], None] | None = None,
                   views: bool = True) -> Workspace:
    """Attach every input and install the views (`views` False: `frames` and `sessions` only,
    for a caller that may need none: wire-stats over stored summaries). Raises UserError
    subclasses for bad input.
    materialize: compute the shared `wr_events` once (worth it whenever a derived view is read).
    Then SQL on the connection has no file access (`lock`) unless `unsafe`; `out_dir` is the one
    folder it may write (wire-export's Parquet). progress: called per view made (install_views)."""
    if not specs:
        raise NoRecordings("no recordings given", "pass one or more .db files or a glob")
    paths = expand_inputs(specs)
    con = duckdb.connect(":memory:")
    readable: list[str] = []  # Parquet export folders: the only files the views read by path
    spill: str | None = None
    try:
        spill = bound_memory(con, memory_limit)
        frame_parts: list[str] = []
        session_parts: list[str] = []
        cols = ", ".join(COLUMNS)
        scols = ", ".join(SESSION_COLUMNS)
        have_memory = False
        for i, path in enumerate(paths):
            if os.path.isdir(path):
                readable += [os.path.join(os.path.abspath(path), d, "") for d in ("frames", "sessions")]
                fglob = sql_str(os.path.join(path, "frames", "**", "*.parquet"))
                sglob = sql_str(os.path.join(path, "sessions", "**", "*.parquet"))
                src = f"read_parquet({fglob}, hive_partitioning = false, union_by_name = true)"
                # older exports lack the columns added since
                have = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()}
                version = max([1] + [v for c, (v, _) in ADDED_COLUMNS.items() if c in have])
                frame_parts.append(f"SELECT {frame_select(version)} "
                                   f"FROM {src}")
                ssrc = f"read_parquet({sglob}, hive_partitioning = false, union_by_name = true)"
                shave = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {ssrc}").fetchall()}
                sel = ", ".join(c.name if c.name in shave else f"NULL::{c.sql_type} AS {c.name}"
                                for c in SESSIONS.columns)
                session_parts.append(f"SELECT {sel}, {sql_str(path)} AS source_file FROM {ssrc}")
                continue
            if path.endswith(".jsonl"):
                if not have_memory:
                    _memory_tables(con)
                    have_memory = True
                load_jsonl_into(con, path)
                continue
            alias = f"rec{i}"
            version = attach_db(con, path, alias)
            frame_parts.append(f"SELECT {frame_select(version)} FROM {alias}.frames")
            # older files lack the session columns added since (schema 4: redaction)
            session_parts.append(f"SELECT {SESSIONS.select_list(version)}, {sql_str(path)} "
                                 f"AS source_file FROM {alias}.sessions")
        if have_memory:
            frame_parts.append(f"SELECT {cols} FROM mem_frames")
            session_parts.append(f"SELECT {scols}, source_file FROM mem_sessions")
        con.execute("CREATE TEMP VIEW frames AS " + "\nUNION ALL ".join(frame_parts))
        con.execute("CREATE TEMP VIEW sessions AS " + "\nUNION ALL ".join(session_parts))
        # the inputs are read-only: the protocols seen now are all the views will ever see
        present = {r[0] for r in con.execute("SELECT DISTINCT protocol FROM sessions").fetchall()}
        if views:
            install_views(con, temp=True, materialize=materialize, protocols=present,
                          progress=progress)
        if out_dir is not None:
            readable.append(os.path.join(os.path.abspath(out_dir), ""))
        if readable:
            # the views read these folders lazily, after the lock (which does not cover them)
            con.execute(f"SET allowed_directories = [{', '.join(map(sql_str, readable))}]")
        if not unsafe:
            lock(con)
    except BaseException:
        con.close()
        remove_spill(spill)
        raise
    return Workspace(con, paths, spill)


# Statements that reach outside the workspace even when external access is off: a file already
# attached stays reachable (DETACH then ATTACH it writable), and an allowed folder is writable.
_REFUSED = {"ATTACH", "DETACH", "COPY", "COPY_DATABASE", "EXPORT", "LOAD", "UPDATE_EXTENSIONS"}

UNSAFE_HINT = "--unsafe lifts this: your SQL can then read and write any file you can"


def lock(con: duckdb.DuckDBPyConnection) -> None:
    """After setup: no file, extension or network access for whatever SQL runs next, and no way
    for that SQL to turn it back on."""
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def check_statements(sql: str) -> None:
    """Refuse the statements `lock` cannot stop (a locked workspace only)."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error:
        return  # executing it gives DuckDB's own complaint
    for st in statements:
        name = getattr(st.type, "name", str(st.type))
        if name in _REFUSED:
            what = "INSTALL/LOAD" if name == "LOAD" else name.replace("_", " ")
            raise QueryError(f"{what} is not allowed: the SQL reads the recordings and nothing "
                             "else", UNSAFE_HINT)
