"""`wire-query`: SQL over one recording or many."""

from __future__ import annotations

import re
from collections.abc import Callable

import duckdb

from wire_recorder.recorder.errors import QueryError

from .sources import UNSAFE_HINT, Workspace, check_statements, open_workspace
from .views import VIEW_NAMES


def run_sql(ws: Workspace, sql: str, unsafe: bool = False) -> tuple[list[str], list[tuple]]:
    """Columns and rows of one SQL statement; DuckDB's complaint becomes one line.
    Unless `unsafe`, the SQL has no file access (the workspace is locked) and statements that
    would reach files anyway (ATTACH, COPY, ...) are refused."""
    if not sql.strip():
        raise QueryError("empty SQL", 'e.g. "select * from turns"')
    if not unsafe:
        check_statements(sql)
    try:
        cur = ws.con.execute(sql)
    except duckdb.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if not unsafe and isinstance(e, duckdb.PermissionException | duckdb.InvalidInputException) \
                and ("disabled by configuration" in first or "has been locked" in first
                     or "disabled through configuration" in first):
            raise QueryError(f"not allowed, the SQL reads the recordings and nothing else: "
                             f"{first}", UNSAFE_HINT) from None
        raise QueryError(f"SQL error: {first}",
                         "views: sessions, frames, turns, steps, token_usage, tool_calls, "
                         "requests, errors, anomalies (wire-query --help)") from None
    if cur.description is None:
        return [], []
    cols = [d[0] for d in cur.description]
    return cols, cur.fetchall()


# SQL that reads the catalog gets the views' comments (a few ms, so only then)
CATALOG = re.compile(r"\b(duckdb_columns|duckdb_views|duckdb_tables|comment)\b", re.I)
DERIVED = re.compile(r"\b(" + "|".join(VIEW_NAMES) + r")\b", re.I)


def query(specs: list[str], sql: str, unsafe: bool = False,
          progress: Callable[[str], None] | None = None) -> tuple[list[str], list[tuple]]:
    # Computing wr_events once pays off only when a derived view is read; a query over `frames`
    # alone should not wait for it.
    with open_workspace(specs, materialize=bool(DERIVED.search(sql)), unsafe=unsafe,
                        progress=progress) as ws:
        if CATALOG.search(sql):
            from .catalog import add_comments

            add_comments(ws.con, temp=True)  # what each view and column means, as in files
        return run_sql(ws, sql, unsafe=unsafe)
