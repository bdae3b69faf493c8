"""What each analysis view and its columns mean: `analysis/sql/comments.sql`, one `COMMENT ON`
statement per view and column, plain SQL like the views themselves.

Stored with the views (`install_views` into a file: `wire-import`), so a plain DuckDB explains a
file analysis wrote (`SELECT column_name, comment FROM duckdb_columns() WHERE table_name =
'turns'`); given to a workspace's TEMP views when SQL reads the catalog; `wire-query --help`
lists the views' lines. The recorder's tables (`sessions`, `frames`) get their columns' lines
from its column registry (recorder/model.py).
"""

from __future__ import annotations

import re
from importlib.resources import files

import duckdb

from wire_recorder.recorder.store import sql_str

TABLES = {
    "sessions": "one row per recorded session (the recorder's table)",
    "frames": "one row per frame of a session, both directions, stderr and proxy events "
              "(the recorder's table)",
}

_VIEW_LINE = re.compile(r"^COMMENT ON VIEW (\w+) IS '((?:[^']|'')*)';$", re.M)


def comments_sql() -> str:
    return files(__package__).joinpath("sql", "comments.sql").read_text(encoding="utf-8")


def view_docs() -> dict[str, str]:
    """view -> what one of its rows is."""
    return {m[1]: m[2].replace("''", "'") for m in _VIEW_LINE.finditer(comments_sql())}


def view_list() -> str:
    """`name: what a row is` for the tables and the views, one per line (wire-query --help)."""
    rows = [*TABLES.items(), *view_docs().items()]
    return "\n".join(f"{name}: {doc}" for name, doc in rows)


def add_comments(con: duckdb.DuckDBPyConnection, temp: bool) -> None:
    """Comment the views `install_views` made on this connection and the recorder's tables
    (temp: the workspace's TEMP views `frames` and `sessions`, else the file's tables)."""
    for line in comments_sql().splitlines():
        if line.startswith("COMMENT ON "):  # one statement per line
            con.execute(line)
    from wire_recorder.recorder.model import FRAMES, SESSIONS

    where = "database_name = 'temp'" if temp else \
        "database_name = current_database() AND schema_name = current_schema()"
    kind = "VIEW" if temp else "TABLE"
    for table in (SESSIONS, FRAMES):
        have = {r[0] for r in con.execute(
            f"SELECT column_name FROM duckdb_columns() WHERE {where} AND table_name = ?",
            [table.name]).fetchall()}
        if not have:
            continue
        con.execute(f"COMMENT ON {kind} {table.name} IS {sql_str(TABLES[table.name])}")
        for col in table.columns:
            if col.name in have:
                con.execute(f"COMMENT ON COLUMN {table.name}.{col.name} IS {sql_str(col.doc)}")
