"""Readers and untrusted recordings: wire-query's SQL reaches the recordings and nothing else
(unless --unsafe), and a `.db` whose recorder tables are views is refused by every reader."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

BIN = Path(sys.executable).parent
SAMPLES = Path(__file__).resolve().parents[1] / "sample_sessions"
SECRET = "s3cr3t-do-not-print-7f1c"


def run(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("rec") / "approve_shell.db"
    res = run(BIN / "wire-import", SAMPLES / "approve_shell.jsonl", "--db", db, "-q")
    assert res.returncode == 0, res.stderr
    return db


@pytest.fixture
def secret(tmp_path) -> Path:
    p = tmp_path / "secret.txt"
    p.write_text(SECRET + "\n")
    return p


def frame_count(db: Path) -> int:
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute("SELECT count(*) FROM frames").fetchone()
    assert row is not None
    return int(row[0])


def refused(res: subprocess.CompletedProcess[str], needle: str = "--unsafe") -> None:
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert needle in res.stderr, res.stderr
    assert SECRET not in res.stdout + res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("sql", [
    "select * from read_text('{p}')",
    "select content from read_text('{p}')",
    "select * from read_csv('{p}')",
    "select * from read_json('{p}')",
    "select * from read_parquet('{p}')",
    "select * from glob('{d}/*')",
])
def test_reading_a_file_is_refused(recording, secret, sql):
    refused(run(BIN / "wire-query", recording, sql.format(p=secret, d=secret.parent)))


def test_unsafe_lets_the_sql_read_files(recording, secret):
    """So it is the lock that blocks the reads above."""
    res = run(BIN / "wire-query", "--unsafe", recording,
              f"select content from read_text('{secret}')", "-f", "csv")
    assert res.returncode == 0, res.stderr
    assert SECRET in res.stdout


def test_copy_to_is_refused_and_writes_nothing(recording, tmp_path):
    for sql in ["COPY (select 1) TO 'x.csv'", "COPY (select 1) TO 'x.csv' (USE_TMP_FILE false)",
                "EXPORT DATABASE 'exp'", "COPY frames TO 'x.csv'"]:
        refused(run(BIN / "wire-query", recording, sql, cwd=tmp_path))
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "exp").exists()


def test_recordings_cannot_be_written(recording):
    before = frame_count(recording)
    for sql in [f"ATTACH '{recording}' AS w (READ_ONLY false); DELETE FROM w.frames",
                f"DETACH rec0; ATTACH '{recording}' AS rec0; DELETE FROM rec0.frames",
                "DETACH rec0"]:
        refused(run(BIN / "wire-query", recording, sql))
    for sql in ["DELETE FROM rec0.frames", "USE rec0; DELETE FROM frames",
                "DROP TABLE rec0.frames"]:
        res = run(BIN / "wire-query", recording, sql)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert frame_count(recording) == before


@pytest.mark.parametrize("sql", ["INSTALL httpfs", "LOAD httpfs", "FORCE INSTALL httpfs",
                                 "SET enable_external_access = true",
                                 "RESET lock_configuration",
                                 "SET allowed_directories = ['/']",
                                 "SET temp_directory = '/tmp'"])
def test_extensions_and_settings_are_refused(recording, sql):
    refused(run(BIN / "wire-query", recording, sql))


DOCUMENTED = [
    ("{db}", "select direction, method, msg_type, count(*) from frames group by all"),
    ("{db}", "select tool_name, count(*), median(duration_ms) from tool_calls group by 1"),
    ("{db}", "select session_id, turn, total_tokens, status from turns order by 3 desc limit 5"),
    (str(SAMPLES / "acp_tools.jsonl"), "select turn, tool_name, status, duration_ms, approval, "
                                       "approval_wait_ms from tool_calls order by seq"),
    (str(SAMPLES / "mcp_demo_2026.jsonl"), "select type, via, tool_name, wait_ms, outcome "
                                           "from requests"),
    ("{db}", "select protocol, problem, count(*) from anomalies group by all"),
    ("{db}", "select source_file, count(*) from sessions group by all"),
]


@pytest.mark.parametrize(("src", "sql"), DOCUMENTED)
def test_documented_queries_still_work(recording, src, sql):
    res = run(BIN / "wire-query", src.format(db=recording), sql, "-f", "csv")
    assert res.returncode == 0, res.stderr


def test_a_parquet_export_is_still_read(recording, tmp_path):
    """Its folder is read lazily by the views, after the lock: relative --out, too."""
    res = run(BIN / "wire-export", recording, "--format", "parquet", "--out", "pq", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    res = run(BIN / "wire-query", "pq", "select count(*) from frames", "-f", "csv", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[-1] == str(frame_count(recording))
    res = run(BIN / "wire-query", "pq", "select count(*) from turns", "-f", "csv", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    # ... but only through the views: the folder is readable, not writable
    refused(run(BIN / "wire-query", "pq", "COPY (select 1) TO 'pq/frames/x.parquet'",
                cwd=tmp_path))
    assert not (tmp_path / "pq" / "frames" / "x.parquet").exists()


# -- untrusted .db: the recorder's tables are views or macros --------------------------------

def crafted(recording: Path, tmp_path: Path, secret: Path, what: str) -> Path:
    db = tmp_path / f"crafted_{what}.db"
    shutil.copy(recording, db)
    with duckdb.connect(str(db)) as con:
        if what == "frames":
            cols = ", ".join(r[0] for r in con.execute("DESCRIBE frames").fetchall()
                             if r[0] != "raw")
            con.execute("CREATE TABLE keep AS SELECT * FROM frames")
            con.execute("DROP TABLE frames")
            con.execute(f"CREATE VIEW frames AS SELECT {cols}, content::BLOB AS raw "
                        f"FROM keep, read_text('{secret}')")
        elif what == "sessions":
            con.execute("ALTER TABLE sessions RENAME TO keep")
            con.execute(f"CREATE VIEW sessions AS SELECT * REPLACE (content AS proxy_version) "
                        f"FROM keep, read_text('{secret}')")
        elif what == "meta":
            con.execute("ALTER TABLE meta RENAME TO keep")
            con.execute(f"CREATE VIEW meta AS SELECT key, value || content AS value "
                        f"FROM keep, read_text('{secret}')")
        else:  # a table macro where the frames table was
            con.execute("DROP TABLE frames")
            con.execute(f"CREATE MACRO frames() AS TABLE SELECT * FROM read_text('{secret}')")
    return db


@pytest.mark.parametrize("what", ["frames", "sessions", "meta", "macro"])
def test_every_reader_refuses_a_crafted_db(recording, tmp_path, secret, what):
    db = crafted(recording, tmp_path, secret, what)
    kind = "a macro" if what == "macro" else "a view"
    name = "frames" if what == "macro" else what
    needle = f"not a wire-recorder recording: {name} is {kind}"
    out = tmp_path / "out"
    cmds = [[BIN / "wire-export", db],
            [BIN / "wire-export", db, "--format", "jsonl", "-o", out / "x.jsonl"],
            [BIN / "wire-export", db, "--format", "parquet", "--out", out / "pq"],
            [BIN / "wire-show", db],
            [BIN / "wire-show", db, "--html", out / "r.html"],
            [BIN / "wire-stats", db],
            [BIN / "wire-query", db, "select * from frames"],
            [BIN / "wire-query", "--unsafe", db, "select * from frames"],
            [BIN / "wire-replay", db, "--serve"],
            [BIN / "wire-replay", db, "--", "true"]]
    out.mkdir()
    for cmd in cmds:
        res = run(*cmd)
        assert res.returncode == 2, (cmd, res.stdout, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1, (cmd, res.stderr)
        assert needle in res.stderr, (cmd, res.stderr)
        assert SECRET not in res.stdout + res.stderr, cmd
    for root, _dirs, files in os.walk(out):
        for f in files:
            assert SECRET not in (Path(root) / f).read_text(errors="replace"), f
