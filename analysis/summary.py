"""Per-session summaries stored in the recording (`wr_session_summary`), derived data.

Reading a summary of a million frames through the views costs a second (the shared events are
materialised, then every view reads them); the same numbers computed once, when the loader has
stored the session (`recorder.after_load`, entry point `session_summary`), cost milliseconds
to read. One statement (`summary.sql`) computes them, both there and for any session that has no
valid stored row when read (old files, files written by other tools, or by wire-redact, which
builds a new file): what a reader gets does not depend on which path made it.

A stored row is trusted only when it was written by this layout (`version`, which includes the
views' version) and still describes the session's frames (their count and highest `seq`);
otherwise it is ignored and the reader computes it. Readers never write.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from importlib.resources import files
from typing import Any

import duckdb

from wire_recorder.recorder.store import sql_str

from .views import VIEWS_VERSION, install_views

TABLE = "wr_session_summary"
# Bump when summary.sql changes what a row holds.
SUMMARY_VERSION = "1"
VERSION = f"{SUMMARY_VERSION}/views-{VIEWS_VERSION}"

# The stored table's columns and types: a reader takes rows only from a table of exactly these
# (tests/test_summary.py checks that summary.sql makes them).
LAYOUT = [
    ("version", "VARCHAR"), ("session_id", "VARCHAR"), ("frame_rows", "BIGINT"),
    ("max_seq", "BIGINT"), ("turns", "BIGINT"), ("steps", "BIGINT"), ("input_tokens", "BIGINT"),
    ("output_tokens", "BIGINT"), ("total_tokens", "BIGINT"), ("tool_calls", "BIGINT"),
    ("requests", "BIGINT"), ("errors", "BIGINT"),
    ("turn_rows", "STRUCT(protocol VARCHAR, turn INTEGER, status VARCHAR, steps BIGINT, "
                  "input_other BIGINT, input_cache_read BIGINT, input_cache_creation BIGINT, "
                  "output BIGINT, total_tokens BIGINT, subagent_tokens BIGINT, "
                  "user_input VARCHAR)[]"),
    ("tool_rows", "STRUCT(protocol VARCHAR, tool_name VARCHAR, is_error BOOLEAN, "
                  "duration_ms DOUBLE, agent_id VARCHAR, input_rounds BIGINT, "
                  "input_wait_ms DOUBLE)[]"),
    ("request_rows", 'STRUCT(protocol VARCHAR, "type" VARCHAR, via VARCHAR, outcome VARCHAR, '
                     "resolved_by VARCHAR, wait_ms DOUBLE)[]"),
    ("error_rows", 'STRUCT("source" VARCHAR, code INTEGER, message VARCHAR, n BIGINT)[]'),
]

# What the scope table of summary.sql is called (a temp table of the connection running it).
SCOPE = "wr_summary_scope"

_sql: str | None = None


def summary_sql() -> str:
    """The statement: one row per session listed in the temp table `wr_summary_scope`."""
    global _sql
    if _sql is None:
        _sql = files(__package__).joinpath("summary.sql").read_text(encoding="utf-8")
    return _sql


def _ident(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def _set_scope(con: duckdb.DuckDBPyConnection, session_ids: Iterable[str]) -> None:
    con.execute(f"CREATE OR REPLACE TEMP TABLE {SCOPE} (session_id VARCHAR)")
    ids = list(session_ids)
    if ids:
        con.execute(f"INSERT INTO {SCOPE} SELECT unnest(?::VARCHAR[])", [ids])


def _compute(cur: duckdb.DuckDBPyConnection, frames_from: str, sessions_from: str,
             session_ids: list[str], into: str) -> None:
    """Run summary.sql over these sessions on `cur`, a cursor of its own (temp objects are per
    connection, so the ones made here vanish with it), into `into` ("TEMP TABLE x"). The views read
    `frames` and `sessions`: temp views of only these sessions shadow any others on this
    cursor, so the cost is these sessions' frames whatever else the file or workspace holds
    (constant filters: DuckDB skips the other sessions' row groups)."""
    where = f"session_id IN ({', '.join(map(sql_str, session_ids))})"
    cur.execute(f"CREATE OR REPLACE TEMP VIEW frames AS SELECT * FROM {frames_from} WHERE {where}")
    cur.execute(f"CREATE OR REPLACE TEMP VIEW sessions AS SELECT * FROM {sessions_from} "
                f"WHERE {where}")
    protocols = {r[0] for r in cur.execute("SELECT DISTINCT protocol FROM sessions").fetchall()}
    install_views(cur, temp=True, materialize=True, protocols=protocols)
    _set_scope(cur, session_ids)
    cur.execute(f"CREATE OR REPLACE {into} AS SELECT ?::VARCHAR AS version, * "
                f"FROM ({summary_sql()})", [VERSION])


# -- write side (a recording opened for writing) ---------------------------------------------
def write_summaries(con: duckdb.DuckDBPyConnection, session_ids: list[str] | None = None) -> int:
    """Compute and store the summary of these sessions (default: all) in the database of `con`
    (a `Store`'s connection), on a cursor of its own: the caller's connection sees only the
    stored rows. Returns the rows stored."""
    cur = con.cursor()
    try:
        name = cur.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
        db = _ident(name)
        if session_ids is None:
            session_ids = [r[0] for r in cur.execute(
                f"SELECT DISTINCT session_id FROM {db}.main.sessions").fetchall()]
        if not session_ids:
            return 0
        _compute(cur, f"{db}.main.frames", f"{db}.main.sessions", session_ids, "TEMP TABLE wr_new")
        target = f"{db}.main.{TABLE}"
        cur.execute("BEGIN TRANSACTION")
        try:
            if _layout(cur, name) == _temp_layout(cur):
                cur.execute(f"DELETE FROM {target} WHERE session_id IN "
                            f"(SELECT session_id FROM wr_new)")
                cur.execute(f"INSERT INTO {target} SELECT * FROM wr_new")
            else:  # none yet, or another wire-recorder's layout: derived data, made anew
                cur.execute(f"DROP TABLE IF EXISTS {target}")
                cur.execute(f"CREATE TABLE {target} AS SELECT * FROM wr_new")
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        return len(session_ids)
    finally:
        cur.close()


# Below this many rows (frames, stderr lines, proxy events) a session's summary is not stored:
# the hook's cost is mostly DuckDB binding the views (~0.13 s CPU whatever the size), more than
# a reader pays computing a small session with the others it reads.
MIN_STORED_ROWS = 128
# Above this, not stored either: the step's time grows with the session (~2.5 us CPU a row) and
# its memory with what the views sort (bounded by the store's DuckDB memory_limit, spilling).
MAX_STORED_ROWS = 2_000_000


def store_summaries(con: duckdb.DuckDBPyConnection, session_ids: list[str]) -> int:
    """Store the summaries of those of these sessions that have MIN_STORED_ROWS to
    MAX_STORED_ROWS rows (`WIRE_SUMMARY_MIN_ROWS` overrides the first: tests lower it), in one
    pass. Returns the rows stored."""
    least = int(os.environ.get("WIRE_SUMMARY_MIN_ROWS", MIN_STORED_ROWS))
    if not session_ids:
        return 0
    big = [r[0] for r in con.execute(
        "SELECT session_id FROM frames WHERE list_contains(?, session_id) GROUP BY session_id "
        "HAVING count(*) BETWEEN ? AND ?", [session_ids, least, MAX_STORED_ROWS]).fetchall()]
    if least <= 0:  # sessions without a frame too
        framed = {r[0] for r in con.execute(
            "SELECT DISTINCT session_id FROM frames WHERE list_contains(?, session_id)",
            [session_ids]).fetchall()}
        big += [sid for sid in dict.fromkeys(session_ids) if sid not in framed]
    small = sorted(set(session_ids) - set(big))
    if small and _layout(con, _catalog(con, None)):
        # a session stored anew (wire-import --replace) loses a row that no longer holds
        con.execute(f"DELETE FROM {TABLE} WHERE list_contains(?, session_id)", [small])
    return write_summaries(con, big) if big else 0


def after_load(store: Any, session_id: str) -> None:
    """The `wire_recorder.after_load` hook: the loader has stored all of this session."""
    store_summaries(store.con, [session_id])


def _layout(con: duckdb.DuckDBPyConnection, catalog: str) -> list[tuple]:
    return con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = ? "
        "AND schema_name = 'main' AND table_name = ? ORDER BY column_index",
        [catalog, TABLE]).fetchall()


