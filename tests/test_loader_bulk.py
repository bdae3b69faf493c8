"""The loader's bulk path (recorder/bulk.py) stores exactly what the frame-by-frame path stores:
the same spool loaded both ways gives the same rows (raw, kind, method, id, type, payload,
known, anomaly, parse errors, seq, times) and the same session counts, for a session that mixes
every frame kind, frames cut across spool records, pending-id and foreign-method anomalies,
numbers DuckDB reads otherwise, secrets (a read holding one goes frame by frame) and lifecycle
events; and for a session streaming messages in pieces, with secrets split between pieces and
between reads (a message streaming at a read's end goes frame by frame, its pieces carried over
to the next read, so that its joined text is screened whole; the rest of the read goes in bulk)."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import time
import uuid

import duckdb
import orjson

from tests.harness.frame_kinds import generated
from wire_recorder.recorder import bulk, loader, redact
from wire_recorder.recorder.spool import A2C, C2A, SpoolReader, SpoolWriter

COLS = ("seq", "ts", "mono_ns", "direction", "raw", "newline", "byte_len", "kind", "method",
        "rpc_id", "msg_type", "payload", "parse_error", "known", "blob_offset", "anomaly")
SESSION = ("frame_count", "lost_frames", "lost_bytes", "protocol", "end_reason")
REAL_FEED = bulk.Bulk.feed


def _event(i: int, text: str = "") -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": "event", "params": {
        "type": "StatusUpdate", "payload": {"note": f"event {i} {text}"}}})


SPLIT = "k-proj-AbCdEfGh0123456789AbCdEfGh0123456789xyzw"


def _piece(text: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": "event", "params": {
        "type": "ContentPart", "payload": {"type": "text", "text": text}}})


def _streams() -> tuple[bytes, bytes]:
    c2a, a2c = [], []
    for i in range(3000):
        a2c.append(_event(i, "x" * (i % 50)))
        if i % 97 == 0:
            c2a.append(orjson.dumps({"jsonrpc": "2.0", "id": i // 97 % 5, "method": "prompt",
                                     "params": {"user_input": f"do {i}", "n": 1.5e-3}}))
        if i % 89 == 0:
            a2c.append(orjson.dumps({"jsonrpc": "2.0", "id": i // 89 % 4, "result": {"ok": i}}))
        if i % 113 == 0:  # another protocol's method
            a2c.append(orjson.dumps({"jsonrpc": "2.0", "method": "session/update",
                                     "params": {"update": {"sessionUpdate": "plan"}}}))
        if i == 1500:  # a read holding a secret goes frame by frame
            a2c.append(_event(i, "Authorization: Bearer abcdefghijklmnopqrstuvwx0123"))
        if i == 2200:  # a secret split between two streamed pieces, in neither alone
            a2c += [_piece("here: s"), _piece(SPLIT)]
        if i % 500 == 250:  # what Python classifies, in reads that otherwise go in bulk
            a2c.append(b'{"jsonrpc":"2.0","method":"event","params":{"type":"ToolResult",'
                       b'"payload":{"n":123456789012345678901234}}}')
            c2a.append(b'{"jsonrpc":"2.0","id":"big","result":{"v":1e999}}')
    for raw, d in generated():
        if b"initialize" not in raw and b"\n" not in raw:
            (c2a if d == "c2a" else a2c).append(raw)
    for i in range(3000, 4000):
        a2c.append(_event(i))
    return b"".join(f + b"\n" for f in c2a), b"".join(f + b"\n" for f in a2c)


def _streamed() -> list[tuple[int, bytes]]:
    """Spool records of a session streaming messages in pieces between other events, as kimi
    streams them (text, tool calls): every 9th record ends inside a message whose secret is
    split between that record's last piece and the next record's first (a message of 60 pieces,
    longer than the part of a message carried over, every 27th)."""
    out: list[tuple[int, bytes]] = []
    for i in range(400):
        c2a, a2c = [], []
        if i % 9 == 1:  # the rest of the message the record before ended in
            a2c += [_piece(SPLIT + f" then {k}") for k in range(3)]
        if i % 40 == 0:
            c2a.append(orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "prompt",
                                     "params": {"user_input": f"go {i}"}}))
            a2c.append(orjson.dumps({"jsonrpc": "2.0", "id": i, "result": {"ok": True}}))
        a2c.append(_event(i))
        if i % 3 == 0:
            a2c.append(orjson.dumps({"jsonrpc": "2.0", "method": "event", "params": {
                "type": "ToolCall", "payload": {"type": "function", "id": f"t{i}", "function": {
                    "name": "Shell", "arguments": '{"command": "ls'}}}}))
            a2c += [orjson.dumps({"jsonrpc": "2.0", "method": "event", "params": {
                "type": "ToolCallPart", "payload": {"arguments_part": f" -l{k}"}}})
                for k in range(i % 11)]
            a2c.append(_event(i, "done"))
        a2c += [_piece(f"word {i}.{k} ") for k in range(i % 13)]
        a2c.append(_event(i, "after"))
        if i % 9 == 0:  # a message that goes on in the next record
            long = i % 27 == 0
            a2c += [_piece(f"{'x' * 90} {k} " if long else "here: ") for k in range(60 if long else 1)]
            a2c.append(_piece("and s"))
        if c2a:
            out.append((C2A, b"".join(f + b"\n" for f in c2a)))
        out.append((A2C, b"".join(f + b"\n" for f in a2c)))
    return out


def _spool(tmp: str, name: str, streams=_streams) -> str:
    db = os.path.join(tmp, f"{name}.db")
    sid = uuid.uuid4().hex
    path = f"{db}.{sid}.spool"
    meta = {"session_id": sid, "db": db, "name": None, "tags": {}, "command": ["cat"],
            "cwd": tmp, "protocol": None, "started_wall_ns": time.time_ns(),
            "mono_start_ns": time.monotonic_ns(), "proxy_version": "test", "proxy_pid": 1,
            "host": "h", "quiet": True, "redact": True, "snapshot_workdir": False}
    w = SpoolWriter(path, meta, no_loss=True)
    w.event("spawn", argv=["cat"], cwd=tmp, pid=1)
    if streams in (_streamed, _long_secret, _long_message):  # records as they are (one read each: see
        # _one_record_a_read)
        for stream, data in streams():
            w.put(stream, data)
    else:
        c2a, a2c = streams()
        # records cut at odd places: frames span records
        step_c, step_a = 1777, 3001
        for k in range(max(len(c2a) // step_c, len(a2c) // step_a) + 1):
            if k * step_c < len(c2a):
                w.put(C2A, c2a[k * step_c:(k + 1) * step_c])
            if k * step_a < len(a2c):
                w.put(A2C, a2c[k * step_a:(k + 1) * step_a])
    w.event("exit", exit_status=0, signal=None)
    w.close()
    return path


def _load(path: str, use_bulk: bool, monkeypatch) -> tuple[list, tuple, int]:
    fed = {"bulk": 0}
    real = REAL_FEED

    def feed(self, records):
        done = use_bulk and real(self, records)
        fed["bulk"] += bool(done)
        return done
    monkeypatch.setattr(bulk.Bulk, "feed", feed)
    monkeypatch.setattr(loader, "READ_BYTES", 16 << 10)  # many reads: most past detection
    # one placeholder key for both loads, so their placeholders are the same
    monkeypatch.setattr(redact.secrets, "token_bytes", lambda n: b"k" * n)
    summary = loader.ingest_spool(path, follow=False)
    con = duckdb.connect(summary["db"], read_only=True)
    try:
        rows = con.execute(f"SELECT {', '.join(COLS)} FROM frames ORDER BY seq").fetchall()
        session = con.execute(f"SELECT {', '.join(SESSION)} FROM sessions").fetchone()
    finally:
        con.close()
    os.rename(summary["db"], summary["db"] + ".done")  # the same spool loads again after
    return rows, session, fed["bulk"]


def test_bulk_stores_what_frame_by_frame_stores(tmp_path, monkeypatch):
    path = _spool(str(tmp_path), "x")
    shutil.copy(path, path + ".copy")
    slow, slow_session, none = _load(path, False, monkeypatch)
    os.rename(path + ".copy", path)
    fast, fast_session, reads = _load(path, True, monkeypatch)
    assert none == 0
    assert reads >= 10  # most of the session went in bulk
    assert fast_session == slow_session
    assert len(fast) == len(slow) > 8000
    for a, b in zip(slow, fast, strict=True):
        assert a == b
    kinds = {r[COLS.index("kind")] for r in fast}
    assert {"request", "notification", "response", "error", "invalid", "lifecycle"} <= kinds
    assert any(r[COLS.index("anomaly")] for r in fast)
    for secret in (b"abcdefghijklmnopqrstuvwx0123", SPLIT[8:].encode()):
        assert not any(secret in (r[COLS.index("raw")] or b"") for r in fast), secret


def _one_record_a_read(monkeypatch) -> None:
    """The spool read one record at a time, so that reads end where the records do."""
    real = SpoolReader.read_available
    queue: dict[int, list] = {}

    def read_available(self, max_bytes=8 << 20, final=False):
        q = queue.setdefault(id(self), [])
        if not q:
            q += real(self, max_bytes, final)
        self.behind = self.behind or len(q) > 1
        return [q.pop(0)] if q else []
    monkeypatch.setattr(SpoolReader, "read_available", read_available)


def test_bulk_carries_a_streaming_message_over_to_the_next_read(tmp_path, monkeypatch):
    _one_record_a_read(monkeypatch)
    path = _spool(str(tmp_path), "s", _streamed)
    shutil.copy(path, path + ".copy")
    slow, slow_session, _ = _load(path, False, monkeypatch)
    os.rename(path + ".copy", path)
    fast, fast_session, reads = _load(path, True, monkeypatch)
    # nearly every read holds pieces: most still go in bulk
    assert reads >= 200
    assert fast_session == slow_session
    assert len(fast) == len(slow) > 5000
    for a, b in zip(slow, fast, strict=True):
        assert a == b
    raws = [r[COLS.index("raw")] or b"" for r in fast]
    # each secret's first half ("and s") is masked too, at a read's end or inside one
    assert sum(b"REDAC" in r or b"TED:" in r for r in raws) >= 40
    assert not any(b'"and s"' in r or f'"{SPLIT} then 0"'.encode() in r for r in raws)


# a JWT whose header (a certificate chain, `x5c`) is longer than the part of a message carried
# over to the next read: its anchor (`.eyJ`, the second part) comes only in the next read
_CERT = base64.b64encode(b"".join(hashlib.sha256(bytes([i])).digest() for i in range(110)))
JWT = ".".join(base64.urlsafe_b64encode(part).decode().rstrip("=") for part in (
    orjson.dumps({"alg": "RS256", "typ": "JWT", "x5c": [_CERT.decode()] * 2}),
    b'{"sub":"user","exp":1900000000}', hashlib.sha256(b"signature").digest() * 8))


def _long_secret() -> list[tuple[int, bytes]]:
    """Records of a session that streams a JWT in 16-character pieces, cut between two records
    (reads) 6,000 characters into it, 6,586 before the anchor the screen looks for."""
    out = [(A2C, b"".join(_event(i) + b"\n" for i in range(k * 40, k * 40 + 40)))
           for k in range(4)]
    pieces = [_piece("signed with ")] + [_piece(JWT[i:i + 16]) for i in range(0, len(JWT), 16)]
    out.append((A2C, b"".join(f + b"\n" for f in [_event(200), *pieces[:376]])))
    out.append((A2C, b"".join(f + b"\n" for f in [*pieces[376:], _event(201, "done")])))
    out += [(A2C, b"".join(_event(i) + b"\n" for i in range(k * 40, k * 40 + 40)))
            for k in range(6, 8)]
    return out


def test_bulk_masks_a_secret_longer_than_the_carried_over_part(tmp_path, monkeypatch):
    _one_record_a_read(monkeypatch)
    path = _spool(str(tmp_path), "j", _long_secret)
    shutil.copy(path, path + ".copy")
    slow, _, _ = _load(path, False, monkeypatch)
    os.rename(path + ".copy", path)
    fast, _, reads = _load(path, True, monkeypatch)
    assert reads >= 3
    # no 24 characters of the JWT in the message's pieces joined, nor in any row
    bits = [JWT[i:i + 24] for i in range(0, len(JWT) - 24, 8)]
    for rows in (slow, fast):
        raws = [r[COLS.index("raw")] for r in rows]
        texts = [orjson.loads(r)["params"]["payload"]["text"] for r in raws
                 if b'"ContentPart"' in r]
        assert len(texts) == 1 + -(-len(JWT) // 16)  # the message's pieces
        joined = "".join(texts)
        assert not [b for b in bits if b in joined]
        for c in ("raw", "payload"):
            stored = [v if isinstance(v, bytes) else (v or "").encode()
                      for v in (r[COLS.index(c)] for r in rows)]
            assert not [b for b in bits if any(b.encode() in v for v in stored)]
    assert len(fast) == len(slow)
    for a, b in zip(slow, fast, strict=True):
        assert a == b


def _long_message() -> list[tuple[int, bytes]]:
    """Records of one long message streamed in pieces, without a secret, each record (read)
    ending inside it with more than TAIL_CHARS characters of it."""
    out = [(C2A, orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "prompt",
                               "params": {"user_input": "go"}}) + b"\n")]
    for i in range(30):
        out.append((A2C, b"".join(_piece(f"piece {i}.{k} " + "lorem ipsum " * 4) + b"\n"
                                  for k in range(100))))
    out.append((A2C, _event(0) + b"\n"))
    return out


def test_bulk_holds_the_end_of_a_streaming_message_over_to_the_next_read(tmp_path, monkeypatch):
    """While the spool holds more, the end of a message still streaming at a read's end goes in
    front of the next read (screened with its pieces there), not frame by frame: 1M small
    frames sent ~3% of them frame by frame, ~15% of the loader's CPU."""
    _one_record_a_read(monkeypatch)
    framed = {"n": 0}
    real = loader.Ingest._frame

    def frame(self, *a):
        framed["n"] += 1
        return real(self, *a)
    monkeypatch.setattr(loader.Ingest, "_frame", frame)
    path = _spool(str(tmp_path), "m", _long_message)
    shutil.copy(path, path + ".copy")
    slow, slow_session, _ = _load(path, False, monkeypatch)
    os.rename(path + ".copy", path)
    framed["n"] = 0
    fast, fast_session, reads = _load(path, True, monkeypatch)
    assert fast_session == slow_session
    assert len(fast) == len(slow) > 3000
    for a, b in zip(slow, fast, strict=True):
        assert a == b
    # the session's first frames (protocol detection) and the last read's end only (frame by
    # frame, the end of each of the 30 reads: ~70 pieces each)
    assert framed["n"] < 300, framed


