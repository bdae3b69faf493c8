"""The loader process: tails a spool, re-assembles frames, classifies them and appends them to
DuckDB in large batches. Also the engine of `wire-proxy recover`.

It runs apart from the relay so DuckDB never holds the relay's GIL (measured: in-process DuckDB
stalled the relay for milliseconds at p99.9).
"""

from __future__ import annotations

import datetime as _dt
import os
import signal
import threading
import time
from collections.abc import Callable

import duckdb
import orjson

from . import after_load, handoff
from .bulk import Bulk
from .classify import Classifier, Extracted
from .edge import PROXY, say
from .errors import UserError
from .model import frame_row, wall_ts
from .redact import Redactor
from .redact_stream import StreamJoin
from .spool import (
    A2C,
    C2A,
    C2A_LATE,
    DATA_STREAMS,
    EVENT,
    STDERR,
    STREAM_NAMES,
    SpoolReader,
    lock_held,
    lock_shared,
    read_counters,
    writer_closed,
)
from .store import (
    BLOCK_SIZE,
    GROW_ROWS,
    INLINE_MAX,
    DBLocked,
    DiskFull,
    Store,
    grow_blocks,
    is_disk_full,
    open_store,
    remove_dead_copies,
)
from .workdir import Taking

BATCH_ROWS = 10_000
# large frames: a batch of 10k x 2 MB would need 20 GB (8 MiB: the loader's peak with 2 MiB frames
# 130 -> 121 MB, no slower than 16 at 2 KiB or 2 MiB)
BATCH_BYTES = 8 << 20
BATCH_SECONDS = 0.2  # how stale the DB may be behind the spool while a session runs
POLL_S = 0.02
# DuckDB lets one process write a file and nobody else read it meanwhile. The loader lets go of
# the file whenever the session is quiet for this long, so `wire-query` and `wire-show --follow`
# can read a live recording; the spool keeps everything while a reader holds the file.
IDLE_RELEASE_S = 0.3
# Past these, stop reading the spool until the DB is writable again (the spool keeps the rest).
MAX_BUFFERED_ROWS = 2 * BATCH_ROWS
MAX_BUFFERED_BYTES = 2 * BATCH_BYTES
# The loader's memory (issue 14; bench/bench_loader.py). The process itself (Python, DuckDB's
# library, one connection) takes ~85 MB before a row is read. DuckDB keeps what it appended in
# memory until a checkpoint, and keeps the blocks a checkpoint wrote cached (~7.6 MB per 100k
# small frames: a 10M-frame session would hold ~760 MB), so the loader's DuckDB gets
# MEMORY_LIMIT_MB (cached blocks are dropped, never re-read) and checkpoints every
# CHECKPOINT_ROWS rows. Not more often: a checkpoint within a row group (122,880 rows) leaves it
# partial, and checkpoints every 50k rows made 1M small frames 2-3x slower and their file 30%
# bigger; every 24 MB of 200 KB frames (their payloads are inline, only `raw` goes to the
# sidecar) took time and memory growing with the session. One thread: no slower, and each
# DuckDB thread holds buffers of its own. Measured (1M small frames, 2 cores): VmHWM 290 -> ~172
# MB at the same rows/s; a limit of 32 MB reached ~145 MB at half the speed (appended rows
# spill). Rows that exceed the limit anyway go in after a checkpoint under a raised one
# (`insert_frames`).
MEMORY_LIMIT_MB = 64
CHECKPOINT_ROWS = 100_000
# ...unless CHECKPOINT_ROWS rows of the session's average size do not fit in it: 2 KiB frames
# (100k rows ~450 MB in memory) then spilled to disk, 2.6-3.5x slower, and checkpoints every
# 32 MB instead were 5x slower. The limit follows their size (in powers of two), still dropping
# the blocks each checkpoint wrote. IN_MEMORY_FACTOR: DuckDB's bytes a row per byte of its
# values (measured ~475 / 300 for 200 B frames).
IN_MEMORY_FACTOR = 1.6
# Sessions with values over 16 KiB (BLOCK_SIZE; tool results, file contents) checkpoint
# every LARGE_CHECKPOINT_BYTES of values too, under a limit of LARGE_CHECKPOINT_LIMIT_MB. Without
# a limit such checkpoints grew with the session (1 GiB of 64 KiB frames: 5.2-5.9 GB VmHWM, 4.6
# GB checkpointing every 32 MB); under 256 MB, 617 MB. But DuckDB fails some of them as FATAL
# (600 KB values under 128 and 256 MB), which invalidates the database: the store is then opened
# again (its WAL brings back every committed row) and the session's checkpoints run without a
# limit, by rows only, as before. So do those of sessions with a value over
# LIMITED_VALUE_MAX, where limited checkpoints failed or cost more (200 KB frames: 1.2 GB and 11 s
# for 256 MiB each way as before, 1.6 GB and 32 s through the FATAL; 20 KB frames 1.1 GB -> 0.44).
LARGE_CHECKPOINT_BYTES = 32 << 20
LARGE_CHECKPOINT_LIMIT_MB = 256
LIMITED_VALUE_MAX = 96 << 10
# Spool bytes read at once: ~10k small frames, or one record of the largest size.
READ_BYTES = 2 << 20
# A reader's brief lock is waited out; a writer's means a sibling file. (Within the second an
# ending proxy waits for its loader at most.)
LOCKED_AT_START_S = 0.9
# Loaders of sessions recorded into one file at the same time take turns (`DB.shared`): each
# lets go of the file after every batch while another session of the file is live, and takes
# it again no sooner than TURN_S later, so a waiting loader gets its turn. SHARED_CHECK_S: how
# often a loader looks for such sessions (a listing of the folder).
TURN_S = 0.1
SHARED_CHECK_S = 0.5
FINISH_WAIT_S = 120.0
EOF_EVENTS = {"client_eof": C2A, "agent_stdout_eof": A2C, "agent_stderr_eof": STDERR}
# the model leg's bodies (recorder/llm_leg.py) stay in the event's raw row only (the blob
# sidecar when large), not again in its payload
RAW_ONLY = frozenset({"request_body", "request_body_b64", "response_body", "response_body_b64"})
AFTER_EXIT = "sent after the agent exited (never delivered)"


