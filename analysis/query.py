"""`wire-query`: SQL over one recording or many."""

from __future__ import annotations

import re

import duckdb

from wire_recorder.recorder.errors import QueryError

from .sources import Workspace, open_workspace
from .views import VIEW_NAMES


def run_sql(ws: Workspace, sql: str) -> tuple[list[str], list[tuple]]:
    """Columns and rows of one SQL statement; DuckDB's complaint becomes one line."""
    if not sql.strip():
        raise QueryError("empty SQL", 'e.g. "select * from turns"')
    try:
        cur = ws.con.execute(sql)
    except duckdb.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise QueryError(f"SQL error: {first}",
                         "views: sessions, frames, turns, steps, token_usage, tool_calls, "
                         "requests, errors, anomalies (see docs/analysis.md)") from None
    if cur.description is None:
        return [], []
    cols = [d[0] for d in cur.description]
    return cols, cur.fetchall()


DERIVED = re.compile(r"\b(" + "|".join(VIEW_NAMES) + r")\b", re.I)


def query(specs: list[str], sql: str) -> tuple[list[str], list[tuple]]:
    # Computing wr_events once pays off only when a derived view is read; a query over `frames`
    # alone should not wait for it.
    with open_workspace(specs, materialize=bool(DERIVED.search(sql))) as ws:
        return run_sql(ws, sql)
