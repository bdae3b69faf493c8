"""The spool: an append-only file between the relay and the loader process.

The relay process must stay light (no duckdb, no JSON parsing), so it only appends raw chunks
here; the loader re-assembles frames. The file is the recovery log too: whatever reached it
survives a SIGKILL of the proxy.

Layout (version 2, `WIRESPOOL2`): a header page, then records.

* header (HEADER_PAGE bytes or a multiple): MAGIC, the header's size, the counters block, the
  length of the session metadata and the metadata as JSON (with a random `salt`), zero padding.
* counters block: what the relay threads moved, per data stream (bytes and newlines), and the
  agent's exit, kept in a shared mapping of the file. The relay updates it before it queues a
  chunk, so after any end (a SIGKILL, a full disk) the loader knows exactly what was relayed
  and marks whatever is missing from the records as a `recording_gap`.
* record: a 36-byte header (SYNC, crc32 of the rest of the header, crc32 of the data, length,
  stream, monotonic ns, wall ns; both checksums seeded with the salt, so bytes that merely look
  like a record, e.g. a spool relayed through a proxy, never pass) + `length` bytes. A record cut
  by a partial write (a full disk) fails its checksum and is skipped alone: the reader looks for
  the next SYNC whose header checks, and the writer completes a cut record's length with zeros
  once it can write again, so the reader is never left waiting for bytes that will not come.

Version 1 (`WIRESPOOL1`: a JSON line, then 24-byte headers without checksums) is still read.
"""

from __future__ import annotations

import collections
import json
import mmap
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable

from .edge import PROXY, say
from .errors import SpoolError

MAGIC_V1 = b"WIRESPOOL1\n"
MAGIC = b"WIRESPOOL2\n"
REC_V1 = struct.Struct("<BxxxIQq")  # stream, length, mono_ns, wall_ns
SYNC = b"\xf7WS\x02"
REC_TAIL = struct.Struct("<IIBxxxQq")  # data crc, length, stream, mono_ns, wall_ns
REC_HSIZE = 8 + REC_TAIL.size  # SYNC + header crc + tail
_U32 = struct.Struct("<I")
HEADER_PAGE = 4096
# counters block at a fixed offset of the header page
COUNTERS_OFFSET = 16
COUNTERS = struct.Struct("<8q")  # bytes c2a/a2c/stderr, newlines c2a/a2c/stderr, exit flag, status
_Q = struct.Struct("<q")
META_LEN_OFFSET = COUNTERS_OFFSET + COUNTERS.size
MAX_RECORD = 1 << 30

C2A, A2C, STDERR, EVENT = 0, 1, 2, 3
# client bytes read after the agent exited: c2a, never delivered (format 2 only)
C2A_LATE = 4
STREAM_NAMES = {C2A: "c2a", A2C: "a2c", STDERR: "stderr", EVENT: "proxy", C2A_LATE: "c2a"}
DATA_STREAMS = (C2A, A2C, STDERR)
# the counters' flag word: the agent's exit status is in the last word; the writer is done
# (its end marker is on disk, or could not be written: a full disk)
EXIT_KNOWN, CLOSED = 1, 2

# How long a chunk may sit in memory before it is on disk. This bounds what a SIGKILL can take
# while the disk keeps up.
FLUSH_INTERVAL_S = 0.02
# This much queued wakes the writer before its interval is over: one wake-up per MiB at most
# (the relay thread that crosses it sets an event once; the writer, not the relay, does the rest).
WAKE_BYTES = 1 << 20
# One writev appends at most this much: a long one holds a core in the kernel, and a relay
# thread woken on that core waits for it (seen as a stalled round trip every flush).
WRITEV_BYTES = 256 << 10
# The relay counts as busy while it moves at least this many bytes a second, and as quiet once it
# has moved less for QUIET_S: the loader's CPU share follows (on_busy, recorder/cpu_share.py).
# 1 MB/s: 200 B round trips in both directions pass it even on a loaded machine (~100 us each),
# an agent's session of streamed events does not.
BUSY_BYTES_S = 1_000_000
QUIET_S = 0.5
# Past this share of the bound queued, the relay threads checksum their chunks themselves (what
# the writer would do): a writer that fell behind gets help, and the relay slows to its pace by
# that much instead of dropping. Measured on a machine at load 15 on 2 cores: with every
# checksum in the writer, 2 KiB frames at full speed put it 128 MiB behind (256 KiB dropped,
# counted, marked) in 1 of 5 runs.
HELP_SHARE = 4
# Past this many queued bytes (a stalled disk) chunks are dropped from the recording, counted,
# and reported; the relay itself never waits for the disk (unless no_loss is asked for).
DEFAULT_MAX_PENDING = 128 << 20
NO_LOSS_PENDING = 16 << 20
_IOV_MAX = 512


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class PartialWrite(OSError):
    """A write that failed after `done` bytes of the batch reached the file."""

    def __init__(self, error: OSError, done: int):
        super().__init__(error.errno, error.strerror)
        self.done = done