def _temp_layout(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = 'temp' "
        "AND table_name = 'wr_new' ORDER BY column_index").fetchall()


# -- read side -------------------------------------------------------------------------------
def _catalog(con: duckdb.DuckDBPyConnection, catalog: str | None) -> str:
    if catalog is not None:
        return catalog
    return con.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]


def has_table(con: duckdb.DuckDBPyConnection, catalog: str) -> bool:
    """The recording holds a summary table of this version's layout (another layout, whoever
    wrote it, is not read: its sessions are computed). A base table: a view of that name
    planted in an untrusted file would run its own SQL when read."""
    base = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' "
        "AND table_name = ?", [catalog, TABLE]).fetchone()[0]  # type: ignore[index]
    return bool(base) and [tuple(r) for r in _layout(con, catalog)] == [tuple(c) for c in LAYOUT]


def valid_rows_sql(catalog: str) -> str:
    """The stored rows of one attached recording that can be trusted: this layout, and still
    the session's frames (count and highest seq). A table of another layout fails to bind:
    callers treat that as no summary."""
    c = _ident(catalog)
    return (f"SELECT s.* FROM {c}.main.{TABLE} s "
            f"LEFT JOIN (SELECT session_id, count(*) AS n, max(seq) AS m FROM {c}.main.frames "
            f"GROUP BY session_id) f ON f.session_id = s.session_id "
            f"WHERE s.version = {sql_str(VERSION)} AND s.frame_rows = coalesce(f.n, 0) "
            f"AND s.max_seq IS NOT DISTINCT FROM f.m")