def _say(msg: str) -> None:
    say(PROXY, msg)


class _Word:
    """The loader's word to its proxy on stdout (a pipe the proxy reads): `held` while the DB
    is in use by another process, `free` once it is not. The proxy stops waiting for a held DB
    after a second, so another session's loader never holds an ending proxy up."""

    enabled = False
    held = False
    quiet = False  # while choosing the file: a sibling comes within LOCKED_AT_START_S

    @classmethod
    def say(cls, held: bool, even_quiet: bool = False) -> None:
        if cls.enabled and held != cls.held and (even_quiet or not cls.quiet):
            cls.held = held
            try:
                os.write(1, b"held\n" if held else b"free\n")
            except OSError:
                pass

    @classmethod
    def chosen(cls) -> None:
        """The file is chosen (a sibling said so before): a proxy ending meanwhile waits for
        this when the DB is held by another process, so that note reaches its stderr."""
        if cls.enabled:
            try:
                os.write(1, b"chosen\n")
            except OSError:
                pass

    @classmethod
    def stored(cls) -> None:
        """The session is complete in the DB and the DB let go of: the proxy may exit now,
        before the loader looks for older spools and winds down."""
        if cls.enabled:
            try:
                os.write(1, b"stored\n")
            except OSError:
                pass


class DB:
    """A store opened on demand and let go of when idle, so readers get their turn."""

    def __init__(self, path: str, store: Store | None = None, own_spool: str | None = None):
        self.path = path
        self.store = store
        self.own_spool = own_spool  # this loader's session (others of the file: `shared`)
        self._shared = (False, -SHARED_CHECK_S)  # (the answer, when it was found)
        self.not_before = 0.0  # after letting go for another loader: its turn until then
        self.pinned = store is not None  # a store handed in by the caller stays open
        self.full_said = False
        self.no_room = False  # the last open failed for want of room on the disk
        # checkpoints of large values go without a limit (one under it failed, or values over
        # LIMITED_VALUE_MAX; a caller's store, which cannot be opened again after a FATAL)
        self.unlimited = self.pinned
        self.created = False  # this loader created the file
        self.grown = False  # ...and has had it copied into larger blocks (grow)
        self._behind: threading.Thread | None = None  # a write running in the background
        self._behind_ok = True
        self._behind_error: BaseException | None = None

    def get(self) -> Store | None:
        self.settle()
        return self._get()

    def _get(self) -> Store | None:
        if self.store is None:
            if time.monotonic() < self.not_before:
                return None
            try:
                # (it waits for other loaders itself, before it starts: _open_for)
                self.store = open_store(self.path, wait_for_loader=False)
            except DBLocked:
                _Word.say(True)
                return None
            except DiskFull as e:
                # no room to create (or migrate) the file: as for a write that meets a full
                # disk, the session waits in its spool (never a sibling: same disk)
                self.no_room = True
                self._full(e)
                return None
            self.no_room = False
            self.created |= self.store.created
            # The loader checkpoints itself (CHECKPOINT_ROWS): automatic checkpoints at the
            # default threshold made bulk loads 3.5x slower.
            self.store.con.execute("SET checkpoint_threshold = '1GB'")
            self.store.con.execute("SET threads = 1")
            set_memory_limit(self.store, MEMORY_LIMIT_MB)
        return self.store

    def wait(self, timeout: float) -> Store | None:
        deadline = time.monotonic() + timeout
        while True:
            store = self.get()
            if store is not None or time.monotonic() >= deadline:
                return store
            time.sleep(0.05)

    def release(self) -> None:
        self.settle()
        if self.store is not None and not self.pinned:
            self.checkpoint(self.store, close=True)  # the file is whole without its .wal
            self.store = None

    def shared(self) -> bool:
        """Whether another session is being recorded into this file now (checked at most every
        SHARED_CHECK_S)."""
        if self.pinned:
            return False
        now = time.monotonic()
        answer, when = self._shared
        if now - when >= SHARED_CHECK_S:
            answer = handoff.others_recording(self.path, self.own_spool)
            self._shared = (answer, now)
        return answer

    def take_turns(self) -> None:
        """After a batch: let go of the file when another session's loader may be waiting for
        it, and leave it to that one for TURN_S."""
        if self.store is not None and self.shared():
            self.release()
            self.not_before = time.monotonic() + TURN_S

    @property
    def may_grow(self) -> bool:
        return self.created and not self.grown and not self.pinned

    def grow(self) -> bool:
        """The file this loader created goes on in larger blocks (store.LOADING_BLOCK_SIZE):
        checkpointed, copied, and opened again on its next use. False when the disk was full
        (not tried again: it only costs speed)."""
        self.grown = True

        def run(store: Store) -> None:
            self.checkpoint(store)
            store = self.store if self.store is not None else store  # (reopened after a FATAL)
            if grow_blocks(store):
                store.close()
                self.store = None
        return self.write(run)

    def without_limit(self) -> None:
        """Checkpoints of large values run without a memory limit from now on."""
        self.unlimited = True

    def checkpoint(self, store: Store, close: bool = False) -> None:
        """`checkpoint` of the store; one DuckDB fails as FATAL (the database invalidated) is
        done again after the file is opened anew, which replays its WAL (every committed row),
        without a memory limit, as are the later ones."""
        try:
            checkpoint(store, close=close, unlimited=self.unlimited)
        except duckdb.FatalException:
            if self.pinned:
                raise
            self._checkpoint_again(close)

    def _checkpoint_again(self, close: bool) -> None:
        self.without_limit()
        old, self.store = self.store, None
        if old is not None:
            try:
                old.close()
            except Exception:  # noqa: BLE001 - an invalidated database refuses even that
                old.con = None  # type: ignore[assignment]
        store = self._get()
        if store is None:
            raise DBLocked(f"{self.path} was taken by another process while it was reopened")
        store.large_values = True
        checkpoint(store, close=close, unlimited=True)
        if close:
            self.store = None

    def write(self, fn) -> bool:
        """Run a write on the store; False (and the store let go of) when the disk is full,
        so the caller keeps its rows and tries again later."""
        self.settle()
        return self._write(fn)

    def in_background(self, fn) -> None:
        """Start `write(fn)` in a thread of its own; the next use of the store waits for it
        (`settle`). For checkpoints: DuckDB lets go of the GIL while it compresses and writes
        the rows, so the next rows are redacted and classified meanwhile (1M small frames:
        checkpoints every 100k rows, run in turn with the rest, took ~15% of the loader's
        time)."""
        self.settle()

        def run() -> None:
            try:
                self._behind_ok = self._write(fn)
            except BaseException as e:  # raised where the store is used next
                self._behind_error = e
        self._behind = threading.Thread(target=run, name="loader-checkpoint", daemon=True)
        self._behind.start()

    @property
    def busy(self) -> bool:
        return self._behind is not None and self._behind.is_alive()

    def settle(self) -> bool:
        """Wait for the write running in the background, if any: whether the last one went in
        (False: the disk was full); what it raised is raised here."""
        if self._behind is not None:
            self._behind.join()
            self._behind = None
            error, self._behind_error = self._behind_error, None
            if error is not None:
                raise error
        ok, self._behind_ok = self._behind_ok, True
        return ok

    def _write(self, fn) -> bool:
        store = self._get()
        if store is None:
            return False
        try:
            fn(store)
        except (duckdb.Error, OSError) as e:
            if not _disk_full(e):
                raise
            self._full(e)
            if not self.pinned:
                try:
                    checkpoint(store, close=True, unlimited=self.unlimited)
                except (duckdb.Error, OSError):
                    pass
                self.store = None
            return False
        _Word.say(False)
        return True

    def _full(self, e: BaseException) -> None:
        if not self.full_said:  # (before `held`: a proxy that stops waiting has read it)
            _say(f"cannot write {self.path} ({e}); the session waits in its spool and is "
                 "stored once there is room")
            self.full_said = True
        _Word.say(True, even_quiet=True)  # as good as held: the proxy need not wait for it