def writev_all(fd: int, parts: list) -> int:
    """Append many buffers without joining them (a join copies every 64 KiB chunk again), at
    most _IOV_MAX buffers and about WRITEV_BYTES per call. Raises PartialWrite saying how many
    bytes did reach the file."""
    done = 0
    i = 0
    total = len(parts)
    writev = os.writev
    try:
        while i < total:
            j = i
            size = 0
            while j < total and j - i < _IOV_MAX and (size < WRITEV_BYTES or j == i):
                size += len(parts[j])
                j += 1
            group = parts[i:j]
            n = writev(fd, group)
            done += n
            if n < size:  # partial write: finish the rest one buffer at a time
                skip = n
                for p in group:
                    if skip >= len(p):
                        skip -= len(p)
                        continue
                    view = memoryview(p)[skip:]
                    skip = 0
                    while view:
                        k = os.write(fd, view)
                        done += k
                        view = view[k:]
            i = j
    except OSError as e:
        raise PartialWrite(e, done) from None
    return done


def newlines(data: bytes) -> int:
    """data.count(b"\n"), faster: bytes.count looks at one byte at a time (22-50 us per 64 KiB
    here, whatever the density, holding the GIL in front of every relayed chunk). find is a
    memchr; once a few newlines are found, replace (a memchr per newline and a copy) counts
    the rest: 15 us per 64 KiB of 200 B frames, 2.3 us of 2 KiB frames, measured side by side."""
    find = data.find
    i = find(b"\n")
    n = 0
    while i >= 0:
        n += 1
        if n == 4:
            return len(data) - len(data.replace(b"\n", b""))
        i = find(b"\n", i + 1)
    return n


def _event_bytes(event: str, **data) -> bytes:
    data["event"] = event
    return json.dumps(data, separators=(",", ":")).encode()


def _gap_bytes(stream: int, counts: list[int], reason: str) -> bytes:
    chunks, nbytes, frames = counts
    return _event_bytes("recording_gap", stream=STREAM_NAMES[stream], chunks=chunks,
                        bytes=nbytes, frames=frames, reason=reason)


QUEUE_FULL = "spool queue full (disk too slow)"


