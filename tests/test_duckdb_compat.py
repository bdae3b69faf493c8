"""Recordings open in every DuckDB >= 1.4: a session of the real `kimi --wire` recorded through
`wire-proxy`, its Parquet export and the sample transcripts `wire-import`ed are read by DuckDB 1.4
(its own venv, `.peers/duckdb14`, made by scripts/setup-peers) with the same frame counts, and the
analysis views run by DuckDB 1.4 itself (wire-query from the wheel of this tree, installed into
that venv) give the same row counts as with the DuckDB the project runs on. Files written before
recordings were created in the 1.4 format keep loading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from sample_sessions.scenarios import SCENARIOS
from tests.harness.install import built_dist, clean_env, pip_install
from tests.harness.peers import PEERS, PeerMissing, need
from tests.harness.replay import BIN, SAMPLES, record_scenario
from tests.harness.wire import check_scenario
from wire_recorder.recorder import store as store_mod
from wire_recorder.recorder.store import open_store

VENV = PEERS / "duckdb14"
RECORDED = ["approve_shell", "multi_step"]

# Run by either interpreter: what plain DuckDB (no wire-recorder) reads from a file or export.
PROBE = r"""
import json, sys, duckdb
path, kind = sys.argv[1], sys.argv[2]
if kind == "db":
    con = duckdb.connect(path, read_only=True)
    frames, sessions = "frames", "sessions"
else:
    con = duckdb.connect()
    frames = f"read_parquet('{path}/frames/**/*.parquet', hive_partitioning = true)"
    sessions = f"read_parquet('{path}/sessions/**/*.parquet', hive_partitioning = true)"
q = lambda sql: con.execute(sql).fetchall()
print(json.dumps({
    "version": duckdb.__version__,
    "frames": q(f"SELECT count(*) FROM {frames}")[0][0],
    "sessions": q(f"SELECT count(*) FROM {sessions}")[0][0],
    "by_direction": sorted(map(list, q(f"SELECT direction, count(*) FROM {frames} GROUP BY 1"))),
    "bytes": q(f"SELECT sum(byte_len) FROM {frames}")[0][0],
}))
"""


def find_duckdb14() -> Path:
    py = VENV / "bin" / "python"
    hint = "install it with `bash scripts/setup-peers` (creates .peers/duckdb14 with duckdb==1.4.*)"
    if not py.exists():
        raise PeerMissing(f"DuckDB 1.4 venv not found: {py} does not exist", hint)
    p = subprocess.run([str(py), "-c", "import duckdb; print(duckdb.__version__)"],
                       capture_output=True, text=True, env=clean_env())
    if p.returncode != 0 or not p.stdout.startswith("1.4."):
        raise PeerMissing(f"{py} has no DuckDB 1.4 ({(p.stdout or p.stderr).strip()[:200]})", hint)
    return VENV / "bin"


@pytest.fixture(scope="session")
def duckdb14(tmp_path_factory) -> Path:
    """bin/ of .peers/duckdb14 with the wheel of this tree in it (skip, fail on CI, if missing)."""
    bin_dir = need(find_duckdb14, "DuckDB 1.4 venv")
    dist = built_dist(tmp_path_factory.mktemp("build"))
    # only wire-recorder itself: the venv keeps its DuckDB 1.4
    pip_install(bin_dir / "python", "--no-deps", "--force-reinstall", "--no-index", str(dist.wheel))
    assert find_duckdb14() == bin_dir
    return bin_dir


@pytest.fixture(scope="module")
def files(kimi_recordings, tmp_path_factory) -> dict[str, tuple[str, str]]:
    """name -> (path, kind): a real recording, its Parquet export and imported transcripts."""
    d = tmp_path_factory.mktemp("compat")
    # the first session is the run's shared recording (tests/harness/kimi_recordings.py); the
    # proxy records the second into a copy of it
    first = kimi_recordings.get(RECORDED[:1])[RECORDED[0]]
    assert first.problems == []
    rec = Path(first.copy_to(d, "recorded"))
    for name in RECORDED[1:]:
        assert check_scenario(SCENARIOS[name], record_scenario(name, rec)) == []
    export = d / "export"
    p = subprocess.run([str(BIN / "wire-export"), str(rec), "--format", "parquet", "--out",
                        str(export)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    imported = d / "imported.db"
    # every sample transcript: Wire, ACP and MCP, so each protocol's SQL runs in DuckDB 1.4
    p = subprocess.run([str(BIN / "wire-import"), *map(str, sorted(SAMPLES.glob("*.jsonl"))), "--db",
                        str(imported), "-q"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return {"recorded": (str(rec), "db"), "export": (str(export), "parquet"),
            "imported": (str(imported), "db")}


def probe(python: str | Path, path: str, kind: str) -> dict:
    p = subprocess.run([str(python), "-c", PROBE, path, kind], capture_output=True, text=True,
                       timeout=120, env=clean_env())
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def view_counts(bin_dir: Path, path: str) -> dict[str, int]:
    """Row count of every view wire-query offers over `path`, as that venv's DuckDB runs them."""
    def q(sql: str) -> list[dict]:
        p = subprocess.run([str(bin_dir / "wire-query"), path, sql, "--format", "json"],
                           capture_output=True, text=True, timeout=120, env=clean_env())
        assert p.returncode == 0, f"{bin_dir / 'wire-query'}: {p.stderr[-3000:]}"
        return json.loads(p.stdout)

    names = [r["view_name"] for r in q("SELECT view_name FROM duckdb_views() "
                                       "WHERE temporary AND NOT internal ORDER BY 1")]
    assert {"frames", "sessions", "turns", "tool_calls"} <= set(names)
    (row,) = q("SELECT " + ", ".join(f'(SELECT count(*) FROM "{n}") AS "{n}"' for n in names))
    return row


