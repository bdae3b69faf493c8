"""The analysis views stored in each recording when its loader closes a session, so that a
plain DuckDB (>= 1.4, no wire-recorder) opening the file read-only answers `select * from
token_usage` or `tool_calls`. The `wire_recorder.after_load` hook (recorder/after_load.py): the
recorder imports nothing from analysis, it calls what this package declares.

The set is versioned (`meta.analysis_views` = views.VIEWS_VERSION): a file that has the current
set is left alone (one check per session), one of another version gets it replaced. Readers of
this package never use the stored ones: they install their own in TEMP over read-only files
(analysis/sources.py), so a file written by an older wire-recorder reads the same.

What they cost a short session (docs/design.md, "Stored analysis views"): DuckDB keeps a view
as its SQL re-rendered plus its parsed tree (a `status['a']['b']` alone is ~130 bytes of it),
so every protocol's part of every view took ~240 KB of catalog, most of a 2-frame file. So a
file gets
- only the parts of the protocols its sessions speak (`meta.analysis_views_protocols`, adapter
  names; `*` for all, what `wire-import` stores): a Wire recording carries no ACP or MCP SQL, and
  a session of another protocol stored later makes the loader add that protocol's parts;
- each view as a one-line view over a table macro `wr_view_<name>` whose body is DuckDB's
  `query()` of the view's SQL, comments and spare spaces left out: stored as one string, not as
  a tree, and read by DuckDB 1.4 and 2.x alike, also when the file is attached under another name.
A Wire file's set, comments on every column included, takes ~73 KB of catalog (was ~260)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import duckdb

from wire_recorder.recorder import protocols as registry
from wire_recorder.recorder.store import sql_str

from . import views

PROTOCOLS_KEY = "analysis_views_protocols"
MACRO_PREFIX = "wr_view_"


# Tokens that join their neighbours without a space: none of them ends or starts another token.
_TIGHT = frozenset(["(", ")", "[", "]", ",", ".", "::"])


def minified(sql: str) -> str:
    """sql without its comments and with no more spaces than its tokens need (DuckDB's own
    tokenizer tells comments and string constants apart)."""
    tokens = duckdb.tokenize(sql)
    ends = [start for start, _ in tokens[1:]] + [len(sql)]
    out: list[str] = []
    last = "("
    for (start, kind), end in zip(tokens, ends, strict=True):
        if kind == duckdb.token_type.comment:
            continue
        text = sql[start:end].rstrip()
        if text not in _TIGHT and last not in _TIGHT:
            out.append(" ")
        out.append(text)
        last = text
    return "".join(out)


def file_protocols(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The adapters (names) that read the sessions stored in the connection's database."""
    return {registry.for_session(p).name
            for (p,) in con.execute("SELECT DISTINCT protocol FROM sessions").fetchall()}


def covered(con: duckdb.DuckDBPyConnection) -> set[str] | None:
    """The adapters whose parts the stored set has; None: all of them (a set stored before this
    key, or by `wire-import`, which stores every protocol's)."""
    row = con.execute("SELECT value FROM meta WHERE key = ?", [PROTOCOLS_KEY]).fetchone()
    return None if row is None or row[0] == "*" else set(filter(None, row[0].split(",")))


def is_current(con: duckdb.DuckDBPyConnection, protocols: set[str] | None) -> bool:
    if views.stored_version(con) != views.VIEWS_VERSION:
        return False
    have = covered(con)
    return have is None or (protocols is not None and protocols <= have)


def store_views(con: duckdb.DuckDBPyConnection,
                protocols: Iterable[str | None] | None = None) -> bool:
    """Store the views in a recording opened for writing (a `Store`'s connection), unless a
    current set with the parts of `protocols` is there already (None: every protocol's). True
    when they were (re)installed."""
    wanted = None if protocols is None else {registry.for_session(p).name for p in protocols}
    if is_current(con, wanted):
        return False
    if wanted is not None and views.stored_version(con) == views.VIEWS_VERSION:
        wanted |= covered(con) or set()  # the parts there stay (a file's sessions only add up)
    adapters = views.adapters_for(wanted)
    with views.catalog_transaction(con):
        for text in views.macro_sql(False, adapters):
            con.execute(text)
        for name in views.VIEW_NAMES:
            # (views.py's statement, split: "CREATE OR REPLACE VIEW <name>" and the query)
            head, query = views.view_sql(name, adapters=adapters).split(" AS\n", 1)
            con.execute(f"CREATE OR REPLACE MACRO {MACRO_PREFIX}{name}() AS TABLE "
                        f"FROM query({sql_str(minified(query))})")
            con.execute(f"{head} AS FROM {MACRO_PREFIX}{name}()")
        from .catalog import add_comments

        add_comments(con, temp=False)  # what each view and column means, for any DuckDB
        con.execute("INSERT OR REPLACE INTO meta VALUES ('analysis_views', ?)",
                    [views.VIEWS_VERSION])
        con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [PROTOCOLS_KEY, "*" if wanted is None else ",".join(sorted(wanted))])
    return True


def after_load(store: Any, session_id: str) -> None:
    """The loader has stored all of this session: make sure the file holds the current views,
    with the parts of the protocols of its sessions."""
    store_views(store.con, file_protocols(store.con))
