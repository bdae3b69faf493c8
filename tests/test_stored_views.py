"""The analysis views stored in a recording by its loader (analysis/stored_views.py, an
after-load hook): a plain DuckDB opened read-only, the project's (2.x) and DuckDB 1.4 (its own
venv, .peers/duckdb14, without wire-recorder), answers `select * from token_usage` and
`tool_calls` on a fresh proxy recording of the real kimi; readers keep their own TEMP views, and
a stale stored set is replaced when the loader next closes a session in the file."""

from __future__ import annotations

import json
import subprocess

import duckdb
import pytest

from tests.harness.install import clean_env
from tests.harness.peers import need
from tests.harness.proxy import echo_agent_cmd, run_proxy
from tests.test_duckdb_compat import find_duckdb14
from wire_recorder.analysis.query import query
from wire_recorder.analysis.views import VIEWS_VERSION
from wire_recorder.recorder.store import open_store

PROBE = r"""
import json, sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
con.execute("SET enable_progress_bar = false")  # (1.4 draws it on stdout)
out = {"version": duckdb.__version__}
for view in ("token_usage", "tool_calls"):
    cur = con.execute(f"select * from {view} order by seq")
    out[view] = [[d[0] for d in cur.description], [list(map(str, r)) for r in cur.fetchall()]]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def recording(kimi_recordings, tmp_path_factory) -> str:
    rec = kimi_recordings.get(["approve_shell"])["approve_shell"]  # recorded once per test run
    assert rec.result.exit_code == 0, rec.result.stderr[-2000:]
    return rec.copy_to(tmp_path_factory.mktemp("stored"), "fresh")


def _read(python: str, db: str) -> dict:
    p = subprocess.run([python, "-c", PROBE, db], capture_output=True, text=True, timeout=600,
                       env=clean_env())
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def test_plain_duckdb_reads_the_views_of_a_fresh_recording(recording):
    con = duckdb.connect(recording, read_only=True)
    usage = con.sql("select * from token_usage").fetchall()
    calls = con.sql("select tool_name, arguments, status from tool_calls").fetchall()
    version = con.execute("select value from meta where key = 'analysis_views'").fetchone()
    con.close()
    # the same rows the readers' own (TEMP) views give
    cols, rows = query([recording], "select * from token_usage order by seq")
    assert len(usage) == len(rows) == 2
    assert sorted(r[cols.index("output")] for r in rows) == [6, 15]
    assert calls == [("Shell", '{"command": "echo hello"}', "completed")]
    assert version == (VIEWS_VERSION,)


def test_duckdb_14_and_2_read_the_same_rows(recording):
    import sys

    ours = _read(sys.executable, recording)
    old = _read(str(need(find_duckdb14, "DuckDB 1.4 venv") / "python"), recording)
    assert old["version"].startswith("1.4.") and not ours["version"].startswith("1.4.")
    for view in ("token_usage", "tool_calls"):
        assert old[view] == ours[view] and len(ours[view][1]) >= 1, view


def test_a_stale_set_is_replaced_and_readers_never_use_it(tmp_path):
    db = str(tmp_path / "stale.db")
    hello = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'
    assert run_proxy(["-q", "--db", db, "--", *echo_agent_cmd()], hello).returncode == 0
    with open_store(db) as store:  # an older set, and a view that says something else
        store.con.execute("UPDATE meta SET value = '0' WHERE key = 'analysis_views'")
        store.con.execute("CREATE OR REPLACE VIEW turns AS SELECT 42 AS bogus")
    cols, rows = query([db], "select count(*) from turns")
    assert rows == [(0,)]  # the reader's own view, not the stored one
    second = run_proxy(["-q", "--db", db, "--", *echo_agent_cmd()], hello)
    assert second.returncode == 0, second.stderr
    con = duckdb.connect(db, read_only=True)
    assert con.execute("select value from meta where key = 'analysis_views'").fetchone() == \
        (VIEWS_VERSION,)
    assert "bogus" not in [d[0] for d in con.execute("select * from turns").description]
    assert con.execute("select count(*) from sessions").fetchone() == (2,)


def _parts(db: str) -> tuple[str, str]:
    """The protocols the stored set has parts for, and the stored query of `tool_calls`."""
    con = duckdb.connect(db, read_only=True)
    try:
        (have,) = con.execute("select value from meta where key = 'analysis_views_protocols'"
                              ).fetchone()
        (query,) = con.execute("select macro_definition from duckdb_functions() "
                               "where function_name = 'wr_view_tool_calls'").fetchone()
        assert con.execute("select count(*) from tool_calls").fetchone() == (0,)
    finally:
        con.close()
    return have, query


def test_a_file_holds_the_parts_of_its_sessions_protocols_only(tmp_path):
    """A Wire recording carries no ACP or MCP SQL (half the file of a short session); a session
    of another protocol stored later in the same file brings its parts."""
    db = str(tmp_path / "mixed.db")
    hello = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'
    for proto in ("wire", "acp"):
        p = run_proxy(["-q", "--protocol", proto, "--db", db, "--", *echo_agent_cmd()], hello)
        assert p.returncode == 0, p.stderr
        have, query = _parts(db)
        if proto == "wire":
            assert have == "wire" and "'wire'" in query and "'acp'" not in query
            assert "'mcp'" not in query
    assert have == "acp,wire" and "'wire'" in query and "'acp'" in query
    assert "'mcp'" not in query


def _tree(con: duckdb.DuckDBPyConnection, sql: str) -> object:
    """DuckDB's parse of sql, without where in the text each part was."""
    got = json.loads(con.execute("select json_serialize_sql(?)", [sql]).fetchone()[0])
    assert not got["error"], got

    def strip(x: object) -> object:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if not k.startswith("query_location")}
        return [strip(v) for v in x] if isinstance(x, list) else x
    return strip(got)


def test_the_stored_sql_parses_as_the_views_sql():
    """What a file stores of each view (minified: no comments, no spare spaces) is the same
    statement to DuckDB as the view's SQL, for every protocol's parts; a string that holds what
    looks like a comment keeps it."""
    from wire_recorder.analysis.stored_views import minified
    from wire_recorder.analysis.views import VIEW_NAMES, view_sql

    con = duckdb.connect()
    for name in VIEW_NAMES:
        query = view_sql(name).split(" AS\n", 1)[1]
        short = minified(query)
        assert len(short) < len(query) and _tree(con, short) == _tree(con, query), name
    sql = "SELECT a - -1 AS x, 'it''s -- not /* a */ comment' AS y -- one\nFROM t /* two */"
    assert minified(sql) == "SELECT a - - 1 AS x,'it''s -- not /* a */ comment' AS y FROM t"