def _out_of_memory(e: BaseException) -> bool:
    return isinstance(e, duckdb.OutOfMemoryException) or "failed to pin block" in str(e)


def set_memory_limit(store: Store, mb: int | None) -> None:
    """Keep the store's DuckDB under `mb` MB (None: DuckDB's default, most of the machine's
    memory); `checkpoint` sets it again after lifting it."""
    store.memory_limit_mb = mb
    store.con.execute("RESET memory_limit" if mb is None else f"SET memory_limit = '{mb}MB'")


def insert_frames(store: Store, rows: list[tuple], large: bool, unlimited: bool = False) -> None:
    """store.insert_frames under its memory limit: rows that do not fit beside what is appended
    since the last checkpoint (their commit fails whole) go in after a checkpoint, under a limit
    raised for the rest of the connection (large frames come in runs), rather than the session
    staying in its spool. large: a value among them is larger than a block; unlimited: as for
    `checkpoint`."""
    store.large_values |= large
    for _ in range(4):
        try:
            store.insert_frames(rows)
            return
        except duckdb.Error as e:
            if store.memory_limit_mb is None or not _out_of_memory(e):
                raise
        set_memory_limit(store, store.memory_limit_mb * 4)
        checkpoint(store, unlimited=unlimited)
    set_memory_limit(store, None)
    store.insert_frames(rows)


def checkpoint(store: Store, close: bool = False, unlimited: bool = False) -> None:
    """A checkpoint (or the one closing makes). Under LARGE_CHECKPOINT_LIMIT_MB at least when
    values larger than a block were written since the last one (under the loader's 64 MB such a
    checkpoint failed as FATAL: 600 KB frames), without any limit when `unlimited` (after such a
    FATAL, or for values over LIMITED_VALUE_MAX: `DB.unlimited`). The store's limit is set again
    after it, which drops the blocks it wrote from memory."""
    lift = store.large_values and store.memory_limit_mb is not None
    raised = ("RESET memory_limit" if unlimited else
              f"SET memory_limit = '{max(store.memory_limit_mb or 0, LARGE_CHECKPOINT_LIMIT_MB)}MB'")
    if close:
        try:
            if lift:
                store.con.execute(raised)
        finally:
            store.close()
        return
    if lift:
        store.con.execute(raised)
    store.con.execute("CHECKPOINT")
    store.large_values = False
    if not lift or store.memory_limit_mb is None:
        return
    try:
        store.con.execute(f"SET memory_limit = '{store.memory_limit_mb}MB'")
    except duckdb.Error:  # what is pinned now cannot go: the next checkpoint sets it again
        pass


_disk_full = is_disk_full