@pytest.mark.parametrize("name", ["recorded", "export", "imported"])
def test_duckdb_14_reads_the_same_frames(files, duckdb14, name):
    path, kind = files[name]
    current = probe(sys.executable, path, kind)
    old = probe(duckdb14 / "python", path, kind)
    assert old.pop("version").startswith("1.4.")
    assert current.pop("version") == duckdb.__version__
    assert old == current
    assert current["frames"] > 0


@pytest.mark.parametrize("name", ["recorded", "export", "imported"])
def test_duckdb_14_runs_the_views_with_the_same_counts(files, duckdb14, name):
    path, _ = files[name]
    current = view_counts(BIN, path)
    assert view_counts(duckdb14, path) == current
    assert current["turns"] > 0 and current["tool_calls"] > 0


def test_recordings_are_created_in_the_oldest_supported_format(files):
    for name in ("recorded", "imported"):
        assert _storage(files[name][0]).startswith("v1.4."), name


def test_a_file_in_a_newer_format_keeps_loading(tmp_path, monkeypatch):
    """A recording written before files were created in the 1.4 format (in the writing DuckDB's
    own format) opens, takes more sessions and is read back, keeping its format."""
    db = str(tmp_path / "new-format.db")
    monkeypatch.setattr(store_mod, "STORAGE_COMPATIBILITY", "latest")
    with open_store(db):
        pass
    monkeypatch.undo()
    before = _storage(db)
    assert not before.startswith("v1.4.")
    r = subprocess.run([str(BIN / "wire-import"), str(SAMPLES / "hook.jsonl"), "--db", db, "-q"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with open_store(db, read_only=True) as store:
        assert len(store.sessions()) == 1
    assert _storage(db) == before
    assert os.path.getsize(db) > 0


def _storage(db: str) -> str:
    con = duckdb.connect(db, read_only=True)
    try:
        row = con.execute("SELECT tags FROM duckdb_databases() "
                          "WHERE database_name = current_database()").fetchone()
    finally:
        con.close()
    assert row is not None
    return str(row[0].get("storage_version", ""))
