"""Write the stored recordings of every schema version: tests/data/schema{1,2,3,4,5}.db and
schema_too_new.db (read by tests/test_model.py).

    .venv/bin/python tests/data/make_schema_fixtures.py [VERSION...]

Each file is made the way wire-recorder of that version made it: the DDL and migration steps
below are copied from those releases (not generated from today's column registry, which is what
the files check). The frames are a short Wire session, their fields extracted by the classifier.
Files are created in DuckDB 1.4's storage format, like recordings, with small blocks. Run it again only to add the
file of a new schema version; the files of old versions are a record and must not change.
"""

from __future__ import annotations

import datetime as dt
import os
import sys

import duckdb

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from wire_recorder.recorder.classify import Classifier, Extracted  # noqa: E402

META_DDL = "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)"

# schema 1, as recorder/store.py wrote it
SESSIONS_DDL = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id VARCHAR PRIMARY KEY,
    name VARCHAR,
    started_at TIMESTAMP,
    ended_at TIMESTAMP,
    command JSON,
    cwd VARCHAR,
    protocol VARCHAR,
    protocol_version VARCHAR,
    agent_pid INTEGER,
    exit_code INTEGER,
    exit_signal VARCHAR,
    end_reason VARCHAR,
    proxy_version VARCHAR,
    tags JSON,
    frame_count BIGINT,
    lost_frames BIGINT,
    lost_bytes BIGINT,
    source VARCHAR,
    host VARCHAR,
    proxy_pid INTEGER,
    mono_start_ns BIGINT,
    db_note VARCHAR
)"""

FRAMES_DDL = """
CREATE TABLE IF NOT EXISTS frames (
    session_id VARCHAR NOT NULL,
    seq BIGINT NOT NULL,
    ts TIMESTAMP,
    mono_ns BIGINT,
    direction VARCHAR NOT NULL,
    raw BLOB,
    newline BOOLEAN,
    byte_len BIGINT,
    kind VARCHAR,
    method VARCHAR,
    rpc_id VARCHAR,
    msg_type VARCHAR,
    payload JSON,
    parse_error VARCHAR,
    known BOOLEAN
)"""

STEPS = {
    1: [SESSIONS_DDL, FRAMES_DDL],
    2: ["ALTER TABLE frames ADD COLUMN IF NOT EXISTS blob_offset BIGINT"],
    3: ["ALTER TABLE frames ADD COLUMN IF NOT EXISTS anomaly VARCHAR"],
    4: ["ALTER TABLE sessions ADD COLUMN IF NOT EXISTS redaction VARCHAR"],
    5: ["""
