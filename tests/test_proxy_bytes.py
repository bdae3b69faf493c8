"""Transparent means byte-exact: whatever the bytes, both ways, and the recording holds them."""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.harness.proxy import db_rows, echo_agent_cmd, run_proxy, split_frames, stream_of
from wire_recorder.recorder.loader import Ingest
from wire_recorder.recorder.relay import Pump
from wire_recorder.recorder.spool import A2C, C2A, SpoolReader, SpoolWriter
from wire_recorder.recorder.store import open_store

HOSTILE_PIECES = [
    b"\n", b"\r\n", b"\r", b"\x00", b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"{", b"}",
    b'{"jsonrpc":"2.0","method":"event","params":{"type":"Nope","payload":{}}}',
    b'{"jsonrpc":"2.0","id":1,"result":null}', b"[1,2]", b'"\\u2028"', "\u2028".encode(),
    b" ", b"\t", b"null", "é✓😀".encode(),
]

frame_bytes = st.one_of(
    st.binary(max_size=300),
    st.lists(st.sampled_from(HOSTILE_PIECES), max_size=12).map(b"".join),
    st.text(max_size=200).map(lambda s: s.encode("utf-8", "surrogatepass")),
)
streams = st.lists(frame_bytes, max_size=25).map(b"".join)


def relay_in_process(stream: bytes, chunk_sizes: list[int]) -> tuple[bytes, list[tuple]]:
    """Run the real relay pump and spool writer over pipes, then the real loader logic over the
    spool (without DuckDB), and return (bytes relayed, rows the loader would insert)."""
    with tempfile.TemporaryDirectory() as tmp:
        src_r, src_w = os.pipe()
        dst_r, dst_w = os.pipe()
        spool = os.path.join(tmp, "s.spool")
        writer = SpoolWriter(spool, {"session_id": "t", "started_wall_ns": 0, "db": "x"})
        pump = Pump("c2a", src_r, dst_w, lambda d: writer.put(C2A, d),
                    on_eof=lambda: writer.event("client_eof"))
        pump.start()
        got = []
        reader_t = threading.Thread(target=lambda: got.extend(iter(lambda: os.read(dst_r, 65536), b"")))
        reader_t.start()
        pos = 0
        for size in chunk_sizes:  # many small writes produce frames split across reads
            if pos >= len(stream):
                break
            os.write(src_w, stream[pos:pos + size])
            pos += size
        if pos < len(stream):
            os.write(src_w, stream[pos:])
        os.close(src_w)
        pump.join()
        os.close(dst_w)
        reader_t.join()
        os.close(src_r)
        os.close(dst_r)
        writer.close()
        reader = SpoolReader(spool)
        ing = Ingest(store=None, meta=reader.meta)
        ing.feed(reader.read_available())
        for s in (C2A, A2C):
            ing._flush_partial(s, 0, 0)
        reader.close()
        return b"".join(got), ing.rows


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams, chunk_sizes=st.lists(st.integers(1, 70), max_size=8))
def test_relay_spool_and_loader_keep_every_byte(stream, chunk_sizes):
    relayed, rows = relay_in_process(stream, chunk_sizes)
    assert relayed == stream
    frames = [(r[5], r[6]) for r in rows if r[4] == "c2a"]
    assert frames == split_frames(stream)
    for r in rows:
        if r[4] == "c2a":
            assert r[8] in ("request", "notification", "response", "error", "invalid")
            assert r[7] == len(r[5])


def hostile_stream(seed: int, n: int) -> bytes:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        k = rnd.random()
        if k < 0.3:
            out.append(rnd.randbytes(rnd.randint(0, 400)))
        elif k < 0.6:
            out.append(b"".join(rnd.choice(HOSTILE_PIECES) for _ in range(rnd.randint(1, 10))))
        else:
            out.append(b'{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart",'
                       b'"payload":{"type":"text","text":"' + str(rnd.random()).encode() + b'"}}}\n')
    return b"".join(out) + b"no final newline \xff"


def test_real_proxy_relays_thousands_of_hostile_frames_exactly(tmp_path):
    stream = hostile_stream(7, 4000)
    received = tmp_path / "agent-received.bin"
    db = str(tmp_path / "s.db")
    res = run_proxy(["-q", "--db", db, "--", *echo_agent_cmd(str(received))], stream)
    assert res.returncode == 0, res.stderr
    assert received.read_bytes() == stream  # what the agent got
    assert res.stdout == stream  # what the client got back
    assert stream_of(db, "c2a") == stream  # what was recorded, both ways
    assert stream_of(db, "a2c") == stream
    expected = split_frames(stream)
    (count,) = db_rows(db, "SELECT count(*) FROM frames WHERE direction = 'c2a'")[0]
    assert count == len(expected)
    assert db_rows(db, "SELECT frame_count, lost_frames FROM sessions") == [(2 * count, 0)]


def test_fifty_megabyte_line_passes_untouched(tmp_path):
    big = b'{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart","payload":{"type":"text","text":"' \
        + b"x" * (50 << 20) + b'"}}}'
    stream = b"small\n" + big + b"\n" + big[:1000] + b"\r\n" + big  # last one unterminated
    db = str(tmp_path / "s.db")
    res = run_proxy(["-q", "--db", db, "--", *echo_agent_cmd()], stream, timeout=300)
    assert res.returncode == 0, res.stderr
    assert hashlib.sha256(res.stdout).digest() == hashlib.sha256(stream).digest()
    rows = db_rows(db, "SELECT byte_len, newline, kind, msg_type FROM frames "
                       "WHERE direction = 'a2c' ORDER BY seq")
    assert rows == [(5, True, "invalid", None), (len(big), True, "notification", "ContentPart"),
                    (1001, True, "invalid", None), (len(big), False, "notification", "ContentPart")], \
        res.stderr
    # the 50 MB frames live in the sidecar, not in DuckDB, and read back exactly
    assert db_rows(db, "SELECT raw IS NULL, blob_offset IS NOT NULL FROM frames "
                       "WHERE byte_len = ? ORDER BY seq", [len(big)]) == [(True, True)] * 4
    assert os.path.getsize(db + ".blobs") == 4 * len(big)
    with open_store(db, read_only=True) as store:
        frames = store.frames(store.session()["session_id"], ("a2c",))
    assert [f.raw for f in frames] == [b"small", big, big[:1000] + b"\r", big]
