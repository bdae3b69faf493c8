"""Small sessions, small files: a session of a few frames recorded by the real wire-proxy costs
at most 512 KB on disk (new files get 16 KiB blocks; with DuckDB's default 256 KiB blocks the same
file was 1.5 MB; the analysis views the loader stores in it take about 100 KB of that). A long session in a file the loader created goes on in 256 KiB blocks, a copy of
the file (`store.grow_blocks`). Sizes and contents, not timings: they hold on any machine."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import duckdb

from tests.harness.proxy import (
    WIRE_PROXY,
    db_rows,
    loaders_of,
    run_proxy,
    stream_of,
    wait_until,
)
from wire_recorder.analysis.importers import import_files
from wire_recorder.recorder.store import (
    BLOCK_SIZE,
    GROW_ROWS,
    LOADING_BLOCK_SIZE,
    grow_blocks,
    open_store,
)

SAMPLES = Path(__file__).resolve().parent.parent / "sample_sessions"

FRAMES = b"".join(b'{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart",'
                  b'"payload":{"type":"text","text":"hello %d"}}}\n' % i for i in range(2))


def test_a_two_frame_session_file_is_under_512_kb(tmp_path):
    db = str(tmp_path / "small.db")
    p = run_proxy(["-q", "--db", db, "--", "cat"], FRAMES, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == FRAMES
    assert db_rows(db, "SELECT direction, count(*) FROM frames WHERE direction IN ('c2a', 'a2c') "
                       "GROUP BY 1 ORDER BY 1") == [("a2c", 2), ("c2a", 2)]
    assert db_rows(db, "SELECT block_size FROM pragma_database_size()") == [(16384,)]
    assert os.path.getsize(db) <= 512 * 1024
    assert not os.path.exists(db + ".wal")


def _catalog_and_rows(db: str) -> dict:
    """Every object's definition and every table's rows, in a stable order."""
    con = duckdb.connect(db, read_only=True)
    try:
        out = {"objects": con.execute(
            "SELECT 'table', table_name, sql FROM duckdb_tables() WHERE NOT internal UNION ALL "
            "SELECT 'view', view_name, sql FROM duckdb_views() WHERE NOT internal UNION ALL "
            "SELECT 'index', index_name, sql FROM duckdb_indexes() UNION ALL "
            "SELECT 'macro', function_name, macro_definition FROM duckdb_functions() "
            "WHERE NOT internal AND function_type LIKE '%macro' ORDER BY ALL").fetchall()}
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT internal "
                                    "ORDER BY 1").fetchall():
            out[table] = con.execute(f'SELECT * FROM "{table}" ORDER BY ALL').fetchall()
        for (view,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal "
                                   "ORDER BY 1").fetchall():
            out["view " + view] = con.execute(f'SELECT count(*) FROM "{view}"').fetchall()
        return out
    finally:
        con.close()


def test_grow_blocks_copies_every_table_and_view_into_large_blocks(tmp_path):
    db = str(tmp_path / "imported.db")
    # imported sessions: the file then holds analysis's views as well as the tables
    import_files([str(SAMPLES / "multi_step.jsonl"), str(SAMPLES / "approve_shell.jsonl")], db)
    os.chmod(db, 0o600)
    before = _catalog_and_rows(db)
    assert {kind for kind, _, _ in before["objects"]} >= {"table", "view"}
    assert len(before["frames"]) > 20

    store = open_store(db)
    try:
        store.con.execute("CHECKPOINT")
        assert grow_blocks(store)
    finally:
        store.close()
    assert db_rows(db, "SELECT block_size FROM pragma_database_size()") == [(LOADING_BLOCK_SIZE,)]
    assert _catalog_and_rows(db) == before
    assert os.stat(db).st_mode & 0o777 == 0o600
    assert sorted(os.listdir(tmp_path)) == ["imported.db"]

    store = open_store(db)
    try:
        assert not grow_blocks(store)  # in large blocks already
    finally:
        store.close()


def _frames(n: int, tag: bytes) -> bytes:
    return b"".join(b'{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart",'
                    b'"payload":{"type":"text","text":"%s %d"}}}\n' % (tag, i) for i in range(n))


def test_a_long_session_goes_on_in_large_blocks_and_keeps_every_byte(tmp_path):
    db = str(tmp_path / "long.db")
    # half-made copies: one of a killed loader (removed), one of a live process (pid 1: kept)
    for leftover in ("long.db.999999999.grow", "long.db.999999999.grow.wal", "long.db.1.grow"):
        (tmp_path / leftover).write_bytes(b"partial")
    data = _frames(GROW_ROWS // 2 + 1000, b"long")
    p = run_proxy(["-q", "--db", db, "--", "cat"], data, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == data
    assert db_rows(db, "SELECT block_size FROM pragma_database_size()") == [(LOADING_BLOCK_SIZE,)]
    assert stream_of(db, "c2a") == data
    assert stream_of(db, "a2c") == data
    assert db_rows(db, "SELECT frame_count, lost_frames FROM sessions") == [
        (2 * (GROW_ROWS // 2 + 1000), 0)]
    assert sorted(n for n in os.listdir(tmp_path) if ".grow" in n or n.endswith(".wal")) == [
        "long.db.1.grow"]


def test_a_file_that_already_holds_sessions_is_appended_to_not_rewritten(tmp_path):
    db = str(tmp_path / "shared.db")
    inodes = []
    for data in (FRAMES, _frames(GROW_ROWS // 2 + 1000, b"later")):
        # what a loader killed while copying left: every later loader of the file removes it
        (tmp_path / "shared.db.999999999.grow").write_bytes(b"partial")
        p = run_proxy(["-q", "--db", db, "--", "cat"], data, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        db_rows(db, "SELECT 1")  # (waits for the loader the proxy left)
        inodes.append(os.stat(db).st_ino)
        assert not (tmp_path / "shared.db.999999999.grow").exists()
    assert inodes[0] == inodes[1]
    assert db_rows(db, "SELECT count(*) FROM sessions") == [(2,)]
    assert db_rows(db, "SELECT block_size FROM pragma_database_size()") == [(BLOCK_SIZE,)]


def test_a_loader_killed_after_growing_the_file_leaves_what_recover_completes(tmp_path):
    db = str(tmp_path / "grown.db")
    p = subprocess.Popen([WIRE_PROXY, "-q", "--db", db, "--", "cat"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    echoed: list[bytes] = []
    drain = threading.Thread(target=lambda: echoed.append(p.stdout.read()))
    drain.start()
    # the loader creates the file (16 KiB blocks) before any frame comes
    assert wait_until(lambda: os.path.exists(db), timeout=60)
    created = os.stat(db).st_ino
    (loader,) = loaders_of(p.pid)
    before, after = _frames(GROW_ROWS // 2 + 1000, b"before"), _frames(3000, b"after")
    p.stdin.write(before)
    p.stdin.flush()
    assert wait_until(lambda: os.stat(db).st_ino != created, timeout=120)  # grown, renamed
    os.kill(loader, signal.SIGKILL)
    p.stdin.write(after)
    p.stdin.close()
    p.wait(timeout=120)
    drain.join(timeout=60)
    assert echoed == [before + after]  # the relay never depended on the loader

    r = subprocess.run([WIRE_PROXY, "recover", db], capture_output=True, timeout=300,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not list(tmp_path.glob("*.spool")) and not list(tmp_path.glob("*.grow*"))
    assert db_rows(db, "SELECT block_size FROM pragma_database_size()") == [(LOADING_BLOCK_SIZE,)]
    assert stream_of(db, "c2a") == before + after
    assert stream_of(db, "a2c") == before + after
    assert db_rows(db, "SELECT lost_frames FROM sessions") == [(0,)]