class Ingest:
    """Turns spool records into frame rows for one session."""

    def __init__(self, store, meta: dict, resume_after: int = 0):
        self.store = store  # a DB (or None in tests that only look at the rows)
        self.meta = meta
        self.sid = meta["session_id"]
        self.seq = 0
        self.skip_until = resume_after  # rows already in the DB from an earlier, cut-off load
        self.partial: dict[int, list[bytes]] = {C2A: [], A2C: [], STDERR: []}
        self.after_gap: set[int] = set()
        self.before_gap: set[int] = set()
        self.mid_gap: set[int] = set()  # a gap inside the frame being put together
        # what the spool held and what its gap markers said was lost, per data stream:
        # [bytes, newlines] each, to set against the relay's own counters at the end
        self.spooled = {s: [0, 0] for s in DATA_STREAMS}
        self.marked = {s: [0, 0] for s in DATA_STREAMS}
        self.late = False  # the chunk being split was read after the agent exited
        self.last_mono_ns = meta.get("mono_start_ns") or 0
        self.rows: list[tuple] = []
        self.since_checkpoint = 0  # rows inserted since the last checkpoint
        self.since_checkpoint_bytes = 0  # ...and the bytes of their values
        self.large_session = False  # a value larger than a block was stored
        self.largest = 0  # the largest value (raw inline, or payload) buffered or stored
        # whether the proxy has stopped relaying (checkpoints may then take a core of their own)
        self.relay_over: Callable[[], bool] = lambda: True
        self.row_bytes = 0
        self.stored_rows = self.stored_bytes = 0  # this load's, for the memory limit
        self.large = False  # a buffered row holds a value larger than a DuckDB block
        self._ts_wall: int | None = None
        self._ts: _dt.datetime | None = None
        self.last_flush = time.monotonic()
        self.classifier = Classifier(meta.get("protocol"))
        self.frame_count = 0
        self.anomalies = 0
        self.invalid = 0
        self.lost_frames = 0
        self.lost_bytes = 0
        self.exit: dict | None = None
        self.agent_pid = None
        self.ended = False
        self.last_wall_ns = meta.get("started_wall_ns")
        # Secrets are replaced in what is stored, before classification, so raw, payload, the
        # sidecar and the session's own values all hold the same placeholders.
        self.redactor = Redactor.from_config(meta.get("cwd"), enabled=meta.get("redact", True))
        self.redact = self.redactor.redact_bytes if self.redactor.enabled else None
        # a secret streamed across pieces of one message: the rows of the open message wait
        self.joiner = StreamJoin(self.redactor, lambda: self.rows,
                                 lambda: self.classifier.protocol) if self.redact else None
        self.bulk = Bulk(self)
        # records the bulk path left for the next read (the end of a message still streaming)
        self.held: list = []

    # -- rows ---------------------------------------------------------------------------------
    def _row(self, mono: int, wall: int, direction: str, raw: bytes, newline: bool,
             ex: Extracted) -> None:
        self.seq += 1
        if self.seq <= self.skip_until:
            return
        if wall != self._ts_wall:
            # One spool chunk (up to 64 KiB, hundreds of small frames) has one wall time: build
            # its datetime once, not per frame (1.5-2 us a row, a fifth of the loader's time).
            self._ts_wall = wall
            self._ts = wall_ts(wall)
        self.rows.append(frame_row(self.sid, self.seq, self._ts, mono, direction, raw, newline,
                                   ex))
        payload = len(ex.payload) if ex.payload else 0
        self.row_bytes += len(raw) + payload
        # (in the loader's 256 KiB blocks too: 256 MiB of 20 KB frames peaked at 1.1 GB without
        # the large-value checkpoints, 0.44 GB with them, as in 16 KiB blocks)
        if len(raw) > BLOCK_SIZE or payload > BLOCK_SIZE:
            self.large = True
            value = max(len(raw) if len(raw) <= INLINE_MAX else 0, payload)
            if value > self.largest:
                self.largest = value

    def _frame(self, stream: int, raw: bytes, newline: bool, mono: int, wall: int) -> None:
        seq, rows, frames = self.seq, len(self.rows), self.frame_count
        try:
            self._frame_unguarded(stream, raw, newline, mono, wall)
        except Exception as e:
            # One frame must never cost the session: whatever went wrong with it (a bug, a
            # payload nothing can handle), it is stored raw with the error and loading goes on.
            if len(self.rows) > rows:  # its row is buffered already
                return
            self.seq = seq
            error = f"not classified ({type(e).__name__}: {e}); raw bytes kept"
            if self.redact is not None:
                try:
                    raw = self.redact(raw)
                except Exception:  # never store what redaction could not look at
                    error = (f"not redacted ({type(e).__name__}: {e}); its {len(raw)} bytes "
                             f"are withheld")
                    raw = b""
            if stream != STDERR:
                self.frame_count = frames + 1
                self.invalid += 1
            self._row(mono, wall, STREAM_NAMES[stream], raw, newline,
                      Extracted("stderr" if stream == STDERR else "invalid", known=False,
                                parse_error=error))

    def _frame_unguarded(self, stream: int, raw: bytes, newline: bool, mono: int,
                         wall: int) -> None:
        direction = STREAM_NAMES[stream]
        original, rows = raw, len(self.rows)
        if self.redact is not None:
            raw = self.redact(raw)
        if stream == STDERR:
            ex = Extracted("stderr")
        else:
            ex = self.classifier(raw, direction)
            self.frame_count += 1
            if ex.anomaly:
                self.anomalies += 1
            elif ex.kind == "invalid":
                self.invalid += 1
        if stream in self.after_gap:
            self.after_gap.discard(stream)
            ex.kind = "invalid"
            ex.parse_error = "recording gap: the start of this frame was not recorded"
        if stream in self.mid_gap:
            self.mid_gap.discard(stream)
            ex.kind = "invalid"
            ex.parse_error = "recording gap: part of the middle of this frame was not recorded"
        if stream in self.before_gap:
            self.before_gap.discard(stream)
            ex.kind = "invalid"
            ex.parse_error = "recording gap: the rest of this frame was not recorded"
        if stream == C2A and self.late and not ex.anomaly:
            ex.anomaly = AFTER_EXIT
        self._row(mono, wall, direction, raw, newline, ex)
        if self.joiner is not None and stream == A2C:
            self.joiner.saw(original, rows if len(self.rows) > rows else None)

    def _flush_partial(self, stream: int, mono: int, wall: int) -> None:
        parts = self.partial[stream]
        if parts:
            self.partial[stream] = []
            self._frame(stream, b"".join(parts), False, mono, wall)

    def data(self, stream: int, data: bytes, mono: int, wall: int) -> None:
        parts = self.partial[stream]
        start = 0
        find = data.find
        spooled = self.spooled[stream]
        spooled[0] += len(data)
        while True:
            nl = find(b"\n", start)
            if nl < 0:
                break
            spooled[1] += 1
            if parts:
                # Partial frames are kept as a list of chunks: joining per read is O(n^2).
                parts.append(data[start:nl])
                raw = b"".join(parts)
                parts.clear()
            else:
                raw = data[start:nl]
            self._frame(stream, raw, True, mono, wall)
            start = nl + 1
        if start < len(data):
            parts.append(data[start:])

    def event(self, payload: bytes, mono: int, wall: int) -> None:
        if self.redact is not None:
            payload = self.redact(payload)  # `spawn` holds the agent's argv and cwd
        try:
            ev = orjson.loads(payload)
        except orjson.JSONDecodeError:
            ev = {"event": "proxy_error", "error": "unreadable spool event"}
        if not isinstance(ev, dict):
            ev = {"event": "proxy_error", "error": "unreadable spool event"}
        name = ev.get("event", "unknown")
        if name in EOF_EVENTS:
            self._flush_partial(EOF_EVENTS[name], mono, wall)
        elif name == "recording_gap":
            streams = [s for s in (C2A, A2C, STDERR, EVENT)
                       if STREAM_NAMES[s] == ev.get("stream")] or [C2A, A2C, STDERR]
            frames, nbytes = int(ev.get("frames") or 0), int(ev.get("bytes") or 0)
            if len(streams) == 1 and streams[0] in self.marked:
                s = streams[0]
                # (set against the relay's newline counters: what the spool said was lost)
                self.marked[s][0] += nbytes
                self.marked[s][1] += frames
                if self.partial[s] and frames == 0:
                    # bytes from the middle of one frame: its start and its end make one row
                    self.mid_gap.add(s)
                    streams = []
                elif self.partial[s]:
                    # The frame being put together ends inside the gap: its start is stored as
                    # a row of its own, so it is counted there, not again among the gap's
                    # frames (issue 28: a frame cut by a full disk was counted twice).
                    frames -= 1
                    ev["frames"] = frames
                    ev["cut_frame_stored"] = True
                    payload = orjson.dumps(ev)
            for s in streams:
                if s != EVENT:
                    if self.partial.get(s):
                        # the start of a frame whose rest is missing: kept, and said so
                        self.before_gap.add(s)
                        self._flush_partial(s, mono, wall)
                    self.after_gap.add(s)
            self.lost_frames += frames
            self.lost_bytes += nbytes
        elif name == "spawn":
            self.agent_pid = ev.get("pid")
        elif name == "exit":
            self.exit = ev
        if name == "end":
            for s in (C2A, A2C, STDERR):
                self._flush_partial(s, mono, wall)
            self.ended = True
            return
        data = {k: v for k, v in ev.items() if k != "event" and k not in RAW_ONLY}
        self._row(mono, wall, "proxy", payload, True,
                  Extracted("lifecycle", method=name, payload=orjson.dumps(data).decode()))

    @property
    def full(self) -> bool:
        return len(self.rows) >= MAX_BUFFERED_ROWS or self.row_bytes >= MAX_BUFFERED_BYTES

    def feed_read(self, records, more: bool = False) -> None:
        """One read of the spool: in bulk when it can be (recorder/bulk.py), else frame by frame.
        While the protocol's version is still looked for (the session's first frames), records
        go frame by frame one at a time, and the rest of the read in bulk (a read is up to
        ~10k small frames; each frame by frame costs ~20 in bulk). more: the next read follows
        at once (the spool holds more), so the bulk path may hold the end of a message still
        streaming over to it (`held`) instead of storing it frame by frame."""
        i = 0
        while i < len(records) - 1 and self.bulk.detecting():
            self.feed(records[i:i + 1])
            i += 1
        rest = records[i:] if i else records
        self.bulk.may_hold = more
        if not self.bulk.feed(rest):
            self.feed(rest)

    def feed(self, records) -> None:
        for r in records:
            self.last_wall_ns = r.wall_ns
            self.last_mono_ns = r.mono_ns
            if r.stream == EVENT:
                self.event(r.data, r.mono_ns, r.wall_ns)
            elif r.stream == C2A_LATE:
                self.late = True
                self.data(C2A, r.data, r.mono_ns, r.wall_ns)
                self.late = False
            else:
                self.data(r.stream, r.data, r.mono_ns, r.wall_ns)

    @property
    def by_bytes(self) -> bool:
        """The session checkpoints every LARGE_CHECKPOINT_BYTES of values too, not only every
        CHECKPOINT_ROWS rows (it holds values larger than a block, checkpointed under a limit)."""
        return self.large_session and not self.store.unlimited

    def _fit_limit(self, store: Store) -> None:
        """Raise the store's memory limit to what CHECKPOINT_ROWS rows of this session's
        average size need (MEMORY_LIMIT_MB at least)."""
        if store.memory_limit_mb is None or not self.stored_rows:
            return
        between = CHECKPOINT_ROWS * self.stored_bytes / self.stored_rows
        if self.by_bytes:
            between = min(between, LARGE_CHECKPOINT_BYTES)
        need = IN_MEMORY_FACTOR * between
        mb = MEMORY_LIMIT_MB
        while mb << 20 < need * 1.25:
            mb *= 2
        if mb > store.memory_limit_mb:
            set_memory_limit(store, mb)

    def flush(self, force: bool = False, behind: bool = False) -> bool:
        """Write buffered rows when due. False when the DB is busy (rows stay buffered).
        behind: more is waiting in the spool, so only a full batch is due (the staleness bound
        would cut a backlog into small batches, and small appends cost more per row)."""
        now = time.monotonic()
        if self.joiner is not None and self.joiner.open:
            if not force and not self.full:
                return True  # a message is streaming: its rows wait for its end (bounded)
            self.joiner.settle()
        if self.store is not None and self.store.busy and not force and not self.full:
            return True  # a checkpoint runs: classify on, up to the bound, meanwhile
        if self.rows and (force or len(self.rows) >= BATCH_ROWS or self.row_bytes >= BATCH_BYTES
                          or (not behind and now - self.last_flush >= BATCH_SECONDS)):
            rows, large = self.rows, self.large

            def insert(store: Store) -> None:
                insert_frames(store, rows, large, self.store.unlimited)
                self._fit_limit(store)
            if not self.store.settle():  # the last checkpoint met a full disk: again after this
                self.since_checkpoint = max(self.since_checkpoint, CHECKPOINT_ROWS)
            self.large_session |= large
            if self.largest > LIMITED_VALUE_MAX and not self.store.unlimited:
                self.store.without_limit()
            if not self.store.write(insert):
                return False
            nbytes = self.row_bytes
            self.rows = []
            self.row_bytes = 0
            self.large = False
            self.last_flush = now
            self.stored_in_bulk(len(rows), nbytes)
        elif not self.rows:
            self.last_flush = now
        return True

    def before_rows(self) -> None:
        """Before buffered rows are written: a value too large for the memory limit lifts it."""
        if self.largest > LIMITED_VALUE_MAX and not self.store.unlimited:
            self.store.without_limit()

    def insert_rows(self, store: Store, rows: list[tuple], large: bool) -> None:
        """Buffered rows written inside a write (the bulk path's, before its own rows)."""
        insert_frames(store, rows, large, self.store.unlimited)

    def stored_in_bulk(self, nrows: int, nbytes: int) -> None:
        """After rows went in (a batch of buffered rows, or a read stored by recorder/bulk.py):
        take turns, grow the file or checkpoint when due."""
        self.since_checkpoint += nrows
        self.since_checkpoint_bytes += nbytes
        self.stored_rows += nrows
        self.stored_bytes += nbytes
        if self.store.shared():
            # Another session records into this file: it gets the file after this batch
            # (checkpointed on the way: the rows are in the file, not only in our WAL).
            self.store.take_turns()
            self.since_checkpoint = self.since_checkpoint_bytes = 0
        elif self.stored_rows >= GROW_ROWS and self.store.may_grow:
            # a long session: it goes on in a copy of its file in larger blocks (store.py
            # LOADING_BLOCK_SIZE), checkpointed on the way
            if self.store.grow():
                self.since_checkpoint = self.since_checkpoint_bytes = 0
        elif self.since_checkpoint >= CHECKPOINT_ROWS or (
                self.by_bytes and self.since_checkpoint_bytes >= LARGE_CHECKPOINT_BYTES):
            # In a thread only once the relay is over: one beside it took the loader to two
            # cores and starved the proxy's spool writer on a 2-core machine (10M small
            # frames dropped 5-8% where in-line checkpoints dropped none).
            if self.relay_over():
                self.store.in_background(self.store.checkpoint)
                self.since_checkpoint = self.since_checkpoint_bytes = 0
            # (one that fails on a full disk is tried again after the next batch)
            elif self.store.write(self.store.checkpoint):
                self.since_checkpoint = self.since_checkpoint_bytes = 0

    # -- session row ----------------------------------------------------------------------------
    def session_values(self, end_reason: str | None) -> dict:
        m = self.meta
        r = self.redactor
        values = {
            "session_id": self.sid,
            "name": r.redact_text(m["name"]) if m.get("name") else m.get("name"),
            "started_at": wall_ts(m["started_wall_ns"]),
            "command": orjson.dumps([r.redact_text(str(a)) for a in m.get("command") or []])
            .decode(),
            "cwd": r.redact_text(m["cwd"]) if m.get("cwd") else m.get("cwd"),
            "protocol": self.classifier.protocol or m.get("protocol"),
            "protocol_version": self.classifier.version,
            "proxy_version": m.get("proxy_version"),
            "tags": orjson.dumps(r.redact_json(m.get("tags") or {})).decode(),
            "source": "proxy",
            "host": m.get("host"),
            "proxy_pid": m.get("proxy_pid"),
            "mono_start_ns": m.get("mono_start_ns"),
            "agent_pid": self.agent_pid,
            "frame_count": self.frame_count,
            "lost_frames": self.lost_frames,
            "lost_bytes": self.lost_bytes,
            "redaction": r.describe(),
        }
        if m.get("db_note"):
            values["db_note"] = m["db_note"]
        if end_reason:
            values["end_reason"] = end_reason
            values["ended_at"] = wall_ts(self.last_wall_ns or m["started_wall_ns"])
            if self.exit:
                values["exit_code"] = self.exit.get("exit_status")
                values["exit_signal"] = self.exit.get("signal")
        return values

    def reconcile(self, counters: tuple[list[int], int | None] | None) -> None:
        """Set what the spool holds against what the relay counted (spool version 2): whatever
        was relayed but is neither in the spool nor under a gap marker (the proxy killed before
        its writer wrote it, a record cut by a failed write, a disk too full for the marker) gets
        its gap row now, so `lost_frames` is exact whatever happened."""
        if counters is None:
            return
        counted, exit_status = counters
        if self.exit is None and exit_status is not None:
            self.exit = {"exit_status": exit_status, "signal": None}
        why = ("relayed but not written to the spool (a failed write, or after it closed)"
               if self.ended else
               "relayed but not in the spool: the proxy ended before writing it (killed, or "
               "the disk was full)")
        for s in DATA_STREAMS:
            nbytes = counted[s] - self.spooled[s][0] - self.marked[s][0]
            frames = counted[s + 3] - self.spooled[s][1] - self.marked[s][1]
            if nbytes > 0 or frames > 0:
                self.event(orjson.dumps({"event": "recording_gap", "stream": STREAM_NAMES[s],
                                         "bytes": max(nbytes, 0), "frames": max(frames, 0),
                                         "reason": why}),
                           self.last_mono_ns, self.last_wall_ns or self.meta["started_wall_ns"])

    def finish(self, end_reason: str, counters: tuple[list[int], int | None] | None = None) -> bool:
        # A frame cut by the end keeps the time of the last record, not the time of recovery.
        mono, wall = self.last_mono_ns, self.last_wall_ns or self.meta["started_wall_ns"]
        self.reconcile(counters)
        for s in (C2A, A2C, STDERR):
            if self.partial[s]:
                self._flush_partial(s, mono, wall)
        if self.classifier.protocol is None and self.frame_count:
            self.classifier.protocol = "unknown"
        deadline = time.monotonic() + FINISH_WAIT_S
        values = self.session_values(end_reason)

        def last(store: Store) -> None:
            store.sync_blobs()
            store.upsert_session(values)
        while True:
            if self.store.wait(max(0.0, deadline - time.monotonic())) is None:
                return False
            if self.flush(force=True) and self.store.write(last):
                return True
            if time.monotonic() >= deadline:  # a full disk that stays full
                return False
            time.sleep(0.2)


