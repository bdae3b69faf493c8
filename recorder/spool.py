"""The spool: an append-only file between the relay and the loader process.

The relay process must stay light (no duckdb, no JSON parsing), so it only appends raw chunks
here; the loader re-assembles frames. The file is the recovery log too: whatever reached it
survives a SIGKILL of the proxy.

Layout: MAGIC, one JSON line of session metadata, then records of
``REC`` header (stream, length, monotonic ns, wall ns) + ``length`` bytes.
"""

from __future__ import annotations

import collections
import json
import os
import struct
import threading
import time

from .edge import PROXY, say
from .errors import SpoolError

MAGIC = b"WIRESPOOL1\n"
REC = struct.Struct("<BxxxIQq")  # stream, length, mono_ns, wall_ns

C2A, A2C, STDERR, EVENT = 0, 1, 2, 3
STREAM_NAMES = {C2A: "c2a", A2C: "a2c", STDERR: "stderr", EVENT: "proxy"}
DATA_STREAMS = (C2A, A2C, STDERR)

# How long a chunk may sit in memory before it is on disk. This bounds what a SIGKILL can take.
FLUSH_INTERVAL_S = 0.02
# A burst wakes the writer early instead of letting the queue grow for a whole interval.
WAKE_BYTES = 1 << 20
# Past this many queued bytes (a stalled disk) chunks are dropped from the recording, counted,
# and reported; the relay itself never waits for the disk.
DEFAULT_MAX_PENDING = 128 << 20


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


_IOV_MAX = 512


def writev_all(fd: int, parts: list) -> None:
    """Append many buffers without joining them (a join copies every 64 KiB chunk again)."""
    for i in range(0, len(parts), _IOV_MAX):
        group = parts[i:i + _IOV_MAX]
        n = os.writev(fd, group)
        total = sum(len(p) for p in group)
        if n < total:  # partial write: finish the rest the slow way
            rest = b"".join(group)[n:]
            write_all(fd, rest)


def _event_bytes(event: str, **data) -> bytes:
    data["event"] = event
    return json.dumps(data, separators=(",", ":")).encode()


def _queue_full_gap(stream: int, chunks: int, nbytes: int, frames: int) -> tuple:
    """The queue entry that marks chunks of one stream dropped because the disk fell behind."""
    return (EVENT, time.monotonic_ns(), time.time_ns(), _event_bytes(
        "recording_gap", stream=STREAM_NAMES[stream], chunks=chunks, bytes=nbytes,
        frames=frames, reason="spool queue full (disk too slow)"))