INDEX_COLUMNS = ("session_id", "name", "protocol", "command", "started", "duration_s", "frames",
                 "turns", "input_tokens", "output_tokens", "tool_calls", "errors", "tags")


def read_summaries(con: duckdb.DuckDBPyConnection, catalog: str | None = None) -> list[dict] | None:
    """Per session of one recording (`catalog`: its attached name; None: the connection's own
    database), what an index row needs: INDEX_COLUMNS (`started` a TIMESTAMP, `frames` the
    session's `frame_count`, `command` and `tags` the stored JSON text). None when the file has
    no valid summary for every one of its sessions: the caller computes them (e.g. through the
    views, or `compute_rows`)."""
    cat = _catalog(con, catalog)
    try:
        if not has_table(con, cat):
            return None
        c = _ident(cat)
        n_sessions = con.execute(
            f"SELECT count(DISTINCT session_id) FROM {c}.main.sessions").fetchone()[0]  # type: ignore[index]
        rows = con.execute(f"""
            SELECT x.session_id, x.name, x.protocol, x.command, x.started_at,
                epoch(x.ended_at) - epoch(x.started_at), x.frame_count, v.turns, v.input_tokens,
                v.output_tokens, v.tool_calls, v.errors, x.tags
            FROM ({valid_rows_sql(cat)}) v JOIN {c}.main.sessions x ON x.session_id = v.session_id
            ORDER BY x.started_at, x.session_id""").fetchall()
    except duckdb.Error:
        return None  # a layout this version cannot read: as good as none
    if len(rows) != n_sessions:
        return None
    return [dict(zip(INDEX_COLUMNS, r, strict=True)) for r in rows]


