"""`wire-query`: SQL over one recording or many."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import duckdb

from wire_recorder.recorder.env_seconds import env_seconds
from wire_recorder.recorder.errors import QueryError

from .sources import UNSAFE_HINT, Workspace, check_statements, open_workspace
from .views import VIEW_NAMES

# seconds a statement may run (execution and fetching) before it is stopped: an endless
# recursive CTE would otherwise run until killed. WIRE_QUERY_TIMEOUT or --timeout change it.
TIMEOUT_S = 300.0
TIMEOUT_ENV = "WIRE_QUERY_TIMEOUT"


def default_timeout() -> float:
    """WIRE_QUERY_TIMEOUT (seconds, 0: none) or TIMEOUT_S."""
    return env_seconds(TIMEOUT_ENV, TIMEOUT_S, zero_means_none=True)


def run_sql(ws: Workspace, sql: str, unsafe: bool = False,
            timeout_s: float | None = None) -> tuple[list[str], list[tuple]]:
    """Columns and rows of one SQL statement; DuckDB's complaint becomes one line.
    Unless `unsafe`, the SQL has no file access (the workspace is locked) and statements that
    would reach files anyway (ATTACH, COPY, ...) are refused. `timeout_s` (default
    `default_timeout()`; 0: none): the statement is interrupted past it, a QueryError."""
    if not sql.strip():
        raise QueryError("empty SQL", 'e.g. "select * from turns"')
    if not unsafe:
        check_statements(sql)
    limit = default_timeout() if timeout_s is None else timeout_s
    timer = threading.Timer(limit, ws.con.interrupt) if limit > 0 else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        return _execute(ws, sql, unsafe)
    except duckdb.InterruptException:
        raise QueryError(f"the query ran longer than {limit:g} s and was stopped",
                         f"give it more time with --timeout SECONDS (or {TIMEOUT_ENV}; "
                         "0: no limit)") from None
    finally:
        if timer is not None:
            timer.cancel()


def _execute(ws: Workspace, sql: str, unsafe: bool) -> tuple[list[str], list[tuple]]:
    try:
        cur = ws.con.execute(sql)
    except duckdb.InterruptException:
        raise
    except duckdb.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if not unsafe and isinstance(e, duckdb.PermissionException | duckdb.InvalidInputException) \
                and ("disabled by configuration" in first or "has been locked" in first
                     or "disabled through configuration" in first):
            raise QueryError(f"not allowed, the SQL reads the recordings and nothing else: "
                             f"{first}", UNSAFE_HINT) from None
        raise QueryError(f"SQL error: {first}",
                         "views: sessions, frames, turns, steps, token_usage, tool_calls, "
                         "requests, errors, anomalies, llm_calls (wire-query --help)") from None
    if cur.description is None:
        return [], []
    cols = [d[0] for d in cur.description]
    return cols, cur.fetchall()


# SQL that reads the catalog gets the views' comments (a few ms, so only then)
CATALOG = re.compile(r"\b(duckdb_columns|duckdb_views|duckdb_tables|comment)\b", re.I)
DERIVED = re.compile(r"\b(" + "|".join(VIEW_NAMES) + r")\b", re.I)


def query(specs: list[str], sql: str, unsafe: bool = False,
          progress: Callable[[str], None] | None = None,
          timeout_s: float | None = None) -> tuple[list[str], list[tuple]]:
    # Computing wr_events once pays off only when a derived view is read; a query over `frames`
    # alone should not wait for it.
    with open_workspace(specs, materialize=bool(DERIVED.search(sql)), unsafe=unsafe,
                        progress=progress) as ws:
        if CATALOG.search(sql):
            from .catalog import add_comments

            add_comments(ws.con, temp=True)  # what each view and column means, as in files
        return run_sql(ws, sql, unsafe=unsafe, timeout_s=timeout_s)