def header_bytes(meta: dict) -> bytes:
    body = json.dumps(meta, separators=(",", ":")).encode()
    used = META_LEN_OFFSET + 4 + len(body)
    size = -(-used // HEADER_PAGE) * HEADER_PAGE
    head = bytearray(size)
    head[:len(MAGIC)] = MAGIC
    _U32.pack_into(head, 12, size)
    _U32.pack_into(head, META_LEN_OFFSET, len(body))
    head[META_LEN_OFFSET + 4:used] = body
    return bytes(head)


def pack_record(salt: int, stream: int, mono: int, wall: int, data) -> bytes:
    """A record's header for `data` (both checksums seeded with the salt)."""
    tail = REC_TAIL.pack(zlib.crc32(data, salt), len(data), stream, mono, wall)
    return SYNC + _U32.pack(zlib.crc32(tail, salt)) + tail


class SpoolWriter:
    """Takes chunks from the relay threads and appends them to the spool from its own thread.

    A relay thread's part (`put`) is kept to what the spool's guarantees need before a chunk is
    relayed: its bytes and newlines added to the counters block (what the loader sets against
    the spool after a SIGKILL, so every lost frame is counted), the memory bound, and one
    `deque.append` of (stream, monotonic ns, the chunk itself). No lock, no checksum (unless the
    writer is a quarter of the bound behind: HELP_SHARE), no record header, no wake-up per chunk:
    the writer thread wakes on its interval (or once per `wake_bytes` queued), stamps the wall
    time, checksums and packs each record and appends the batch with `writev`. Each data stream is put from one thread only (its relay thread): the
    per-stream tallies below are then written by one thread each, and need no lock.
    """

    def __init__(self, path: str, meta: dict, *, max_pending: int = DEFAULT_MAX_PENDING,
                 flush_interval: float = FLUSH_INTERVAL_S, no_loss: bool = False,
                 wake_bytes: int | None = None):
        self.path = path
        self.salt = int.from_bytes(os.urandom(4), "little")
        meta = dict(meta, salt=self.salt)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            import fcntl

            # A shared lock says "a live proxy owns this spool"; recovery only takes spools
            # nobody holds.
            fcntl.flock(self.fd, fcntl.LOCK_SH)
        except (ImportError, OSError):
            pass
        try:
            write_all(self.fd, header_bytes(meta))
        except OSError:
            os.close(self.fd)
            os.unlink(path)
            raise
        try:
            self._map: mmap.mmap | None = mmap.mmap(self.fd, HEADER_PAGE)
        except (OSError, ValueError):
            # no shared mapping here: the counters stay zero and the loader only marks what
            # the writer itself marked
            self._map = None
        # With backpressure a short queue is enough to keep the writer busy, and it is all a
        # SIGKILL can take.
        self.max_pending = min(max_pending, NO_LOSS_PENDING) if no_loss else max_pending
        self.help_pending = self.max_pending // HELP_SHARE
        self.flush_interval = flush_interval
        # A writer given a longer interval than the default batches by time alone (a stand-in
        # for a slow disk in tests), unless told otherwise.
        self.wake_bytes = wake_bytes if wake_bytes is not None else (
            WAKE_BYTES if flush_interval <= FLUSH_INTERVAL_S else 1 << 62)
        self.no_loss = no_loss
        # (stream, mono_ns, data, its crc32 or None) from the relay threads, proxy events too;
        # deque's append and popleft are atomic, so producers and the writer never take a lock
        self._q: collections.deque = collections.deque()
        # per data stream, written by its relay thread only: data bytes queued so far
        self._in = [0, 0, 0]
        self._out = 0  # ...and those the writer has taken off the queue (the writer's only)
        # bytes and newlines per data stream: the counters block itself (a view of the shared
        # mapping), or a list where there is no mapping
        self._cv: memoryview | list[int] = (
            memoryview(self._map)[COUNTERS_OFFSET:COUNTERS_OFFSET + 48].cast("q")
            if self._map is not None
            else [0] * 6)
        # per data stream (its relay thread's): [chunks, bytes, newlines] dropped since the last
        # gap marker (None: none), and all dropped so far
        self._dropped: list[list[int] | None] = [None, None, None]
        self._dropped_total = [[0, 0, 0] for _ in range(3)]
        self._discarded: dict[tuple[int, str], list[int]] = {}  # the a2c thread's
        self.discarded_bytes = 0  # not recorded on purpose (after a hang-up); not in lost_*
        self.discarded_frames = 0
        self._write_lost = [0, 0, 0]  # chunks, bytes, newlines a failed write lost (writer's)
        self.write_error: str | None = None
        # per stream (chunks, bytes, frames) that failed to reach the file, not yet marked there
        self._unwritten: dict[int, list[int]] = {}
        self._debt = 0  # zero bytes that complete a record cut by a partial write
        self._last_mono = 0  # records go to the file with non-decreasing times
        self._flags = 0
        self._space = threading.Condition()  # no_loss only: the writer made room
        self._wake = threading.Event()
        self._woken = False
        self._closed = False
        # called from the writer thread every interval or so: True while the relay is busy,
        # False once it has been quiet for QUIET_S
        self.on_busy: Callable[[bool], None] | None = None
        # what a relay thread calls for each chunk it moves: put(stream, data)
        self.put: Callable[[int, bytes], None] = self._bind_put()
        self._thread = threading.Thread(target=self._run, name="spool-writer", daemon=True)
        self._thread.start()

    # -- totals (read from any thread) ---------------------------------------------------------
    def _lost(self, i: int) -> int:
        return sum(d[i] for d in self._dropped_total) + self._write_lost[i]

    @property
    def lost_chunks(self) -> int:
        return self._lost(0)

    @property
    def lost_bytes(self) -> int:
        return self._lost(1)

    @property
    def lost_frames(self) -> int:
        return self._lost(2)

    # -- called from relay threads -------------------------------------------------------------
    def _count(self, slot: int, n: int, lines: int) -> None:
        cv = self._cv
        cv[slot] += n
        cv[slot + 3] += lines

    def _bind_put(self) -> Callable[[int, bytes], None]:
        """`put` as a closure over its state (cells and locals, no attribute lookups): it runs
        once per relayed chunk, in front of the write, holding the GIL."""
        q_append = self._q.append
        mono = time.monotonic_ns
        crc32 = zlib.crc32
        salt = self.salt
        in_ = self._in
        dropped = self._dropped
        wake = self._wake.set
        max_pending = self.max_pending
        help_pending = self.help_pending
        wake_bytes = self.wake_bytes
        count = bytes.count
        slots = (C2A, A2C, STDERR, EVENT, C2A)  # C2A_LATE is counted as c2a
        writer = self

        def put(stream: int, data: bytes) -> None:
            n = len(data)
            slot = slots[stream]
            # Counted before it is queued (and before it is relayed): whatever the process dies
            # of, the loader can tell exactly what never reached the spool. The newline count
            # is the one scan of the data left here: a chunk still queued when the proxy is
            # SIGKILLed is gone, and with it any later count. (bytes.count is one C call,
            # cheapest below a few KiB; newlines() wins on a full read.)
            lines = count(data, b"\n") if n <= 4096 else newlines(data)
            cv = writer._cv
            cv[slot] += n
            cv[slot + 3] += lines
            pending = in_[0] + in_[1] + in_[2] - writer._out
            if pending + n > max_pending or writer._closed or dropped[slot] is not None:
                if not writer._put_slow(slot, n, lines, pending):
                    return
            # monotonic_ns right before the append: a chunk stamped in one thread can still be
            # appended after one stamped later in another; the writer keeps the file's times in
            # order (the order of the queue is the order things happened in)
            q_append((stream, mono(), data,
                      crc32(data, salt) if pending > help_pending else None))
            in_[slot] += n
            if pending + n > wake_bytes and not writer._woken:
                writer._woken = True
                wake()

        return put

    def _put_slow(self, slot: int, n: int, lines: int, pending: int) -> bool:
        """put past the bound, after close, or after a drop: whether the chunk is queued."""
        if pending + n > self.max_pending or self._closed:
            if self.no_loss:
                pending = self._wait_for_room(n)
            if self._closed or pending + n > self.max_pending:
                d = self._dropped[slot]
                if d is None:
                    d = self._dropped[slot] = [0, 0, 0]
                t = self._dropped_total[slot]
                d[0] += 1
                d[1] += n
                d[2] += lines
                t[0] += 1
                t[1] += n
                t[2] += lines
                return False
        if self._dropped[slot] is not None:
            self._mark_dropped(slot)
        return True

    def _wait_for_room(self, n: int) -> int:
        """no_loss: wait until the writer has made room for n more bytes (or cannot)."""
        in_ = self._in
        with self._space:
            while True:
                pending = in_[0] + in_[1] + in_[2] - self._out
                if (not pending or pending + n <= self.max_pending or self._closed
                        or self.write_error is not None):
                    return pending
                self._woken = True
                self._wake.set()
                self._space.wait(0.5)

    def _mark_dropped(self, slot: int) -> None:
        counts = self._dropped[slot]
        self._dropped[slot] = None
        if counts is not None:
            self._q.append((EVENT, time.monotonic_ns(), _gap_bytes(slot, counts, QUEUE_FULL),
                            None))

    def discard(self, stream: int, data: bytes, reason: str) -> None:
        """Count a chunk that is relayed (or read) but deliberately not recorded; one gap
        marker per stream and reason says how much, when the spool closes."""
        lines = newlines(data)
        slot = C2A if stream == C2A_LATE else stream
        self._count(slot, len(data), lines)
        d = self._discarded.setdefault((slot, reason), [0, 0, 0])
        d[0] += 1
        d[1] += len(data)
        d[2] += lines
        self.discarded_bytes += len(data)
        self.discarded_frames += lines

    def event(self, event: str, **data) -> None:
        """Record a lifecycle event (spawn, exit, signal, proxy_error...)."""
        self._q.append((EVENT, time.monotonic_ns(), _event_bytes(event, **data), None))

    def set_exit(self, status: int) -> None:
        """The agent's exit status, kept in the counters block: known even when the disk was too
        full for the exit row."""
        m = self._map
        if m is not None:
            _Q.pack_into(m, COUNTERS_OFFSET + 56, status)
            self._flags |= EXIT_KNOWN
            _Q.pack_into(m, COUNTERS_OFFSET + 48, self._flags)

    # -- writer thread ------------------------------------------------------------------------
    def _records(self, parts: list) -> int:
        """Take what is queued now off the queue as records (header, data) appended to parts;
        the data bytes taken."""
        q = self._q
        n = len(q)
        if not n:
            return 0
        salt = self.salt
        crc32 = zlib.crc32
        pack = REC_TAIL.pack
        u32 = _U32.pack
        pop = q.popleft
        append = parts.append
        # one wall clock reading per batch: each record's wall time is its monotonic time
        # moved by the clocks' offset now
        offset = time.time_ns() - time.monotonic_ns()
        last = self._last_mono
        nbytes = 0
        for _ in range(n):
            stream, mono, data, dcrc = pop()
            if mono < last:
                mono = last
            else:
                last = mono
            tail = pack(crc32(data, salt) if dcrc is None else dcrc, len(data), stream, mono,
                        mono + offset)
            append(SYNC + u32(crc32(tail, salt)) + tail)
            append(data)
            if stream != EVENT:
                nbytes += len(data)
        self._last_mono = last
        return nbytes

    def _drain(self) -> None:
        if not self._q and not self._unwritten and not self._debt:
            return
        salt = self.salt
        parts: list = []  # zeros owed to a cut record, markers of earlier write losses, records
        zeros = 0
        if self._debt:
            parts.append(bytes(self._debt))
            zeros = 1
        markers: list[int] = []  # the stream each gap marker in front is for
        # markers for losses that happened before: stamped with the last time written
        mono = self._last_mono or time.monotonic_ns()
        wall = mono + time.time_ns() - time.monotonic_ns()
        for stream, counts in sorted(self._unwritten.items()):
            markers.append(stream)
            gap = _gap_bytes(stream, counts, f"spool write failed: {self.write_error}")
            parts += (pack_record(salt, EVENT, mono, wall, gap), gap)
        nbytes = self._records(parts)
        try:
            writev_all(self.fd, parts)
            self._debt = 0
            self._unwritten.clear()
        except PartialWrite as e:
            self._after_partial(e, parts, zeros, markers)
        self._out += nbytes
        if self.no_loss:
            with self._space:
                self._space.notify_all()

    def _after_partial(self, e: PartialWrite, parts: list, zeros: int,
                       markers: list[int]) -> None:
        """Account for what a failed write left out: records past the cut are lost (counted, and
        marked in the spool once a write succeeds), a record cut after its header is completed
        with zeros by the next write so the reader can step over it. `parts`: `zeros` buffer of
        zeros owed (0 or 1), then header and data of each record, the gap markers of `markers`
        first."""
        if self.write_error is None:
            say(PROXY, f"cannot write the recording ({e.strerror}); relaying continues, "
                       "lost frames are counted")
        self.write_error = e.strerror or str(e)
        done = e.done
        debt = 0
        pos = 0
        if zeros:
            pos = len(parts[0])
            if pos > done:  # the zeros still owed: all that did not reach the file
                debt = pos - done
        lost = self._write_lost
        for i in range(zeros, len(parts), 2):
            head, data = parts[i], parts[i + 1]
            start = pos
            pos = end = start + len(head) + len(data)
            if end <= done:
                k = (i - zeros) // 2
                if k < len(markers):
                    # this stream's earlier loss is marked in the file now
                    self._unwritten.pop(markers[k], None)
                continue
            if start < done:  # cut inside this record
                debt = end - done if done - start >= REC_HSIZE else 0
            stream = REC_TAIL.unpack_from(head, 8)[2]
            if stream != EVENT:
                slot = C2A if stream == C2A_LATE else stream
                u = self._unwritten.setdefault(slot, [0, 0, 0])
                lines = newlines(data)  # only on this rare path
                u[0] += 1
                u[1] += len(data)
                u[2] += lines
                lost[0] += 1
                lost[1] += len(data)
                lost[2] += lines
        self._debt = debt

    def _run(self) -> None:
        in_ = self._in
        since = time.monotonic()  # the start of the current measure of the relay's rate
        moved = 0  # bytes queued by then
        active = since - QUIET_S  # the last time the relay was busy
        while not self._closed:
            if in_[0] + in_[1] + in_[2] - self._out <= self.wake_bytes:
                self._wake.wait(self.flush_interval)
            self._wake.clear()
            self._woken = False
            self._drain()
            hook = self.on_busy
            if hook is not None:
                now = time.monotonic()
                if now - since >= self.flush_interval:
                    total = in_[0] + in_[1] + in_[2]
                    if total - moved >= BUSY_BYTES_S * (now - since):
                        active = now
                    moved, since = total, now
                    # said every time (the hook acts on changes): a loader not started yet
                    # when the relay got busy is lowered once it is
                    hook(now - active < QUIET_S)
        self._drain()

    def close(self, **end_data) -> None:
        """Flush everything, write the end marker and close. Safe to call once."""
        self._closed = True  # from here on, what the relay puts is counted as lost
        for slot in DATA_STREAMS:
            self._mark_dropped(slot)
        for (slot, reason), counts in list(self._discarded.items()):
            self._q.append((EVENT, time.monotonic_ns(), _gap_bytes(slot, counts, reason), None))
        self._discarded.clear()
        if self.no_loss:
            with self._space:
                self._space.notify_all()
        self._wake.set()
        self._thread.join()
        end = _event_bytes("end", lost_chunks=self.lost_chunks, lost_bytes=self.lost_bytes,
                           lost_frames=self.lost_frames, **end_data)
        self._q.append((EVENT, time.monotonic_ns(), end, None))
        self._drain()
        if self._map is not None:
            self._flags |= CLOSED
            _Q.pack_into(self._map, COUNTERS_OFFSET + 48, self._flags)
            # a relay thread still putting (a grandchild of the agent) counts into a list now
            self._cv = list(self._cv)
            try:
                self._map.close()
            except (BufferError, ValueError):
                pass
            self._map = None
        os.close(self.fd)


class SpoolRecord:
    __slots__ = ("stream", "mono_ns", "wall_ns", "data")

    def __init__(self, stream: int, mono_ns: int, wall_ns: int, data: bytes):
        self.stream = stream
        self.mono_ns = mono_ns
        self.wall_ns = wall_ns
        self.data = data


# A shared lock on a spool says "a live process owns it": the proxy writing it, then the loader
# storing it (the proxy hands its lock over: recorder/handoff.py). Recovery and readers only
# probe it.

def lock_shared(path: str) -> int | None:
    """A descriptor holding a shared lock on the spool (the caller closes it to let go), or None
    when the spool cannot be opened or locked."""
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY)
    except (ImportError, OSError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        os.close(fd)
        return None
    return fd


def lock_held(path: str) -> bool | None:
    """Whether a live process holds the spool's lock; None when it cannot be opened (gone), False
    where there are no file locks."""
    try:
        import fcntl
    except ImportError:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)  # (closing lets go of a lock taken above)


