"""Stored per-session summaries (analysis/summary.py): what the loader's after-load step and
wire-import store equals what the views compute, for real kimi (Wire and ACP) and MCP sessions;
a stale or foreign row is ignored; a file without any gives the same wire-stats output."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from wire_recorder.analysis.importers import import_files
from wire_recorder.analysis.sources import open_workspace
from wire_recorder.analysis.stats import _materialize, summarize
from wire_recorder.analysis.summary import LAYOUT, TABLE, VERSION, read_summaries, summary_tables

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SAMPLES = sorted(p for p in (ROOT / "sample_sessions").glob("*.jsonl"))


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> str:
    """Every sample session (real kimi Wire and ACP, real MCP SDK peers), imported with their
    summaries stored (the samples are small: the size rule is lowered)."""
    db = str(tmp_path_factory.mktemp("summary") / "samples.db")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WIRE_SUMMARY_MIN_ROWS", "0")
        import_files([str(p) for p in SAMPLES], db)
    return db


def _copy(db: str, to: Path, sql: str | None = None) -> str:
    out = str(to)
    shutil.copy(db, out)
    if sql:
        with duckdb.connect(out) as con:
            con.execute(sql)
    return out


def _rows(db: str, computed: bool) -> list[tuple]:
    """st_sum of a workspace over db: the stored rows, or (computed) what the views give."""
    called = []
    with open_workspace([db], views=False) as ws:
        def materialize() -> None:
            called.append(1)
            _materialize(ws.con)

        summary_tables(ws.con, None, materialize=materialize)
        rows = ws.con.execute("SELECT * FROM st_sum ORDER BY session_id").fetchall()
    assert bool(called) == computed
    return rows


def _stats(db: str, *args: str) -> str:
    p = subprocess.run([str(BIN / "wire-stats"), db, *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_stored_summaries_equal_the_views_and_an_old_file_reads_the_same(imported, tmp_path):
    with duckdb.connect(imported, read_only=True) as con:
        protocols = {r[0] for r in con.execute("SELECT DISTINCT protocol FROM sessions").fetchall()}
        n = con.execute(f"SELECT count(*) FROM {TABLE} WHERE version = ?", [VERSION]).fetchone()[0]
        index = read_summaries(con)
        layout = con.execute("SELECT column_name, data_type FROM duckdb_columns() "
                             "WHERE table_name = ? ORDER BY column_index", [TABLE]).fetchall()
        views_turns = dict(con.execute(
            "SELECT session_id, count(*) FILTER (WHERE NOT history) FROM turns GROUP BY 1").fetchall())
        views_tools = dict(con.execute(
            "SELECT session_id, count(*) FILTER (WHERE NOT history) FROM tool_calls "
            "GROUP BY 1").fetchall())
    assert protocols == {"wire", "acp", "mcp"} and n == len(SAMPLES)
    assert layout == LAYOUT  # what readers accept is what summary.sql makes
    old = _copy(imported, tmp_path / "old.db", f"DROP TABLE {TABLE}")
    stored = _rows(imported, computed=False)
    assert stored == _rows(old, computed=True)
    assert any(r[3] for r in stored) and any(r[8] for r in stored)  # turns, tool calls seen
    assert index is not None and len(index) == len(SAMPLES)
    for row in index:
        assert row["turns"] == views_turns.get(row["session_id"], 0)
        assert row["tool_calls"] == views_tools.get(row["session_id"], 0)
    # the whole command, both output formats: a file without summaries reads the same
    assert _stats(imported) == _stats(old)
    assert _stats(imported, "-f", "json") == _stats(old, "-f", "json")
    with duckdb.connect(old, read_only=True) as con:
        assert read_summaries(con) is None


@pytest.mark.parametrize("tamper", [
    "UPDATE {t} SET turns = 999, turn_rows = NULL, frame_rows = frame_rows + 1 WHERE {one}",
    "UPDATE {t} SET turns = 999, turn_rows = NULL, version = '0/views-0' WHERE {one}",
    # another layout (a newer or older wire-recorder, another tool): not read at all
    "CREATE OR REPLACE TABLE {t} AS SELECT version, session_id, frame_rows, max_seq, 999 AS turns "
    "FROM {t}",
    # a view in its place (an untrusted file: it would run its own SQL when read)
    "CREATE OR REPLACE TABLE x AS FROM {t}; DROP TABLE {t}; CREATE VIEW {t} AS FROM x",
    "DELETE FROM frames WHERE seq = (SELECT max(seq) FROM frames WHERE {one}) AND {one}",
])
def test_a_stale_summary_is_ignored(imported, tmp_path, tamper):
    with duckdb.connect(imported, read_only=True) as con:
        sid = con.execute(f"SELECT session_id FROM {TABLE} WHERE turns > 0 ORDER BY 1 "
                          "LIMIT 1").fetchone()[0]
    one = f"session_id = '{sid}'"
    stale = _copy(imported, tmp_path / "stale.db", tamper.format(t=TABLE, one=one))
    with duckdb.connect(stale, read_only=True) as con:
        assert read_summaries(con) is None  # not every session has a valid row
    nostore = _copy(stale, tmp_path / "nostore.db",
                    f"DROP {'VIEW' if 'VIEW' in tamper else 'TABLE'} {TABLE}")
    with open_workspace([stale], views=False) as ws:
        got = summarize(ws).as_dict()
    with open_workspace([nostore], views=False) as ws:
        want = summarize(ws).as_dict()
    assert got == want
    assert got["overview"]["turns"] < 999


def test_the_loader_stores_the_summary_of_a_real_session(tmp_path, kimi_exe, monkeypatch):
    from tests.harness.recording import record
    from wire_recorder.recorder.store import open_store

    monkeypatch.setenv("WIRE_SUMMARY_MIN_ROWS", "0")  # (inherited by wire-proxy's loader)
    db = str(tmp_path / "rec.db")
    sid, problems = record("multi_step", db)
    assert problems == []
    with open_store(db, read_only=True) as store:
        index = read_summaries(store.con)
    assert index is not None and [r["session_id"] for r in index] == [sid]
    assert index[0]["turns"] >= 1 and index[0]["protocol"] == "wire"
    old = _copy(db, tmp_path / "old.db", f"DROP TABLE {TABLE}")
    assert _rows(db, computed=False) == _rows(old, computed=True)