class SpoolWriter:
    """Queues chunks from relay threads and appends them to the spool from its own thread."""

    def __init__(self, path: str, meta: dict, *, max_pending: int = DEFAULT_MAX_PENDING,
                 flush_interval: float = FLUSH_INTERVAL_S):
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            import fcntl

            # A shared lock says "a live proxy owns this spool"; recovery only takes spools
            # nobody holds.
            fcntl.flock(self.fd, fcntl.LOCK_SH)
        except (ImportError, OSError):
            pass
        write_all(self.fd, MAGIC + json.dumps(meta, separators=(",", ":")).encode() + b"\n")
        self.max_pending = max_pending
        self.flush_interval = flush_interval
        self._q: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._pending = 0
        # chunks/bytes/newlines dropped per stream since the last gap marker
        self._dropped: dict[int, list[int]] = {}
        self.lost_chunks = 0
        self.lost_bytes = 0
        self.lost_frames = 0
        self.write_error: str | None = None
        self._unwritten: list[tuple[int, int, int]] = []  # (chunks, bytes, frames) per failed batch
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="spool-writer", daemon=True)
        self._thread.start()

    # -- called from relay threads -------------------------------------------------------------
    def put(self, stream: int, data: bytes) -> None:
        n = len(data)
        with self._lock:
            # After close (a grandchild still writing once the agent is gone) nothing reaches
            # the disk any more: count it like any other loss.
            if self._closed or self._pending + n > self.max_pending:
                frames = data.count(b"\n")
                d = self._dropped.setdefault(stream, [0, 0, 0])
                d[0] += 1
                d[1] += n
                d[2] += frames
                self.lost_chunks += 1
                self.lost_bytes += n
                self.lost_frames += frames
                return
            if stream in self._dropped:
                self._q.append(_queue_full_gap(stream, *self._dropped.pop(stream)))
            self._pending += n
            self._q.append((stream, time.monotonic_ns(), time.time_ns(), data))
            if self._pending > WAKE_BYTES:
                self._wake.set()

    def event(self, event: str, **data) -> None:
        """Record a lifecycle event (spawn, exit, signal, proxy_error...)."""
        self._q.append((EVENT, time.monotonic_ns(), time.time_ns(), _event_bytes(event, **data)))

    # -- writer thread ------------------------------------------------------------------------
    def _drain(self) -> None:
        q = self._q
        if not q:
            return
        parts = []
        nbytes = 0
        chunks = 0
        frames = 0
        while q:
            stream, mono, wall, data = q.popleft()
            parts.append(REC.pack(stream, len(data), mono, wall))
            parts.append(data)
            if stream != EVENT:
                nbytes += len(data)
                chunks += 1
        if self._unwritten:
            # The disk failed earlier and works again: say in the spool what is missing.
            c, b, f = map(sum, zip(*self._unwritten, strict=True))
            gap = _event_bytes("recording_gap", stream="all", chunks=c, bytes=b, frames=f,
                               reason=f"spool write failed: {self.write_error}")
            parts.insert(0, gap)
            parts.insert(0, REC.pack(EVENT, len(gap), time.monotonic_ns(), time.time_ns()))
        try:
            writev_all(self.fd, parts)
            self._unwritten.clear()
        except OSError as e:
            # A frame that cannot be recorded is counted and reported, never silently dropped.
            if self.write_error is None:
                say(PROXY, f"cannot write the recording ({e.strerror}); "
                           "relaying continues, lost frames are counted")
            self.write_error = e.strerror or str(e)
            # Counting newlines holds the GIL (~1 GB/s): only on this rare path, never per batch.
            frames = sum(p.count(b"\n") for p in parts[1::2])
            self._unwritten.append((chunks, nbytes, frames))
            with self._lock:
                self.lost_chunks += chunks
                self.lost_bytes += nbytes
                self.lost_frames += frames
        with self._lock:
            self._pending -= nbytes

    def _run(self) -> None:
        while not self._closed:
            if not self._q:
                self._wake.wait(self.flush_interval)
            self._wake.clear()
            self._drain()
        self._drain()

    def close(self, **end_data) -> None:
        """Flush everything, write the end marker and close. Safe to call once."""
        with self._lock:
            for stream, counts in self._dropped.items():
                self._q.append(_queue_full_gap(stream, *counts))
            self._dropped.clear()
        self._closed = True
        self._wake.set()
        self._thread.join()
        end = _event_bytes("end", lost_chunks=self.lost_chunks, lost_bytes=self.lost_bytes,
                           lost_frames=self.lost_frames, **end_data)
        try:
            write_all(self.fd, REC.pack(EVENT, len(end), time.monotonic_ns(), time.time_ns()) + end)
        except OSError:
            pass
        os.close(self.fd)


class SpoolRecord:
    __slots__ = ("stream", "mono_ns", "wall_ns", "data")

    def __init__(self, stream: int, mono_ns: int, wall_ns: int, data: bytes):
        self.stream = stream
        self.mono_ns = mono_ns
        self.wall_ns = wall_ns
        self.data = data


class SpoolReader:
    """Reads records from a spool that may still be growing (tail) or was cut by a crash."""

    def __init__(self, path: str):
        self.path = path
        self.f = open(path, "rb")
        head = self.f.read(len(MAGIC))
        if head != MAGIC:
            raise SpoolError(f"{path} is not a wire-recorder spool")
        line = self.f.readline()
        if not line.endswith(b"\n"):
            raise SpoolError(f"{path} has an incomplete header")
        self.meta = json.loads(line)
        self.offset = self.f.tell()
        self.behind = False
        self._buf = b""

    def read_available(self, max_bytes: int = 8 << 20) -> list[SpoolRecord]:
        """Every complete record on disk now (up to about max_bytes); a torn tail waits."""
        data = self.f.read(max_bytes)
        self.behind = len(data) >= max_bytes  # a full read: more is probably waiting
        if data:
            self._buf = self._buf + data if self._buf else data
        buf = self._buf
        out = []
        pos = 0
        hsize = REC.size
        n = len(buf)
        while n - pos >= hsize:
            stream, length, mono, wall = REC.unpack_from(buf, pos)
            end = pos + hsize + length
            if end > n:
                break
            out.append(SpoolRecord(stream, mono, wall, buf[pos + hsize:end]))
            pos = end
        self._buf = buf[pos:]
        self.offset += pos
        return out

    @property
    def torn_bytes(self) -> int:
        return len(self._buf)

    def close(self) -> None:
        self.f.close()
