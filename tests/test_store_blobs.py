"""Large frames in the `<db>.blobs` sidecar, and files of the older schema (1) without it.
(tests/test_model.py opens the stored recordings of every schema version.)"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import orjson
import pytest

# schema 1's DDL as that release wrote it, not as today's registry makes it
from tests.data.make_schema_fixtures import FRAMES_DDL, META_DDL, SESSIONS_DDL
from tests.harness.proxy import db_rows, echo_agent_cmd, run_proxy
from wire_recorder.recorder.errors import NotARecording, SchemaTooNew
from wire_recorder.recorder.store import INLINE_MAX, SCHEMA_VERSION, open_store

BIN = Path(sys.executable).parent
BIG = b'{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart","payload":' \
      b'{"type":"text","text":"' + b"y\xc3\xa9" * (1 << 19) + b'"}}}'  # ~1.5 MB, valid UTF-8


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, timeout=120)


def make_v1(path: str, frames: list[bytes]) -> None:
    """A recording as wire-recorder wrote it before schema 2 (no blob_offset column)."""
    con = duckdb.connect(path)
    con.execute(META_DDL)
    con.execute(SESSIONS_DDL)
    con.execute(FRAMES_DDL)
    con.execute("INSERT INTO meta VALUES ('schema_version', '1'), ('created_by', 'wire-recorder')")
    con.execute("INSERT INTO sessions (session_id, started_at, source, frame_count, mono_start_ns) "
                "VALUES ('old1', TIMESTAMP '2025-01-02 03:04:05', 'proxy', ?, 0)", [len(frames)])
    for i, raw in enumerate(frames, 1):
        con.execute("INSERT INTO frames (session_id, seq, ts, mono_ns, direction, raw, newline, "
                    "byte_len, kind, known) VALUES ('old1', ?, TIMESTAMP '2025-01-02 03:04:05', ?, "
                    "'a2c', ?, true, ?, 'invalid', false)", [i, i * 1000, raw, len(raw)])
    con.close()


OLD_FRAMES = [b"one", b'{"jsonrpc":"2.0","id":1,"result":{}}', b"x" * (INLINE_MAX + 10)]


def test_schema_1_file_reads_read_only_and_migrates_when_opened_for_writing(tmp_path):
    db = str(tmp_path / "old.db")
    make_v1(db, OLD_FRAMES)
    with open_store(db, read_only=True) as store:
        frames = store.frames("old1")
    assert [f.raw for f in frames] == OLD_FRAMES
    assert all(f.blob_offset is None for f in frames)
    assert db_rows(db, "SELECT value FROM meta WHERE key = 'schema_version'") == [("1",)]

    q = cli("wire-query", "-f", "csv", db,
            "select seq, byte_len, blob_offset from frames order by seq")
    assert q.returncode == 0, q.stderr
    assert q.stdout.split()[-1] == f"3,{INLINE_MAX + 10},".encode()

    with open_store(db) as store:
        assert store.version == SCHEMA_VERSION == 5
        assert [f.raw for f in store.frames("old1")] == OLD_FRAMES
        assert all(f.anomaly is None for f in store.frames("old1"))
    assert db_rows(db, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    assert not os.path.exists(db + ".blobs")  # old inline rows stay inline


def test_schema_too_new_file_is_refused(tmp_path):
    db = str(tmp_path / "new.db")
    shutil.copyfile(Path(__file__).parent / "data" / "schema_too_new.db", db)
    for read_only in (True, False):
        with pytest.raises(SchemaTooNew, match="newer wire-recorder"):
            open_store(db, read_only=read_only)
    q = cli("wire-query", db, "select 1")
    assert q.returncode != 0 and b"newer wire-recorder" in q.stderr and b"Traceback" not in q.stderr


def test_large_frame_round_trips_through_transcript_and_parquet(tmp_path):
    stream = b"small\n" + BIG + b"\n" + b"tail\n"
    db = str(tmp_path / "s.db")
    res = run_proxy(["-q", "--db", db, "--", *echo_agent_cmd()], stream)
    assert res.returncode == 0, res.stderr
    assert os.path.getsize(db + ".blobs") == 2 * len(BIG)  # c2a and a2c
    assert db_rows(db, "SELECT direction, raw IS NULL, blob_offset IS NOT NULL FROM frames "
                       "WHERE byte_len = ? ORDER BY seq", [len(BIG)]) == \
        [("c2a", True, True), ("a2c", True, True)]

    tr = str(tmp_path / "s.jsonl")
    assert cli("wire-export", db, "-o", tr).returncode == 0
    assert Path(tr).read_bytes().count(b'"frame":' + BIG + b'}') == 2  # embedded verbatim
    db2 = str(tmp_path / "back.db")
    assert cli("wire-import", tr, "--db", db2).returncode == 0
    tr2 = str(tmp_path / "back.jsonl")
    assert cli("wire-export", db2, "-o", tr2).returncode == 0
    assert Path(tr).read_bytes().split(b"\n")[1:] == Path(tr2).read_bytes().split(b"\n")[1:]
    for path in (db, db2):
        with open_store(path, read_only=True) as store:
            frames = store.frames(store.session()["session_id"], ("c2a", "a2c"))
        for d in ("c2a", "a2c"):
            assert [f.raw for f in frames if f.direction == d] == [b"small", BIG, b"tail"]

    js = cli("wire-export", "-f", "jsonl", db)
    assert js.returncode == 0, js.stderr
    texts = [orjson.loads(line).get("text") for line in js.stdout.splitlines()]
    assert texts.count(BIG.decode()) == 2

    pq = str(tmp_path / "pq")
    assert cli("wire-export", "-f", "parquet", db, "-o", pq).returncode == 0
    digest = hashlib.md5(BIG).hexdigest()
    q = cli("wire-query", "-f", "csv", pq,
            f"select count(*) AS n from frames where md5(raw) = '{digest}'")
    assert q.returncode == 0, q.stderr
    assert q.stdout.split() == [b"n", b"2"]


def test_missing_sidecar_is_a_clear_error(tmp_path):
    db = str(tmp_path / "s.db")
    res = run_proxy(["-q", "--db", db, "--", *echo_agent_cmd()], BIG + b"\n")
    assert res.returncode == 0, res.stderr
    os.rename(db + ".blobs", db + ".moved")
    with open_store(db, read_only=True) as store:
        with pytest.raises(NotARecording, match=r"s\.db\.blobs"):
            store.frames(store.session()["session_id"])
    out = cli("wire-export", db)
    assert out.returncode != 0 and b".blobs" in out.stderr and b"Traceback" not in out.stderr


def test_a_migration_cut_off_between_step_and_version_is_finished(tmp_path):
    """A loader killed after a step ran but before its version was written (older releases did
    the two separately) must not make the file unopenable."""
    db = str(tmp_path / "cut.db")
    make_v1(db, [b"x"])
    con = duckdb.connect(db)
    con.execute("ALTER TABLE frames ADD COLUMN blob_offset BIGINT")  # step 2 ran, version says 1
    con.close()
    with open_store(db) as store:
        assert store.version == SCHEMA_VERSION
        assert [f.raw for f in store.frames("old1")] == [b"x"]


@pytest.mark.parametrize("left", ["empty file", "meta table only"])
def test_a_file_whose_creation_was_killed_is_created_afresh(tmp_path, left):
    """A loader SIGKILLed with its proxy while DuckDB was creating the file leaves 0 bytes, or
    (before meta joined the first migration's transaction) an empty meta table; `recover` must
    still load the session into the file the user named, not a sibling."""
    db = str(tmp_path / "s.db")
    if left == "empty file":
        open(db, "wb").close()
    else:
        con = duckdb.connect(db)
        con.execute(META_DDL)
        con.close()
    with open_store(db) as store:
        assert store.version == SCHEMA_VERSION
        assert store.sessions() == []


def test_a_foreign_duckdb_file_with_only_a_meta_table_is_still_refused(tmp_path):
    db = str(tmp_path / "theirs.db")
    con = duckdb.connect(db)
    con.execute(META_DDL)
    con.execute("INSERT INTO meta VALUES ('owner', 'somebody else')")
    con.close()
    with pytest.raises(NotARecording, match="not a wire-recorder recording"):
        open_store(db)
    assert db_rows(db, "SELECT * FROM meta") == [("owner", "somebody else")]
