"""What the user's folder holds never takes the place of our code: the processes the tools
start themselves (the proxy's loader, wire-ui's workers and forks) run with `python -P`, so a
`duckdb.py` in the folder wire-proxy is started from is not imported instead of DuckDB. And
a loader that cannot start at all says so in one line, keeping the spool."""

from __future__ import annotations

import subprocess
import sys

from tests.harness.proxy import db_rows, run_proxy

FRAME = b'{"jsonrpc":"2.0","method":"ping","id":1}\n'
SHADOW = 'raise SystemExit("the duckdb.py of the user\'s folder was imported")\n'


def test_a_duckdb_py_in_the_users_folder_is_not_imported_by_the_loader(tmp_path):
    (tmp_path / "duckdb.py").write_text(SHADOW)
    env = {"PATH": "/usr/bin:/bin", "WIRE_RECORDER_HOME": str(tmp_path / "home")}
    res = run_proxy(["--wait", "600", "--db", "s.db", "--", "cat"], FRAME, env=env,
                    cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr
    assert res.stdout == FRAME
    assert b"imported" not in res.stderr and b"recording failed" not in res.stderr
    assert not list(tmp_path.glob("*.spool"))
    assert db_rows(str(tmp_path / "s.db"),
                   "SELECT raw FROM frames WHERE direction = 'c2a'") == [(FRAME.rstrip(b"\n"),)]


def test_a_loader_that_cannot_start_says_so_in_one_line(tmp_path):
    # a broken install (here: a duckdb on PYTHONPATH that fails), not the user's folder
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "duckdb.py").write_text(SHADOW)
    spool = tmp_path / "s.db.x.spool"
    spool.write_bytes(b"")
    res = subprocess.run([sys.executable, "-P", "-m", "wire_recorder.recorder.loader_process",
                          str(spool)], capture_output=True, text=True, timeout=600,
                         env={"PYTHONPATH": str(tmp_path / "broken"), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 2
    (line,) = res.stderr.splitlines()
    assert line.startswith("wire-proxy: recording failed (the recorder cannot start: SystemExit")
    assert f"run `wire-proxy recover {spool}` later" in line
    assert "Traceback" not in res.stderr and spool.exists()