def spool_is_orphan(path: str) -> bool:
    """A spool no live process holds (its proxy and loader are gone): recovery's to load."""
    return lock_held(path) is False


def _open_for(db: str, session_id: str, spool_path: str) -> tuple[DB, str, str]:
    """Open the chosen DB, or a sibling file when another writer keeps it locked or it is
    unusable (and say so)."""
    remove_dead_copies(db)
    handle = DB(db, own_spool=spool_path)
    _Word.quiet = True
    try:
        deadline = time.monotonic() + FINISH_WAIT_S
        while True:
            if handle.wait(LOCKED_AT_START_S) is not None:
                return handle, db, spool_path
            if handle.no_room:
                # a full disk: a sibling would not fit either; the spool keeps the session
                # meanwhile (while its proxy runs, or for FINISH_WAIT_S)
                if time.monotonic() < deadline or not writer_closed(spool_path):
                    time.sleep(0.5)
                    continue
                raise DiskFull(f"no room on the disk for {db} for {FINISH_WAIT_S:.0f} s")
            # Held by the loader of another session of this file (recorded at the same time, or
            # handed over by a proxy that has exited): they take turns, so its turn ends soon.
            # Held by anything else (a user's DuckDB, a long query): a sibling file.
            if not handoff.others_recording(db, spool_path) or time.monotonic() >= deadline:
                break
        problem = f"{db} is in use by another process"
    except UserError as e:
        problem = e.one_line()
    finally:
        _Word.quiet = False
    root, ext = os.path.splitext(db)
    sibling = f"{root}.{session_id}{ext or '.db'}"
    _say(f"{problem}; recording this session into {sibling} instead")
    handle = DB(sibling, own_spool=spool_path)
    if handle.wait(LOCKED_AT_START_S) is None:  # other problems raise their own UserError
        raise DBLocked(f"{sibling} is in use by another process too")
    new_spool = f"{sibling}.{session_id}.spool"
    try:
        os.rename(spool_path, new_spool)
    except OSError:
        new_spool = spool_path
    handle.own_spool = new_spool
    return handle, sibling, new_spool


