"""The column registry (recorder/model.py) and what is made from it, the stored recordings of every
schema version (tests/data/schema*.db), and the one classifier shared by recorder and replay."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
from pathlib import Path

import duckdb
import orjson
import pytest

from wire_recorder.recorder import store as store_mod
from wire_recorder.recorder.classify import PAYLOAD_MAX, Classifier, Extracted, classify
from wire_recorder.recorder.errors import SchemaTooNew
from wire_recorder.recorder.model import (
    COLUMNS,
    DOC_TABLES,
    FRAMES,
    ROW_ARGS,
    SESSION_COLUMNS,
    TABLES,
    WORKDIR_COLUMNS,
    Frame,
    docs_block,
    frame_row,
    write_docs,
)
from wire_recorder.recorder.store import SCHEMA_VERSION, open_store
from wire_recorder.recorder.transcript import load_recording
from wire_recorder.recorder.workdir import read_stored
from wire_recorder.replay.recording import build_recording, parse_msg, recorded_msg

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
# a stored file of every version: a new schema adds its file (make_schema_fixtures.py)
VERSIONS = tuple(range(1, SCHEMA_VERSION + 1))
CURRENT = DATA / f"schema{SCHEMA_VERSION}.db"


# -- the registry and what is made from it -------------------------------------------------------
def test_design_md_holds_the_generated_column_tables():
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    for table in DOC_TABLES:
        assert docs_block(table) in text, \
            "regenerate: python -m wire_recorder.recorder.model docs/design.md"
    assert write_docs(text) == text


def test_frame_fields_are_the_frame_columns_in_order():
    assert tuple(f.name for f in dataclasses.fields(Frame)) == COLUMNS == FRAMES.names
    assert SESSION_COLUMNS == store_mod.SESSION_COLUMNS
    assert store_mod.ADDED_COLUMNS == {"blob_offset": (2, "BIGINT"), "anomaly": (3, "VARCHAR")}
    assert max(c.since for t in TABLES for c in t.columns) <= SCHEMA_VERSION
    # a column added after its table cannot be NOT NULL (old rows have none) nor a key
    assert all(not c.constraint for t in TABLES for c in t.columns if c.since > t.since)


def test_frame_row_and_frame_row_method_follow_the_registry():
    ex_fields = {f.name for f in dataclasses.fields(Extracted)}
    assert set(COLUMNS) - set(ROW_ARGS) - {"byte_len"} <= ex_fields
    ex = Extracted(**{c: f"<{c}>" for c in COLUMNS if c in ex_fields})
    args = {a: f"<{a}>" for a in ROW_ARGS}
    raw = b"12345"
    args["raw"] = raw  # type: ignore[assignment]
    row = frame_row(*(args[a] for a in ROW_ARGS if a != "blob_offset"), ex,
                    blob_offset=args["blob_offset"])
    assert len(row) == len(COLUMNS)
    for name, value in zip(COLUMNS, row, strict=True):
        assert value == (5 if name == "byte_len" else raw if name == "raw" else f"<{name}>")
    assert Frame(*row).row() == row


def _schema(con: duckdb.DuckDBPyConnection) -> list:
    tables = con.execute("SELECT table_name, sql FROM duckdb_tables() ORDER BY 1").fetchall()
    # tables only: analysis may have installed its views
    cols = con.execute("SELECT table_name, column_index, column_name, data_type, is_nullable, "
                       "column_default FROM duckdb_columns() WHERE table_name IN "
                       "(SELECT table_name FROM duckdb_tables()) ORDER BY 1, 2").fetchall()
    cons = con.execute("SELECT table_name, constraint_type, constraint_column_names "
                       "FROM duckdb_constraints() ORDER BY ALL").fetchall()
    return [tables, cols, cons]


def _schema_of(path: Path) -> list:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return _schema(con)
    finally:
        con.close()


def test_a_new_file_has_the_schema_old_releases_made(tmp_path):
    """The stored file of the current version was made with the DDL and migration steps copied
    from the release that introduced it (tests/data/make_schema_fixtures.py)."""
    new = tmp_path / "new.db"
    open_store(str(new)).close()
    assert _schema_of(new) == _schema_of(CURRENT)
    cols = [(t, n, d) for t, _, n, d, _, _ in _schema_of(new)[1]]
    assert [n for t, n, _ in cols if t == "frames"] == list(COLUMNS)
    assert [n for t, n, _ in cols if t == "sessions"] == list(SESSION_COLUMNS)
    assert [n for t, n, _ in cols if t == "workdir_files"] == list(WORKDIR_COLUMNS)
    assert [d for t, _, d in cols if t == "frames"] == [c.sql_type for c in FRAMES.columns]


# -- stored recordings of every schema version ---------------------------------------------------
def _copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copyfile(DATA / name, dst)
    return dst


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("version", VERSIONS)
def test_every_old_schema_loads_read_only_and_migrates_when_opened_writable(tmp_path, version):
    db = _copy(f"schema{version}.db", tmp_path)
    before = _digest(db)
    with open_store(str(db), read_only=True) as store:
        assert store.version == version
        session = store.session()
        frames = store.frames(session["session_id"])
        manifest = read_stored(store, session)
    assert _digest(db) == before  # a read-only open changes nothing
    # schema 5: the work dir's manifest (none before)
    if version < 5:
        assert manifest is None
    else:
        assert manifest is not None and manifest.workdir == "/work" and manifest.snapshot
        assert [(e.path, e.kind, e.size, e.content, e.link) for e in manifest.entries] == \
            [("notes.txt", "file", 6, b"hello\n", None),
             ("sub/link", "symlink", 12, None, "../notes.txt")]
    assert session["name"] == f"schema{version}" and session["protocol"] == "wire"
    assert [f.seq for f in frames] == list(range(1, 11))
    assert [f.kind for f in frames] == ["lifecycle", "request", "response", "request",
                                        "notification", "stderr", "invalid", "request",
                                        "response", "lifecycle"]
    assert frames[4].msg_type == "TurnBegin" and orjson.loads(frames[4].payload) == \
        {"user_input": "hi"}
    assert all(f.blob_offset is None for f in frames)
    # columns a version did not have read as NULL
    assert (frames[7].anomaly is not None) == (version >= 3)

    with open_store(str(db)) as store:
        assert store.version == SCHEMA_VERSION
        migrated = store.frames(session["session_id"])
        assert store.sessions() == [session]
        assert read_stored(store, session) == manifest
    assert [f.row() for f in migrated] == [f.row() for f in frames]
    assert _schema_of(db) == _schema_of(CURRENT)


def test_the_select_list_of_each_version_reads_its_file():
    for version in VERSIONS:
        con = duckdb.connect(str(DATA / f"schema{version}.db"), read_only=True)
        try:
            rows = con.execute(f"SELECT {store_mod.frame_select(version)} FROM frames").fetchall()
        finally:
            con.close()
        assert len(rows) == 10 and all(len(r) == len(COLUMNS) for r in rows)


def test_a_file_of_a_newer_schema_is_refused_and_left_alone(tmp_path):
    db = _copy("schema_too_new.db", tmp_path)
    before = _digest(db)
    for read_only in (True, False):
        with pytest.raises(SchemaTooNew) as e:
            open_store(str(db), read_only=read_only)
        assert "schema 99" in str(e.value) and e.value.hint == "upgrade wire-recorder"
    assert _digest(db) == before


# -- one classifier ------------------------------------------------------------------------------
FRAMES_TO_CLASSIFY = [
    ("c2a", b'{"jsonrpc":"2.0","method":"prompt","id":"p","params":{"user_input":"x"}}'),
    ("c2a", b'{"jsonrpc":"2.0","method":"prompt","id":1,"params":{}}'),
    ("a2c", b'{"jsonrpc":"2.0","method":"event","params":{"type":"StepBegin","payload":{"n":1}}}'),
    ("a2c", b'{"jsonrpc":"2.0","method":"request","id":"r","params":{"type":"ApprovalRequest",'
            b'"payload":{"id":"r"}}}'),
    ("a2c", b'{"jsonrpc":"2.0","id":"p","result":{"status":"finished"}}'),
    ("a2c", b'{"jsonrpc":"2.0","id":"p","error":{"code":-32000,"message":"no"}}'),
    ("a2c", b'{"method":"event","params":{"type":"StepBegin","payload":{"n":2}}}'),
    ("a2c", b'{"jsonrpc":"1.0","id":"p","result":{}}'),
    ("a2c", b'{"jsonrpc":"2.0","method":7}'),
    ("a2c", b'[{"jsonrpc":"2.0","method":"event"}]'),
    ("a2c", b'"a string"'),
    ("a2c", b"not json"),
    ("a2c", b"\xff\xfe"),
    ("a2c", b""),
]


def test_jsonrpc_2_0_is_required_and_the_frame_is_kept_as_invalid():
    ex = classify(b'{"method":"event","params":{"type":"StepBegin","payload":{"n":2}}}', "a2c")
    assert (ex.kind, ex.method, ex.msg_type, ex.parse_error) == \
        ("invalid", "event", "StepBegin", 'jsonrpc is not "2.0"')
    assert classify(b'{"jsonrpc":"1.0","id":"p","result":{}}', "a2c").kind == "invalid"


def test_replay_classifies_live_frames_with_the_recorders_classifier():
    for direction, raw in FRAMES_TO_CLASSIFY:
        ex = classify(raw, direction, "wire", detect=False)
        m = parse_msg(raw, direction)
        assert (m.kind, m.method, m.msg_type) == (ex.kind, ex.method, ex.msg_type), raw
        assert m.payload == (None if ex.payload is None else orjson.loads(ex.payload)), raw


def test_replay_reads_the_stored_fields_of_recorded_frames(tmp_path):
    """A row whose stored fields disagree with its bytes shows that replay reads the row."""
    db = _copy("schema3.db", tmp_path)
    with open_store(str(db)) as store:
        store.con.execute("UPDATE frames SET msg_type = 'Stored', payload = '{\"from\":\"row\"}' "
                          "WHERE seq = 5")
    session, frames = load_recording(str(db))
    rec = build_recording(str(db), session, frames)
    event = next(m for m in rec.msgs if m.method == "event")
    assert (event.kind, event.msg_type, event.payload) == ("notification", "Stored",
                                                           {"from": "row"})
    assert isinstance(event.obj, dict) and event.obj["params"]["type"] == "TurnBegin"
    # the id's JSON type comes from the message: the stored text cannot tell 1 from "1"
    assert [m.rpc_id for m in rec.msgs if m.kind == "request"] == ["init-1", "p-1", "p-1"]


def test_a_recorded_frame_too_big_for_a_stored_payload_gets_it_from_the_classifier():
    text = "x" * (PAYLOAD_MAX + 10)
    raw = orjson.dumps({"jsonrpc": "2.0", "method": "event",
                        "params": {"type": "ContentPart", "payload": {"type": "text",
                                                                     "text": text}}})
    ex = Classifier("wire")(raw, "a2c")
    assert ex.payload is None  # not stored
    f = Frame(*frame_row("s", 1, None, 0, "a2c", raw, True, ex))
    m = recorded_msg(f, 0.0, parse_msg(b"{}", "a2c").adapter)
    assert m.payload == {"type": "text", "text": text} and m.msg_type == "ContentPart"