def writer_closed(path: str) -> bool:
    """Whether the proxy closed this version-2 spool (even if its end marker never made it)."""
    try:
        with open(path, "rb") as f:
            head = f.read(COUNTERS_OFFSET + COUNTERS.size)
    except OSError:
        return False
    return head.startswith(MAGIC) and len(head) == COUNTERS_OFFSET + COUNTERS.size and bool(
        _Q.unpack_from(head, COUNTERS_OFFSET + 48)[0] & CLOSED)


def read_counters(path: str) -> tuple[list[int], int | None] | None:
    """The relay's counters of a version-2 spool: ([bytes c2a, a2c, stderr, newlines c2a, a2c,
    stderr], exit status or None); None for a version-1 spool."""
    try:
        with open(path, "rb") as f:
            head = f.read(COUNTERS_OFFSET + COUNTERS.size)
    except OSError:
        return None
    if not head.startswith(MAGIC) or len(head) < COUNTERS_OFFSET + COUNTERS.size:
        return None
    values = list(COUNTERS.unpack_from(head, COUNTERS_OFFSET))
    return values[:6], (values[7] if values[6] & EXIT_KNOWN else None)


class SpoolReader:
    """Reads records from a spool that may still be growing (tail) or was cut by a crash."""

    def __init__(self, path: str):
        self.path = path
        self.f = open(path, "rb")
        head = self.f.read(len(MAGIC))
        self.version = 2 if head == MAGIC else 1 if head == MAGIC_V1 else 0
        if not self.version:
            raise SpoolError(f"{path} is not a wire-recorder spool")
        if self.version == 1:
            line = self.f.readline()
            if not line.endswith(b"\n"):
                raise SpoolError(f"{path} has an incomplete header")
            self.meta = json.loads(line)
        else:
            rest = self.f.read(META_LEN_OFFSET + 4 - len(MAGIC))
            if len(rest) < META_LEN_OFFSET + 4 - len(MAGIC):
                raise SpoolError(f"{path} has an incomplete header")
            size = _U32.unpack_from(rest, 12 - len(MAGIC))[0]
            length = _U32.unpack_from(rest, META_LEN_OFFSET - len(MAGIC))[0]
            body = self.f.read(length)
            if len(body) < length or size < META_LEN_OFFSET + 4 + length:
                raise SpoolError(f"{path} has an incomplete header")
            self.meta = json.loads(body)
            self.f.seek(size)
        self.salt = int(self.meta.get("salt") or 0)
        self.offset = self.f.tell()
        self.behind = False
        self.skipped_bytes = 0  # bytes stepped over: cut records, damage
        self._buf = b""

    def read_available(self, max_bytes: int = 8 << 20, final: bool = False) -> list[SpoolRecord]:
        """Every complete record on disk now (up to about max_bytes); a torn tail waits, unless
        `final` (the writer is gone): then whatever cannot be a record is stepped over."""
        data = self.f.read(max_bytes)
        self.behind = len(data) >= max_bytes  # a full read: more is probably waiting
        if data:
            self._buf = self._buf + data if self._buf else data
        if self.version == 1:
            out, pos = self._parse_v1(self._buf)
        else:
            out, pos = self._parse(self._buf, final and not self.behind)
        self._buf = self._buf[pos:]
        self.offset += pos
        return out

    def _parse_v1(self, buf: bytes) -> tuple[list[SpoolRecord], int]:
        out = []
        pos = 0
        hsize = REC_V1.size
        n = len(buf)
        while n - pos >= hsize:
            stream, length, mono, wall = REC_V1.unpack_from(buf, pos)
            end = pos + hsize + length
            if end > n:
                break
            out.append(SpoolRecord(stream, mono, wall, buf[pos + hsize:end]))
            pos = end
        return out, pos

    def _parse(self, buf: bytes, final: bool) -> tuple[list[SpoolRecord], int]:
        out = []
        pos = 0
        n = len(buf)
        salt = self.salt
        crc32 = zlib.crc32
        unpack = REC_TAIL.unpack_from
        while n - pos >= REC_HSIZE:
            ok = buf.startswith(SYNC, pos) and \
                _U32.unpack_from(buf, pos + 4)[0] == crc32(buf[pos + 8:pos + REC_HSIZE], salt)
            if ok:
                dcrc, length, stream, mono, wall = unpack(buf, pos + 8)
                ok = length <= MAX_RECORD and stream in STREAM_NAMES
            if not ok:
                pos = self._resync(buf, pos)
                continue
            end = pos + REC_HSIZE + length
            if end > n:
                if not final:
                    break
                # The writer is gone and this record will never be whole (a kill mid-write):
                # the bytes that follow may still hold records.
                pos = self._resync(buf, pos)
                continue
            data = buf[pos + REC_HSIZE:end]
            if crc32(data, salt) != dcrc:
                # Its header checks, so its length can be trusted: step over it alone (a record
                # cut by a partial write and completed with zeros by the writer).
                self.skipped_bytes += end - pos
                pos = end
                continue
            out.append(SpoolRecord(stream, mono, wall, data))
            pos = end
        if final and pos < n:
            self.skipped_bytes += n - pos
            pos = n
        return out, pos

    def _resync(self, buf: bytes, pos: int) -> int:
        nxt = buf.find(SYNC, pos + 1)
        if nxt < 0:
            nxt = max(pos + 1, len(buf) - len(SYNC) + 1)
        self.skipped_bytes += nxt - pos
        return nxt

    @property
    def torn_bytes(self) -> int:
        return len(self._buf)

    def close(self) -> None:
        self.f.close()