def ingest_spool(spool_path: str, follow: bool, store: Store | None = None) -> dict:
    """Load one spool into its DB. With follow=True, tail it until the proxy writes its end
    marker or dies. Returns a summary. The spool is deleted once its session is complete."""
    lock_fd = lock_shared(spool_path)
    reader = SpoolReader(spool_path)
    meta = reader.meta
    sid = meta["session_id"]
    if store is None:
        handle, db, spool_path = _open_for(meta["db"], sid, spool_path)
        _Word.chosen()
        if db != meta["db"]:
            meta["db_note"] = f"recorded into a sibling of {meta['db']}"
    else:
        handle, db = DB(store.path, store), store.path
    try:
        first = handle.get()
        if first is None:  # _open_for returns with the store open; another writer took it since
            raise DBLocked(f"{db} is in use by another process")
        ing = Ingest(handle, meta, resume_after=first.max_seq(sid))
        if follow:
            ing.relay_over = lambda: writer_closed(spool_path)
        for note in ing.redactor.notes:
            _say(f"session {sid}: {note}")
        first.upsert_session(ing.session_values(None))
        # in a thread, stored once taken: a resumed load (recover) has stored it already
        workdir = None if ing.skip_until else Taking(meta, ing.redactor, spool_path)
        stop = {"flag": False}
        if follow:
            signal.signal(signal.SIGTERM, lambda *_: stop.update(flag=True))
        proxy_pid = meta.get("proxy_pid")
        end_reason = "agent_exit"
        quiet_since = time.monotonic()
        while True:
            fresh = (reader.read_available(READ_BYTES, final=not follow) if not ing.full
                     else [])
            records, ing.held = ing.held + fresh, []
            if records:
                ing.feed_read(records, more=bool(fresh) and reader.behind)
                ing.flush(behind=reader.behind)
                quiet_since = time.monotonic()
                if ing.ended:
                    break
                continue
            ing.flush()
            if workdir is not None and workdir.ready() and handle.store is not None:
                workdir.save(handle.write, wait=False)  # (a DB let go of stays free for readers)
            if not follow:
                # The spool is read to its end: not while rows wait for the DB (another
                # session's turn, a full disk) nor inside a record longer than one read. (Both
                # ended the recovery early: the rest was marked as a gap and the spool deleted.)
                if ing.full:
                    if handle.wait(FINISH_WAIT_S) is None:
                        raise DBLocked(f"{db} stayed in use by another process or its disk "
                                       f"stayed full for {FINISH_WAIT_S:.0f} s")
                    continue
                if reader.behind:
                    continue
                end_reason = "recovered"
                break
            if stop["flag"] or os.getppid() != proxy_pid or writer_closed(spool_path):
                # The proxy is gone without its end marker (SIGKILL): take what reached the disk.
                time.sleep(0.05)
                while records := reader.read_available():
                    ing.feed(records)
                ing.feed(reader.read_available(final=True))
                end_reason = "proxy_killed"
                break
            if not ing.rows and time.monotonic() - quiet_since > IDLE_RELEASE_S:
                handle.release()
            time.sleep(POLL_S)
        counters = read_counters(spool_path)
        if ing.ended or (end_reason == "proxy_killed" and counters and counters[1] is not None):
            # (an exit the proxy saw but could not write the end of: a full disk)
            end_reason = "agent_exit"
        torn = reader.torn_bytes + reader.skipped_bytes
        if workdir is not None:
            workdir.save(handle.write)
        if not ing.finish(end_reason, counters):
            raise UserError(f"{db} stayed locked by another process or the disk stayed full "
                            f"for {FINISH_WAIT_S:.0f} s")
        reader.close()
        done = handle.get()
        later: list = []  # what the hooks do once the file is closed
        if done is not None:  # summaries for readers, made while the file is still ours
            after_load.run(done, sid, _say, later)
        if (ing.anomalies or ing.invalid) and not meta.get("quiet"):
            bits = [f"{n} {what}" for n, what in ((ing.invalid, "not JSON-RPC (batch, bad JSON, …)"),
                                                   (ing.anomalies, "against the protocol "
                                                                   "(id reused while pending, "
                                                                   "another protocol's method)"))
                    if n]
            _say(f"session {sid}: frames relayed untouched and recorded, but {'; '.join(bits)}: "
                 f"see `wire-show {db} --session {sid}`")
        if torn:
            _say(f"{torn} bytes of {spool_path} were cut off mid-write and are not recorded "
                 f"(marked as a recording gap)")
        # The DB is let go of first: once the spool is gone, the file is complete and free (a
        # crash in between leaves a spool whose rows are stored: recover skips them).
        handle.release()
        if not handle.pinned:  # (a caller's store stays open: the file is not final yet)
            after_load.closed(later, db, _say)
        try:
            os.unlink(spool_path)
        except OSError:
            pass
        return {"session_id": sid, "db": db, "frames": ing.frame_count, "end_reason": end_reason,
                "rows": ing.seq}
    finally:
        handle.release()
        if lock_fd is not None:
            os.close(lock_fd)


