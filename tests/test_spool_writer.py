"""The spool writer's queue: relay threads queue record headers and chunks of every size in one
flat list the writer thread swaps out and writes, and a bounded queue drops chunks. Whatever
the mix, every record in the file checks, each stream keeps its order, and what is missing is
counted exactly (in the writer, in the gap markers, in the relay's counters)."""

from __future__ import annotations

import json
import threading

from wire_recorder.recorder.spool import (
    A2C,
    C2A,
    EVENT,
    STREAM_NAMES,
    SpoolReader,
    SpoolWriter,
    newlines,
    read_counters,
)

SIZES = (120, 2000, 8192, 8193, 70_000)


def _chunks(stream: int, n: int) -> list[bytes]:
    out = []
    for i in range(n):
        size = SIZES[i % len(SIZES)]
        head = b"%d-%06d " % (stream, i)
        out.append(head + b"x" * (size - len(head) - 1) + b"\n")
    return out


def _write(writer: SpoolWriter, sent: dict[int, list[bytes]]) -> None:
    """Both streams at once, as the two relay threads do."""
    threads = [threading.Thread(target=lambda s=s: [writer.put(s, c) for c in sent[s]])
               for s in sent]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()


def _check(path: str, writer: SpoolWriter, sent: dict[int, list[bytes]]) -> int:
    reader = SpoolReader(path)
    records = reader.read_available(1 << 30, final=True)
    assert reader.skipped_bytes == 0 and reader.torn_bytes == 0  # every record checks
    reader.close()
    gaps: dict[str, list[int]] = {}
    for r in records:
        if r.stream == EVENT:
            ev = json.loads(r.data)
            if ev["event"] == "recording_gap":
                g = gaps.setdefault(ev["stream"], [0, 0])
                g[0] += ev["bytes"]
                g[1] += ev["frames"]
    lost_bytes = lost_frames = 0
    for stream, chunks in sent.items():
        got = [r.data for r in records if r.stream == stream]
        it = iter(chunks)
        assert all(any(g == c for c in it) for g in got), "a stream lost its order"
        missing = [c for c in chunks if c not in set(got)]
        lost_b = sum(map(len, missing))
        lost_f = sum(c.count(b"\n") for c in missing)
        assert gaps.get(STREAM_NAMES[stream], [0, 0]) == [lost_b, lost_f]
        lost_bytes += lost_b
        lost_frames += lost_f
    assert (writer.lost_bytes, writer.lost_frames) == (lost_bytes, lost_frames)
    counters = read_counters(path)
    assert counters is not None
    relayed = counters[0]
    for stream, chunks in sent.items():  # the relay's counters: everything that was put
        assert relayed[stream] == sum(map(len, chunks))
        assert relayed[stream + 3] == len(chunks)
    end = json.loads([r.data for r in records if r.stream == EVENT][-1])
    assert end["event"] == "end" and end["lost_frames"] == lost_frames
    return lost_frames


def test_mixed_chunks_through_a_tight_queue_are_whole_in_order_or_counted(tmp_path):
    path = str(tmp_path / "a.spool")
    writer = SpoolWriter(path, {"session_id": "t", "started_wall_ns": 0}, max_pending=160_000)
    sent = {C2A: _chunks(C2A, 400), A2C: _chunks(A2C, 400)}
    _write(writer, sent)
    _check(path, writer, sent)  # how much is dropped depends on the machine; its count does not


def test_a_queue_that_is_never_written_drops_all_past_its_bound_and_says_so(tmp_path):
    path = str(tmp_path / "b.spool")
    # written only at close: everything past the bound is dropped, whatever the machine
    writer = SpoolWriter(path, {"session_id": "t", "started_wall_ns": 0}, max_pending=100_000,
                         flush_interval=3600.0)
    sent = {C2A: _chunks(C2A, 60), A2C: _chunks(A2C, 60)}
    _write(writer, sent)
    assert _check(path, writer, sent) > 0


def test_newline_count_sparse_or_dense():
    cases = [b"", b"\n", b"x" * 70_000, b"x" * 70_000 + b"\n", b"\n" * 9, b"a\nb\nc\n" * 5000,
             b"\n".join(b"y" * k for k in range(40)), b"z\n" * 3 + b"q" * 10]
    for data in cases:
        assert newlines(data) == data.count(b"\n")


def test_a_chunk_put_after_close_is_counted_lost_and_leaves_the_file_alone(tmp_path):
    """A relay thread may still put after close (a grandchild of the agent writing on): the
    chunk is counted as lost, and the closed spool's counters block stays as it was closed
    (the relay counts into the mapped block itself while the spool is open)."""
    path = str(tmp_path / "s.spool")
    writer = SpoolWriter(path, {"session_id": "t"})
    writer.put(C2A, b"ab\n" * 10)
    writer.put(A2C, b"x\n")
    writer.close()
    closed = read_counters(path)
    assert closed == ([30, 2, 0, 10, 1, 0], None)
    writer.put(C2A, b"late\nlate\n")
    assert (writer.lost_chunks, writer.lost_bytes, writer.lost_frames) == (1, 10, 2)
    assert read_counters(path) == closed
