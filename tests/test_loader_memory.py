"""The loader's memory limit (recorder/loader.py, MEMORY_LIMIT_MB): rows whose values do not fit
under it still go in whole (a checkpoint, then a higher limit), and the checkpoints of large
values run without it (under it DuckDB failed them as FATAL errors)."""

from __future__ import annotations

import os
import time

from wire_recorder.recorder import loader
from wire_recorder.recorder.spool import A2C, C2A, SpoolWriter
from wire_recorder.recorder.store import INLINE_MAX, open_store


def _frame(i: int, size: int) -> bytes:
    text = (f"f{i:05d} " + os.urandom(size // 2).hex())[:size]
    return (b'{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart","payload":'
            b'{"type":"text","text":"' + text.encode() + b'"}}}\n')


def test_large_frames_load_whole_past_the_memory_limit(tmp_path, monkeypatch):
    db = str(tmp_path / "rec.db")
    spool = str(tmp_path / "rec.db.s1.spool")
    meta = {"session_id": "s1", "name": None, "tags": {}, "command": ["cat"],
            "cwd": str(tmp_path), "protocol": None, "started_wall_ns": time.time_ns(),
            "mono_start_ns": time.monotonic_ns(), "proxy_version": "test", "proxy_pid": 1,
            "host": "h", "quiet": True, "redact": False, "snapshot_workdir": False, "db": db}
    # 600 KB frames: raw goes to the sidecar, the payload stays inline (in DuckDB's memory until a
    # checkpoint); small ones between them share the batches
    frames = [_frame(i, 600_000 if i % 2 else 300) for i in range(24)]
    assert max(map(len, frames)) > INLINE_MAX
    w = SpoolWriter(spool, meta, max_pending=1 << 40)
    for fr in frames:
        for s in (C2A, A2C):
            for at in range(0, len(fr), 65536):  # the relay's read size
                w.put(s, fr[at:at + 65536])
    w.set_exit(0)
    w.close()

    monkeypatch.setattr(loader, "MEMORY_LIMIT_MB", 4)
    hit: list[BaseException] = []
    real = loader._out_of_memory
    monkeypatch.setattr(loader, "_out_of_memory", lambda e: hit.append(e) or real(e))
    summary = loader.ingest_spool(spool, follow=False)

    assert hit and all(real(e) for e in hit), "the limit was never reached: nothing tested"
    assert summary["frames"] == 2 * len(frames)
    assert not os.path.exists(spool)
    with open_store(db, read_only=True) as store:
        got = [(f.direction, f.raw) for f in store.frames("s1", ("c2a", "a2c"))]
        (lost,) = store.con.execute("SELECT lost_frames FROM sessions").fetchall()[0]
    assert lost == 0
    assert sorted(got) == sorted([(d, fr[:-1]) for fr in frames for d in ("c2a", "a2c")])
