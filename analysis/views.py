"""The analysis views over `frames` and `sessions`, for every protocol the recorder speaks.

The SQL lives in `.sql` files shipped as package data: `analysis/sql/<view>.sql` holds what is
common to all protocols, `analysis/sql/macros.sql` the shared helpers (DuckDB macros), and each
protocol adapter's package (`recorder/protocols/<name>/`) holds its own part of a view as
`<view>.sql` and its helpers as `macros.sql` (`Adapter.sql_fragment`). A view is its common
file followed by the protocols' parts, `UNION ALL BY NAME`: for the views every protocol adds
rows to (`turns`, `tool_calls`, ...), the common file is a typed empty row that fixes the
columns, their order and their types, and a protocol leaves NULL what it does not have. A
protocol without a part for a view adds nothing.

The files hold plain SQL: no placeholders. The one thing an install chooses is where the
objects go, and the loader says it in the statement it puts in front of each file: `CREATE OR
REPLACE VIEW` stores the views in the file (`store_views`, when analysis writes a recording:
`wire-import`), `CREATE OR REPLACE TEMP VIEW` keeps them in the connection (`install_views(con,
temp=True)`, how `analysis.sources` shows many read-only files as one). Macros follow their
views (`CREATE OR REPLACE [TEMP] MACRO`). The recorder itself installs nothing: its loader
calls analysis's after-load hook (analysis/stored_views.py), which stores them when it closes a
session, so a plain DuckDB reading the file finds them.

They read the extracted columns (`msg_type`, `rpc_id`, `kind`, `method`) to pick rows and parse
`payload` JSON only on the few rows that need it: at a million frames, filtering on extracted
columns costs milliseconds where parsing every payload costs a third of a second.

One view name per meaning, whatever the protocol (column `protocol`: 'wire', 'acp', 'mcp'):
`turns` are Wire prompts and ACP `session/prompt`s (MCP has none), `tool_calls` are Wire
ToolCalls, ACP `tool_call` updates and MCP `tools/call`s, `requests` are whatever the agent (MCP:
the server) asked the client, `errors` and `anomalies` are what went wrong.

Attribution rule used everywhere: a frame belongs to the turn of the last main-agent `TurnBegin`
(ACP: `session/prompt` request) before it and to the step of the last `StepBegin` after that
`TurnBegin`. A `SubagentEvent` is unpacked (its nested type and payload) and keeps the turn and
step of its parent's frame. Durations come from `mono_ns` (monotonic clock), never from
wall-clock `ts`.

A recording's file is attached under its file stem as catalog name (`p.db` is catalog `p`), and
DuckDB reads a dotted name of three parts or more (`x.y.z`) as catalog.table.column when `x` is
a catalog. So struct fields are read with brackets (`status['token_usage']['output']`), never as
`alias.column.field`; two-part names (`alias.column`) are safe. `tests/test_analysis_protocols.py`
installs the views into files named after every qualifier used in the SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from importlib.resources import files

import duckdb

from wire_recorder.recorder import protocols as registry
from wire_recorder.recorder.protocols.base import Adapter

# Bump when a view changes shape or its SQL changes; stored in meta (`analysis_views`) so a file
# says which view set it carries, and `store_views` replaces a set of another version.
VIEWS_VERSION = "6"

# Creation order: each view reads only `frames`, `sessions` and the views before it. The `wr_`
# ones are internal (documented, but their columns may change).
VIEW_NAMES = ["wr_history", "wr_anchors", "wr_events", "wr_rpc_events", "wr_rpc", "wr_rounds",
              "token_usage", "steps", "turns", "requests", "tool_calls", "errors", "anomalies",
              "llm_calls"]

# Read several times by the other views: a workspace that materializes computes them once into
# temp tables (empty, and so free, when no session needs them).
MATERIALIZED = frozenset({"wr_events", "wr_rpc", "wr_rounds"})


def _common(name: str) -> str:
    return files(__package__).joinpath("sql", f"{name}.sql").read_text(encoding="utf-8")


def adapters_for(protocols: set[str | None] | None) -> list[Adapter]:
    """The adapters whose parts go into the views, in registry order. protocols: those of the
    sessions the views will ever see (a workspace over read-only files knows them), None when
    unknown (views stored in a file, which gains sessions later): every adapter. A session is
    read by the adapter the registry gives it (`for_session`: Wire for sessions of no known
    protocol, as they have always been read); no sessions at all need none."""
    if protocols is None:
        return [registry.get(n) for n in registry.names()]
    wanted = {registry.for_session(p).name for p in protocols}
    # in-tree ones come first in registry order: no need to read the entry points for them
    order = registry.IN_TREE if wanted <= set(registry.IN_TREE) else registry.names()
    return [registry.get(n) for n in order if n in wanted]


def view_sql(name: str, temp: bool = False, materialize: bool = False,
             adapters: list[Adapter] | None = None) -> str:
    """The CREATE statement of one view: its common SQL, then the adapters' parts (default: all
    registered adapters). materialize (with temp): a temp table instead, for MATERIALIZED."""
    parts = [_common(name)]
    for adapter in adapters_for(None) if adapters is None else adapters:
        part = adapter.sql_fragment(name)
        if part:
            parts.append(part)
    body = parts[0] if len(parts) == 1 else "\nUNION ALL BY NAME\n".join(
        f"SELECT * FROM (\n{p}\n)" for p in parts)
    if name in PER_SESSION:
        body = _with_name(name, body)
    kind = "TABLE" if temp and materialize and name in MATERIALIZED else "VIEW"
    return f"CREATE OR REPLACE {'TEMP ' if temp else ''}{kind} {name} AS\n{body}"


# The views people query: each gets the session's `name` next to `session_id`, and those with
# `history` have it false (never NULL) for the protocols that re-send none.
PER_SESSION = ("token_usage", "steps", "turns", "requests", "tool_calls", "errors", "anomalies",
               "llm_calls")
WITH_HISTORY = ("token_usage", "steps", "turns", "requests", "tool_calls")


def _with_name(name: str, body: str) -> str:
    replace = " REPLACE (coalesce(wr_v.history, false) AS history)" if name in WITH_HISTORY else ""
    return (f"SELECT wr_v.session_id, wr_names.name, wr_v.* EXCLUDE (session_id){replace}\n"
            f"FROM (\n{body}\n) wr_v\n"
            "LEFT JOIN (SELECT session_id, any_value(name) AS name FROM sessions GROUP BY ALL) "
            "wr_names ON wr_names.session_id = wr_v.session_id")


def macro_sql(temp: bool = False, adapters: list[Adapter] | None = None) -> list[str]:
    """The statements that create the shared macros and the adapters' ones."""
    texts = [_common("macros")]
    for adapter in adapters_for(None) if adapters is None else adapters:
        text = adapter.sql_fragment("macros")
        if text:
            texts.append(text)
    if temp:
        texts = [t.replace("CREATE OR REPLACE MACRO", "CREATE OR REPLACE TEMP MACRO") for t in texts]
    return texts