def test_frames_of_megabytes_load_under_the_memory_limit(tmp_path):
    """A read holding frames of 2 MiB (after the protocol is known) goes frame by frame, their
    values to the sidecar: staged in SQL, their copies failed the loader's memory limit
    (`bench_proxy.py`'s 2 MiB throughput case: 'recording failed (OutOfMemoryException)', the
    session left in its spool)."""
    big = [_piece(f"{k:03d} " + os.urandom(1 << 20).hex()) for k in range(12)]
    small = [_event(i) for i in range(100)]

    def streams() -> tuple[bytes, bytes]:
        frames = b"".join(f + b"\n" for f in small + big)
        return frames, frames
    path = _spool(str(tmp_path), "big", streams)
    summary = loader.ingest_spool(path, follow=False)
    assert not os.path.exists(path)
    con = duckdb.connect(summary["db"], read_only=True)
    try:
        got = con.execute("SELECT direction, count(*), sum(byte_len) FROM frames WHERE "
                          "kind <> 'lifecycle' GROUP BY ALL ORDER BY 1").fetchall()
        lost = con.execute("SELECT lost_frames FROM sessions").fetchone()
    finally:
        con.close()
    size = sum(len(f) for f in small + big)
    assert got == [("a2c", 112, size), ("c2a", 112, size)] and lost == (0,)
