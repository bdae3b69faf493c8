"""Small sessions, small files: a session of a few frames recorded by the real wire-proxy costs
at most 256 KB on disk (the loader fills a file it creates in DuckDB's 256 KiB blocks, which cost
1.5 MB for such a session, and copies a small one into 16 KiB blocks at the session's end:
`store.shrink`). Sizes, not timings: they hold on any machine."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from tests.harness.proxy import db_rows, run_proxy
from wire_recorder.analysis.importers import import_files
from wire_recorder.recorder.store import (
    BLOCK_SIZE,
    LOADING_BLOCK_SIZE,
    STORAGE_COMPATIBILITY,
    shrink,
)

SAMPLES = Path(__file__).resolve().parent.parent / "sample_sessions"

FRAMES = b"".join(b'{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart",'
                  b'"payload":{"type":"text","text":"hello %d"}}}\n' % i for i in range(2))


def test_a_two_frame_session_file_is_under_256_kb(tmp_path):
    db = str(tmp_path / "small.db")
    p = run_proxy(["-q", "--db", db, "--", "cat"], FRAMES, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == FRAMES
    assert db_rows(db, "SELECT direction, count(*) FROM frames WHERE direction IN ('c2a', 'a2c') "
                       "GROUP BY 1 ORDER BY 1") == [("a2c", 2), ("c2a", 2)]
    assert db_rows(db, "SELECT block_size FROM pragma_database_size()") == [(16384,)]
    assert os.path.getsize(db) <= 256 * 1024
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


def _in_blocks(src: str, out: str, block: int) -> None:
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{src}' AS src (READ_ONLY)")
        con.execute(f"ATTACH '{out}' AS out (BLOCK_SIZE {block}, STORAGE_VERSION "
                    f"'{STORAGE_COMPATIBILITY}')")
        con.execute("COPY FROM DATABASE src TO out")
    finally:
        con.close()


def test_shrink_copies_every_table_and_view_into_small_blocks_and_keeps_only_a_smaller_file(
        tmp_path):
    recorded = str(tmp_path / "recorded.db")
    # imported sessions: the file then holds analysis's views as well as the tables
    import_files([str(SAMPLES / "multi_step.jsonl"), str(SAMPLES / "approve_shell.jsonl")],
                 recorded)
    big = str(tmp_path / "big.db")
    _in_blocks(recorded, big, LOADING_BLOCK_SIZE)
    os.chmod(big, 0o600)
    before = _catalog_and_rows(big)
    assert {kind for kind, _, _ in before["objects"]} >= {"table", "view"}
    assert len(before["frames"]) > 20
    size = os.path.getsize(big)

    assert not shrink(big, max_bytes=size - 1)  # over the bound: left alone
    assert os.path.getsize(big) == size

    assert shrink(big)
    assert db_rows(big, "SELECT block_size FROM pragma_database_size()") == [(BLOCK_SIZE,)]
    assert os.path.getsize(big) < size
    assert _catalog_and_rows(big) == before
    assert os.stat(big).st_mode & 0o777 == 0o600
    assert not [n for n in os.listdir(tmp_path) if "shrink" in n]

    inode = os.stat(big).st_ino
    assert not shrink(big)  # in small blocks already
    assert os.stat(big).st_ino == inode


def test_a_file_that_already_holds_sessions_is_appended_to_not_rewritten(tmp_path):
    db = str(tmp_path / "shared.db")
    inodes = []
    for _ in range(2):
        p = run_proxy(["-q", "--db", db, "--", "cat"], FRAMES, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        db_rows(db, "SELECT 1")  # (waits for the loader the proxy left)
        inodes.append(os.stat(db).st_ino)
    assert inodes[0] == inodes[1]
    assert db_rows(db, "SELECT count(*) FROM sessions") == [(2,)]
    assert db_rows(db, "SELECT block_size FROM pragma_database_size()") == [(BLOCK_SIZE,)]