def sql_texts() -> Iterator[str]:
    """Every SQL file the views are made of (tests read the names used in them)."""
    yield _common("macros")
    for name in VIEW_NAMES:
        yield _common(name)
    for adapter in adapters_for(None):
        for name in ["macros", *VIEW_NAMES]:
            part = adapter.sql_fragment(name)
            if part:
                yield part


def install_views(con: duckdb.DuckDBPyConnection, temp: bool = False,
                  materialize: bool = False, protocols: set[str | None] | None = None,
                  progress: Callable[[str], None] | None = None) -> None:
    """Create (or replace) every analysis view and the macros they use. temp=True keeps them in
    the connection only, which is how read-only files and unions of files get them; otherwise
    they are stored in the connection's database with VIEWS_VERSION in its meta table.
    materialize=True (with temp) computes `wr_events` (and `wr_rpc`, `wr_rounds`) once into temp
    tables: every other view reads them several times, and at a million frames each
    recomputation costs a scan of the payload column. protocols (only with temp): see
    `adapters_for`; a Wire-only workspace plans and runs Wire's SQL alone. progress: called
    with each view's name once it is made (the materialized ones take the time)."""
    adapters = adapters_for(protocols if temp else None)
    with catalog_transaction(con, wanted=not temp):
        for text in macro_sql(temp, adapters):
            con.execute(text)
        for name in VIEW_NAMES:
            con.execute(view_sql(name, temp, materialize, adapters))
            if progress:
                progress(name)
        if not temp:
            from .catalog import add_comments

            # what each view and column means, for any DuckDB that opens the file
            add_comments(con, temp=False)
            con.execute("INSERT OR REPLACE INTO meta VALUES ('analysis_views', ?)",
                        [VIEWS_VERSION])


@contextmanager
def catalog_transaction(con: duckdb.DuckDBPyConnection, wanted: bool = True) -> Iterator[None]:
    """One transaction around a file's catalog writes (written once, not per statement), ours
    to commit or roll back; inside a caller's transaction (or not `wanted`), none of our own:
    the writes are the caller's to commit. (A BEGIN inside one would fail and make DuckDB abort
    the caller's transaction, and DuckDB has no savepoints: so it is looked for first.)"""
    own = wanted and not in_transaction(con)
    if own:
        con.execute("BEGIN TRANSACTION")
    try:
        yield
        if own:
            con.execute("COMMIT")
    except BaseException:
        if own:
            con.execute("ROLLBACK")
        raise


def in_transaction(con: duckdb.DuckDBPyConnection) -> bool:
    """The connection is inside a transaction it began (DuckDB says so nowhere else): a
    transaction keeps its id from one statement to the next, each autocommit statement gets a
    new one."""
    ask = "SELECT txid_current()"
    return con.execute(ask).fetchone() == con.execute(ask).fetchone()


def stored_version(con: duckdb.DuckDBPyConnection) -> str | None:
    """The VIEWS_VERSION of the views stored in the connection's database, None when none are."""
    row = con.execute("SELECT value FROM meta WHERE key = 'analysis_views'").fetchone()
    return None if row is None else row[0]


def store_views(con: duckdb.DuckDBPyConnection,
                protocols: Iterable[str | None] | None = None) -> bool:
    """Store the views in a recording opened for writing (a `Store`'s connection), unless the
    current set is there already, with the parts of `protocols` (None: every protocol's). True
    when they were (re)installed. (How they are stored: analysis/stored_views.py.)"""
    from . import stored_views

    return stored_views.store_views(con, protocols)


def refresh(path: str) -> bool:
    """Store the views in the recording at path (opened for writing: not while it is being
    recorded), or bring a stored set of another version up to date. True when they were
    (re)installed."""
    from wire_recorder.recorder.store import open_store

    from . import stored_views

    with open_store(path) as store:
        return store_views(store.con, stored_views.file_protocols(store.con))