def spools_of(db: str) -> list[str]:
    """Every spool of `db`, held by a live process or not."""
    folder = os.path.dirname(os.path.abspath(db)) or "."
    base = os.path.basename(db) + "."
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(os.path.join(folder, n) for n in names
                  if n.startswith(base) and n.endswith(".spool"))


def orphan_spools(db: str) -> list[str]:
    return [s for s in spools_of(db) if spool_is_orphan(s)]


FAILED_SUFFIX = ".failed"


def keep_failed(spool_path: str) -> str:
    """Set a spool that could not be loaded aside, beside its DB, under a name no later proxy
    picks up as an orphan (it would fail on it again); returns where it is now."""
    target = spool_path + FAILED_SUFFIX
    if spool_path.endswith(FAILED_SUFFIX) or not os.path.exists(spool_path):
        return spool_path
    n = 1
    while os.path.exists(target):
        n += 1
        target = f"{spool_path}.{n}{FAILED_SUFFIX}"
    try:
        os.rename(spool_path, target)
    except OSError:
        return spool_path
    return target


def failure_text(e: BaseException) -> str:
    return e.one_line() if isinstance(e, UserError) else f"{type(e).__name__}: {e}"


def main(argv: list[str]) -> int:
    # A Ctrl-C or hang-up meant for the agent must not cut the recording short.
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    os.umask(0o077)
    _Word.enabled = True
    spool_path = argv[0]
    try:
        summary = ingest_spool(spool_path, follow=True)
    except UserError as e:
        _say(f"{e.one_line()}; the session stays in {spool_path}: run "
             f"`{PROXY} recover {spool_path}` later")
        return 1
    except Exception as e:  # the spool keeps everything; say how to get it back
        _say(f"recording failed ({type(e).__name__}: {e}); the session stays in {spool_path}: "
             f"run `{PROXY} recover {spool_path}` later")
        return 1
    # Spools of earlier proxies that were killed together with their loader (their notes still
    # reach the proxy's stderr: it is told to go only when there are none).
    orphans = orphan_spools(summary["db"])
    if not orphans:
        _Word.stored()
    for orphan in orphans:
        try:
            ingest_spool(orphan, follow=False)
        except Exception as e:
            kept = keep_failed(orphan)
            _say(f"could not recover {orphan} ({failure_text(e)}); it is kept as {kept}: run "
                 f"`{PROXY} recover {kept}` once that is fixed")
    return 0