CREATE TABLE IF NOT EXISTS workdir_files (
    session_id VARCHAR NOT NULL,
    path VARCHAR NOT NULL,
    kind VARCHAR,
    size BIGINT,
    sha256 VARCHAR,
    mode INTEGER,
    link VARCHAR,
    content BLOB,
    note VARCHAR
)""", "ALTER TABLE sessions ADD COLUMN IF NOT EXISTS workdir VARCHAR",
        "ALTER TABLE sessions ADD COLUMN IF NOT EXISTS workdir_manifest JSON"],
}
FRAME_COLUMNS = {1: ["session_id", "seq", "ts", "mono_ns", "direction", "raw", "newline",
                     "byte_len", "kind", "method", "rpc_id", "msg_type", "payload",
                     "parse_error", "known"]}
FRAME_COLUMNS[2] = FRAME_COLUMNS[1] + ["blob_offset"]
FRAME_COLUMNS[3] = FRAME_COLUMNS[2] + ["anomaly"]
FRAME_COLUMNS[4] = FRAME_COLUMNS[3]
FRAME_COLUMNS[5] = FRAME_COLUMNS[4]

SID = "20250102T030405-0ldf11e5"
START = dt.datetime(2025, 1, 2, 3, 4, 5)
MONO0 = 1_000_000_000
# schema 5: the work dir's manifest, with a snapshot of one of its two files
WORKDIR_ROWS = [
    (SID, "notes.txt", "file", 6, "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
     0o644, None, b"hello\n", None),
    (SID, "sub/link", "symlink", 12, None, None, "../notes.txt", None, None),
]
WORKDIR_SUMMARY = ('{"source":"walk","files":2,"bytes":6,"snapshot":true,"snapshot_files":1,'
                   '"snapshot_bytes":6,"cut":false}')
FRAMES: list[tuple[str, bytes]] = [
    ("proxy", b'{"argv":["kimi","--wire"],"pid":4242,"event":"spawn"}'),
    ("c2a", b'{"jsonrpc":"2.0","method":"initialize","id":"init-1","params":'
            b'{"protocol_version":"1.10","client":{"name":"fixture","version":"0"}}}'),
    ("a2c", b'{"jsonrpc":"2.0","id":"init-1","result":{"protocol_version":"1.10"}}'),
    ("c2a", b'{"jsonrpc":"2.0","method":"prompt","id":"p-1","params":{"user_input":"hi"}}'),
    ("a2c", b'{"jsonrpc":"2.0","method":"event","params":{"type":"TurnBegin",'
            b'"payload":{"user_input":"hi"}}}'),
    ("stderr", b"a line on stderr"),
    ("a2c", b"not json"),
    ("c2a", b'{"jsonrpc":"2.0","method":"prompt","id":"p-1","params":{"user_input":"again"}}'),
    ("a2c", b'{"jsonrpc":"2.0","id":"p-1","result":{"status":"finished"}}'),
    ("proxy", b'{"code":0,"signal":null,"exit_status":0,"event":"exit"}'),
]


def rows(version: int) -> list[tuple]:
    classify = Classifier()
    out = []
    for seq, (direction, raw) in enumerate(FRAMES, 1):
        if direction == "proxy":
            ex = Extracted("lifecycle", method=raw.split(b'"event":"')[1].split(b'"')[0].decode(),
                           payload=raw.decode())
        elif direction == "stderr":
            ex = Extracted("stderr")
        else:
            ex = classify(raw, direction)
        row = [SID, seq, START + dt.timedelta(milliseconds=seq), MONO0 + seq * 1_000_000,
               direction, raw, True, len(raw), ex.kind, ex.method, ex.rpc_id, ex.msg_type,
               ex.payload, ex.parse_error, ex.known]
        if version >= 2:
            row.append(None)  # blob_offset: every frame here is inline
        if version >= 3:
            row.append(ex.anomaly)
        out.append(tuple(row))
    return out


def make(path: str, version: int, stamp: int | None = None) -> None:
    if os.path.exists(path):
        os.unlink(path)
    con = duckdb.connect()
    # 16 KiB blocks (not 256 KiB) keep each file at tens of KB; DuckDB 1.4 reads them
    con.execute(f"ATTACH '{path}' AS rec (BLOCK_SIZE 16384, STORAGE_VERSION 'v1.4.0')")
    con.execute("USE rec")
    for v in range(1, version + 1):
        con.execute("BEGIN TRANSACTION")
        con.execute(META_DDL)
        for sql in STEPS[v]:
            con.execute(sql)
        con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(v)])
        con.execute("INSERT OR IGNORE INTO meta VALUES ('created_by', 'wire-recorder')")
        con.execute("COMMIT")
    con.execute(
        "INSERT INTO sessions (session_id, name, started_at, ended_at, command, cwd, protocol, "
        "protocol_version, agent_pid, exit_code, end_reason, proxy_version, tags, frame_count, "
        "lost_frames, lost_bytes, source, host, proxy_pid, mono_start_ns) VALUES "
        "(?, ?, ?, ?, '[\"kimi\",\"--wire\"]', '/work', 'wire', '1.10', 4242, 0, 'agent_exit', "
        "?, '{}', 7, 0, 0, 'proxy', 'fixture-host', 4241, ?)",
        [SID, f"schema{version}", START, START + dt.timedelta(seconds=1), f"schema-{version}",
         MONO0])
    if version >= 5:
        con.execute("UPDATE sessions SET workdir = '/work', workdir_manifest = ?",
                    [WORKDIR_SUMMARY])
        con.executemany("INSERT INTO workdir_files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        WORKDIR_ROWS)
    cols = FRAME_COLUMNS[version]
    con.executemany(f"INSERT INTO frames ({', '.join(cols)}) VALUES "
                    f"({', '.join('?' * len(cols))})", rows(version))
    if stamp is not None:
        # a later wire-recorder: a schema number this one does not know, and a column with it
        con.execute("ALTER TABLE frames ADD COLUMN from_the_future VARCHAR")
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(stamp)])
    con.execute("CHECKPOINT rec")
    con.close()


def main(versions: list[str]) -> None:
    """Every file, or those of the versions named (a new schema's file, leaving the rest)."""
    for v in [int(x) for x in versions] or [1, 2, 3, 4, 5]:
        make(os.path.join(HERE, f"schema{v}.db"), v)
    if not versions:
        make(os.path.join(HERE, "schema_too_new.db"), 3, stamp=99)


if __name__ == "__main__":
    main(sys.argv[1:])
