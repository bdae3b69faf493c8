"""No session is lost to one frame: nested, huge, invalid and hostile lines go through the real
wire-proxy byte-exact and every one of them is in the recording (or counted in a gap row);
`wire-proxy recover` never deletes a spool it could not load."""

from __future__ import annotations

import itertools
import os
import subprocess
import time

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.harness.proxy import (
    WIRE_PROXY,
    db_rows,
    echo_agent_cmd,
    run_proxy,
    split_frames,
    stream_of,
)
from wire_recorder.analysis.export import jsonl_record
from wire_recorder.recorder.classify import STORED_DEPTH, classify
from wire_recorder.recorder.model import COLUMNS, FRAMES, Frame

BIG_A = "1" * 100
BIG_B = "1" * 99 + "2"  # the same double as BIG_A: as floats the two ids would be one


def rpc(body: str) -> bytes:
    return b'{"jsonrpc":"2.0",' + body.encode() + b"}"


def nested_array(n: int) -> bytes:
    return b"[" * n + b"]" * n


def nested_object(n: int) -> bytes:
    return b'{"a":' * n + b"1" + b"}" * n


def in_params(inner: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":7,"method":"deep","params":{"x":' + inner + b"}}"


ORDINARY = rpc('"method":"event","params":{"type":"StepBegin","payload":{"n":1}}')
LINES = [
    ORDINARY,
    nested_array(5000),
    nested_object(10_000),
    nested_array(1000),  # parsed by orjson, too deep for it (and the stdlib) to write back
    in_params(nested_array(1000)),  # a request: kind, method and id survive, payload does not
    in_params(nested_array(300)),  # deep but storable
    rpc(f'"id":{BIG_A},"method":"ask","params":{{}}'),
    rpc(f'"id":{BIG_B},"method":"ask","params":{{}}'),
    rpc(f'"id":{BIG_A},"result":{{}}'),
    rpc(f'"id":{BIG_B},"result":{{}}'),
    rpc('"id":1' + "0" * 400 + ',"method":"huge_id"'),  # beyond a double: the stdlib parses it
    b'{"jsonrpc":"2.0","method":"x","params":"\xff\xfe\xc3"}',
    b"\xed\xa0\x80 not utf-8",
    ORDINARY,
]
STREAM = b"".join(line + b"\n" for line in LINES) + b'{"jsonrpc":"2.0","method":"tail"}'


def _frames(db: str, direction: str, session_id: str | None = None) -> list[Frame]:
    where = "direction = ?" + ("" if session_id is None else " AND session_id = ?")
    params = [direction] + ([] if session_id is None else [session_id])
    rows = db_rows(db, f"SELECT {', '.join(COLUMNS)} FROM frames WHERE {where} ORDER BY seq",
                   params)
    return [Frame(*r) for r in rows]