# Missing sessions of at most this many frames (sessions.frame_count) in all are computed alone
# when others have stored summaries; more, and the workspace's views are materialised whole.
SCOPED_ROWS = 100_000


def summary_tables(con: duckdb.DuckDBPyConnection, session_ids: list[str] | None,
                   materialize: Any = None) -> None:
    """Into temp table `st_sum` of a workspace connection: the summary row of every session in
    scope (`session_ids`, default all): the stored one where an attached recording holds a valid
    row, else computed through the views. materialize: called (once) before the views are read,
    to compute their shared tables (a workspace opened without them)."""
    if session_ids:
        scope = list(dict.fromkeys(session_ids))
    else:
        scope = [r[0] for r in con.execute("SELECT DISTINCT session_id FROM sessions").fetchall()]
    # a session whose rows come from several inputs is one session to the views: computed
    dup = {r[0] for r in con.execute(
        "SELECT session_id FROM sessions GROUP BY session_id HAVING count(*) > 1").fetchall()}
    _set_scope(con, scope)
    parts = []
    for (cat,) in con.execute(
            "SELECT database_name FROM duckdb_databases() WHERE NOT internal "
            "AND path IS NOT NULL AND database_name NOT IN ('memory', 'temp', 'system') "
            "ORDER BY database_name").fetchall():
        if has_table(con, cat):
            parts.append(valid_rows_sql(cat))
    made = False  # st_sum takes the stored layout, or summary.sql's when nothing is stored
    for part in parts:
        rows = (f"SELECT * EXCLUDE (version) FROM ({part}) "
                f"WHERE session_id IN (SELECT session_id FROM {SCOPE}) "
                "AND NOT list_contains(?::VARCHAR[], session_id)")
        try:
            if not made:
                con.execute(f"CREATE OR REPLACE TEMP TABLE st_sum AS {rows}", [sorted(dup)])
                made = True
            else:
                con.execute(f"INSERT INTO st_sum BY NAME {rows} "
                            "AND session_id NOT IN (SELECT session_id FROM st_sum)", [sorted(dup)])
        except duckdb.Error:
            continue  # another layout: those sessions are computed below
    missing = [sid for (sid,) in con.execute(
        f"SELECT session_id FROM {SCOPE} EXCEPT SELECT session_id FROM st_sum").fetchall()
    ] if made else scope
    if not missing:
        return
    n_rows = con.execute("SELECT sum(frame_count) FROM sessions WHERE list_contains(?, session_id)",
                         [missing]).fetchone()[0] or 0  # type: ignore[index]
    if made and n_rows <= SCOPED_ROWS:
        # a few small sessions beside stored ones: their frames copied once, computed on a
        # cursor whose `frames` are only theirs (the whole workspace's are not materialised)
        _set_scope(con, missing)
        con.execute("CREATE OR REPLACE TABLE memory.main.wr_scope_frames AS SELECT * FROM frames "
                    f"WHERE session_id IN (SELECT session_id FROM {SCOPE})")
        con.execute("CREATE OR REPLACE TABLE memory.main.wr_scope_sessions AS SELECT * FROM "
                    f"sessions WHERE session_id IN (SELECT session_id FROM {SCOPE})")
        cur = con.cursor()
        try:
            _compute(cur, "memory.main.wr_scope_frames", "memory.main.wr_scope_sessions",
                     missing, "TABLE memory.main.wr_scope_sum")
        finally:
            cur.close()
        con.execute("INSERT INTO st_sum BY NAME SELECT * EXCLUDE (version) "
                    "FROM memory.main.wr_scope_sum")
        for t in ("wr_scope_frames", "wr_scope_sessions", "wr_scope_sum"):
            con.execute(f"DROP TABLE memory.main.{t}")
        return
    if materialize is not None:
        materialize()
    _set_scope(con, missing)
    if made:
        con.execute(f"INSERT INTO st_sum BY NAME {summary_sql()}")
    else:
        con.execute(f"CREATE OR REPLACE TEMP TABLE st_sum AS {summary_sql()}")
