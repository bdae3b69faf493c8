"""Small sessions, small files: a session of a few frames recorded by the real wire-proxy costs
at most 256 KB on disk (new files get 16 KiB blocks; with DuckDB's default 256 KiB blocks the same
file was 1.5 MB). A size, not a timing: it holds on any machine."""

from __future__ import annotations

import os

from tests.harness.proxy import db_rows, run_proxy

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