def test_hostile_lines_are_relayed_and_every_one_recorded(tmp_path):
    db = str(tmp_path / "h.db")
    res = run_proxy(["--db", db, "--", *echo_agent_cmd()], STREAM, timeout=90)
    assert res.returncode == 0, res.stderr
    assert res.stdout == STREAM
    assert b"Traceback" not in res.stderr
    assert not list(tmp_path.glob("*.spool*")), "the loader left its spool behind"
    for direction in ("c2a", "a2c"):
        assert stream_of(db, direction) == STREAM
        frames = _frames(db, direction)
        assert len(frames) == len(LINES) + 1  # the last line has no newline but is a frame
        assert [(bytes(f.raw), f.newline) for f in frames] == split_frames(STREAM)
        by_raw = {bytes(f.raw): f for f in frames}
        for deep in (nested_array(5000), nested_object(10_000), nested_array(1000)):
            f = by_raw[deep]
            assert f.kind == "invalid" and f.payload is None and f.parse_error
        f = by_raw[in_params(nested_array(1000))]
        assert (f.kind, f.method, f.rpc_id, f.payload) == ("request", "deep", "7", None)
        assert "payload not stored" in f.parse_error
        f = by_raw[in_params(nested_array(300))]
        assert f.kind == "request" and f.payload is not None and not f.parse_error
        ids = [(f.kind, f.rpc_id) for f in frames if f.rpc_id and len(f.rpc_id) >= 100]
        assert ids == [("request", BIG_A), ("request", BIG_B), ("response", BIG_A),
                       ("response", BIG_B), ("request", "1" + "0" * 400)]
        assert not [f for f in frames if f.anomaly and "reused" in f.anomaly
                    and len(f.rpc_id or "") >= 100]
        assert frames[-1].newline is False and frames[-1].method == "tail"
    # JSONL export of a payload deeper than orjson writes: the bytes stand in for it
    deep = next(f for f in _frames(db, "c2a") if bytes(f.raw) == in_params(nested_array(300)))
    rec = jsonl_record(deep, 0)
    assert "payload" not in rec and rec["text"] == in_params(nested_array(300)).decode()
    orjson.dumps(rec)
    out = tmp_path / "h.jsonl"
    sid = db_rows(db, "SELECT session_id FROM sessions")[0][0]
    res = subprocess.run([os.path.join(os.path.dirname(WIRE_PROXY), "wire-export"), db,
                          "--session", sid, "--format", "jsonl", "-o", str(out)],
                         capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert len(out.read_bytes().splitlines()) == len(db_rows(db, "SELECT seq FROM frames"))


def test_a_payload_is_stored_up_to_one_depth_whichever_python_records_it():
    """Past orjson's 254 levels the stdlib writes the payload, and how deep it gets depends on
    the interpreter (3.11 stops near 1,000 levels, 3.13 writes any): the bound is ours."""
    # params {"x": [...]}: one level more than the array
    at = classify(in_params(nested_array(STORED_DEPTH - 1)), "c2a")
    assert at.payload is not None and not at.parse_error
    assert orjson.loads(at.payload)["x"] == orjson.loads(nested_array(STORED_DEPTH - 1))
    past = classify(in_params(nested_array(STORED_DEPTH)), "c2a")
    assert (past.kind, past.method, past.rpc_id, past.payload) == ("request", "deep", "7", None)
    assert f"payload not stored: nested deeper than {STORED_DEPTH} levels" in past.parse_error
    batch = classify(nested_array(STORED_DEPTH + 1), "c2a")
    assert batch.kind == "invalid" and batch.payload is None
    assert "nested deeper" in batch.parse_error and "batch" in batch.parse_error
    # The stdlib also reads the numbers orjson cannot, in messages within the same depth (the
    # message, its params and the array: two levels more than the array).
    huge, wide = "1" + "0" * 400, str(2 ** 70)  # beyond a double; beyond 64 bits (orjson: float)

    def with_id(levels: int, text: str) -> bytes:
        return in_params(nested_array(levels - 2)).replace(b'"id":7', f'"id":{text}'.encode())
    for text in (huge, wide):
        at = classify(with_id(STORED_DEPTH, text), "c2a")
        assert (at.kind, at.rpc_id, at.parse_error) == ("request", text, None)
    past = classify(with_id(STORED_DEPTH + 1, huge), "c2a")
    assert past.kind == "invalid" and past.payload is None
    assert past.parse_error.startswith(f"nested deeper than {STORED_DEPTH} levels")
    past = classify(with_id(STORED_DEPTH + 1, wide), "c2a")
    assert (past.kind, past.rpc_id) == ("request", repr(float(2 ** 70)))  # orjson's float
    (doc,) = [c.doc for c in FRAMES.columns if c.name == "payload"]
    assert f"deeper than {STORED_DEPTH} levels" in doc  # the column's documentation says it


def test_big_ids_keep_their_exact_text():
    assert classify(rpc(f'"id":{BIG_A},"method":"m"'), "c2a").rpc_id == BIG_A
    assert classify(rpc('"id":-92233720368547758080,"result":1'), "a2c").rpc_id == \
        "-92233720368547758080"
    assert classify(rpc('"id":"123456789012345678901234567890","result":1'), "a2c").id_is_str
    assert classify(rpc('"id":7,"result":1'), "a2c").rpc_id == "7"  # the usual path unchanged


def _left_spool(tmp_path, sid: str) -> tuple[str, str]:
    """A spool as a proxy killed together with its loader leaves it (no end marker)."""
    from wire_recorder.recorder.spool import A2C, C2A, SpoolWriter

    db = str(tmp_path / "f.db")
    spool = f"{db}.{sid}.spool"
    writer = SpoolWriter(spool, {"session_id": sid, "started_wall_ns": time.time_ns(), "db": db,
                                 "cwd": str(tmp_path)})
    writer.put(C2A, ORDINARY + b"\n")
    writer.put(A2C, ORDINARY + b"\n")
    writer.close()
    return db, spool


def test_recover_keeps_a_spool_it_cannot_load_and_says_where(tmp_path):
    sid = "feedface"
    db, spool = _left_spool(tmp_path, sid)
    # the DB and the sibling it would fall back to are both unusable
    os.mkdir(db)
    os.mkdir(str(tmp_path / f"f.{sid}.db"))
    res = subprocess.run([WIRE_PROXY, "recover", db], capture_output=True, timeout=60)
    assert res.returncode == 2, res.stderr
    failed = spool + ".failed"
    assert os.path.exists(failed) and not os.path.exists(spool)
    err = res.stderr.decode()
    assert b"Traceback" not in res.stderr, err
    # (a line before it may tell of the sibling DB it tried)
    (line,) = [x for x in err.splitlines() if "could not recover" in x]
    assert failed in line
    # a later proxy on that DB neither trips over it nor touches it
    os.rmdir(db)
    os.rmdir(str(tmp_path / f"f.{sid}.db"))
    res = run_proxy(["--db", db, "--", *echo_agent_cmd()], ORDINARY + b"\n", timeout=60)
    assert res.returncode == 0 and res.stdout == ORDINARY + b"\n", res.stderr
    assert b"could not recover" not in res.stderr, res.stderr
    assert os.path.exists(failed)
    # once the cause is fixed, the kept spool is recovered by name
    res = subprocess.run([WIRE_PROXY, "recover", failed], capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert not os.path.exists(failed)
    assert db_rows(db, "SELECT count(*) FROM frames WHERE session_id = ?", [sid]) == [(2,)]


# -- fuzz ---------------------------------------------------------------------------------------

def _deep(n: int, kind: str) -> bytes:
    return nested_array(n) if kind == "[" else nested_object(n)


hostile_line = st.one_of(
    st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")),
    st.builds(_deep, st.integers(200, 3000), st.sampled_from(["[", "{"])),
    st.builds(lambda n, kind: in_params(_deep(n, kind)), st.integers(200, 1200),
              st.sampled_from(["[", "{"])),
    st.integers(-(10 ** 60), 10 ** 60).map(lambda i: rpc(f'"id":{i},"method":"m"')),
    st.integers(-(10 ** 60), 10 ** 60).map(lambda i: rpc(f'"id":{i},"result":{i}')),
    st.text(max_size=100).map(lambda s: in_params(orjson.dumps(s))),
    st.text(max_size=100).map(lambda s: s.replace("\n", "").encode("utf-8", "surrogatepass")),
    st.just(rpc('"id":1,"result":1e400')),
    st.just(b"[" * 2000),
)


@pytest.fixture(scope="module")
def fuzz_db(tmp_path_factory) -> tuple[str, itertools.count]:
    """One file for every fuzz run (a session each, told apart by its name), as proxies share a
    user's default file: a new file per run cost as much as the run itself."""
    return str(tmp_path_factory.mktemp("fuzz") / "z.db"), itertools.count()


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines=st.lists(hostile_line, min_size=1, max_size=12), tail=st.booleans())
# every fixed kind of hostile line in one stream, cut off after a last line without its newline
@example(lines=[nested_array(3000), nested_object(3000), in_params(nested_array(1200)),
                rpc(f'"id":{10 ** 60},"method":"m"'), rpc('"id":1,"result":1e400'), b"[" * 2000,
                b"\xff\xfe", "\ud800".encode("utf-8", "surrogatepass")], tail=True)
def test_fuzz_hostile_streams_through_the_real_proxy(fuzz_db, lines, tail):
    db, runs = fuzz_db
    name = f"fuzz-{next(runs)}"
    stream = b"".join(line + b"\n" for line in lines)
    if tail:
        stream += ORDINARY  # a last line without its newline
    res = run_proxy(["--db", db, "--name", name, "--", *echo_agent_cmd()], stream, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout == stream
    assert b"Traceback" not in res.stderr
    ((sid,),) = db_rows(db, "SELECT session_id FROM sessions WHERE name = ?", [name])
    gaps = [orjson.loads(p) for (p,) in db_rows(
        db, "SELECT payload FROM frames WHERE session_id = ? AND kind = 'lifecycle' "
            "AND method = 'recording_gap'", [sid])]
    for direction in ("c2a", "a2c"):
        frames = _frames(db, direction, sid)
        lost = [g for g in gaps if g["stream"] == direction]
        if not lost:
            assert [(bytes(f.raw), f.newline) for f in frames] == split_frames(stream)
        # every line is in the DB or counted in a gap row, exactly
        assert sum(f.newline for f in frames) + sum(g["frames"] for g in lost) + \
            sum(1 for g in lost if g.get("cut_frame_stored")) == stream.count(b"\n")


def test_a_frame_whose_step_fails_is_stored_raw_and_loading_goes_on(tmp_path):
    """Whatever breaks on one frame (here the classifier itself), that frame is stored raw with
    the error and the frames around it are classified as usual."""
    from wire_recorder.recorder.loader import Ingest
    from wire_recorder.recorder.spool import C2A

    ing = Ingest(store=None, meta={"session_id": "g", "started_wall_ns": 1,
                                   "cwd": str(tmp_path)})
    real = ing.classifier

    def flaky(raw: bytes, direction: str):
        if raw == b"boom":
            raise RecursionError("maximum recursion depth exceeded")
        return real(raw, direction)

    ing.classifier = flaky  # type: ignore[assignment]
    ing.data(C2A, ORDINARY + b"\nboom\n" + ORDINARY + b"\n", 1, 1)
    kinds = [(r[COLUMNS.index("raw")], r[COLUMNS.index("kind")]) for r in ing.rows]
    assert kinds == [(ORDINARY, "notification"), (b"boom", "invalid"),
                     (ORDINARY, "notification")]
    assert "RecursionError" in ing.rows[1][COLUMNS.index("parse_error")]
    assert [r[COLUMNS.index("seq")] for r in ing.rows] == [1, 2, 3]
    assert ing.frame_count == 3 and ing.invalid == 1
