"""The one store: DuckDB tables for sessions and frames, with a schema version and migrations.

Every other part (replay, analysis) reads recordings through `open_store`. Old files keep
loading: `MIGRATIONS` brings any older schema up to `SCHEMA_VERSION` when a file is opened for
writing; reading an old file read-only works as long as its columns are a superset of what the
reader selects (new columns are only ever added).

Frames over `INLINE_MAX` keep their bytes in a sidecar file, `<db>.blobs`, not in DuckDB: DuckDB 2.0
stores MB-sized BLOBs at tens of MB/s and with GBs of memory. The row keeps everything else, with
raw NULL and `blob_offset` pointing into the sidecar; `Store.frames` and `resolve_blobs` put the
bytes back.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import DBLocked, DiskFull, NotARecording, SchemaTooNew
from .model import COLUMNS, FRAMES, SESSION_COLUMNS, SESSIONS, TABLES, WORKDIR_COLUMNS, Frame
from .paths import DUCKDB_MAGIC, fsync_dir, fsync_file

if TYPE_CHECKING:
    import duckdb
# duckdb itself is imported where a file is opened: it costs ~40 ms, and readers of transcripts
# (wire-replay SESSION.jsonl) import this module without opening any.

SCHEMA_VERSION = 5

INLINE_MAX = 256 * 1024

META_DDL = "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)"

# The tables' first form (schema 1: sessions, frames; schema 5: workdir_files); the columns added
# since come from the migration steps. Both are made from the column registry in model.py.
SESSIONS_DDL = SESSIONS.create_sql()
FRAMES_DDL = FRAMES.create_sql()


def _add_tables_and_columns(version: int) -> Callable[[duckdb.DuckDBPyConnection], None]:
    def step(con: duckdb.DuckDBPyConnection) -> None:
        for table in TABLES:
            for sql in table.added_in(version):
                con.execute(sql)
    return step


# (version it produces, step). A new schema's tables and columns come from model.py (`since=`);
# a step that does more than add them is added here by hand. Steps only ever add. Fresh files run
# every step too, so the upgrade path is exercised on each new recording.
MIGRATIONS: list[tuple[int, Callable[[duckdb.DuckDBPyConnection], None]]] = [
    (v, _add_tables_and_columns(v)) for v in range(1, SCHEMA_VERSION + 1)
]
assert all(t.since <= c.since <= SCHEMA_VERSION for t in TABLES for c in t.columns)

# Frame columns added after schema 1: (schema that added it, SQL type). Readers of older files
# select NULL for them.
ADDED_COLUMNS = {c.name: (c.since, c.sql_type) for c in FRAMES.columns if c.since > 1}


def blobs_path(db_path: str) -> str:
    return os.fspath(db_path) + ".blobs"


def frame_select(version: int) -> str:
    """The select list for COLUMNS from a file of this schema version."""
    return FRAMES.select_list(version)


def resolve_blobs(frames: list[Frame], db_path: str) -> list[Frame]:
    """Fill in raw for frames whose bytes are in the sidecar of db_path (in place)."""
    need = [f for f in frames if f.raw is None and f.blob_offset is not None]
    if not need:
        return frames
    path = blobs_path(db_path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise NotARecording(f"cannot read {path}: {e.strerror}; {len(need)} large frames of "
                            f"{db_path} keep their bytes there",
                            "keep NAME.db.blobs next to NAME.db") from None
    try:
        for f in need:
            offset = f.blob_offset or 0  # never None here: `need` holds only sidecar frames
            data = os.pread(fd, f.byte_len, offset)
            if len(data) != f.byte_len:
                raise NotARecording(f"{path} is cut short: frame {f.seq} of session "
                                    f"{f.session_id} needs bytes {offset}.."
                                    f"{offset + f.byte_len}, the file has "
                                    f"{os.fstat(fd).st_size}")
            f.raw = data
    finally:
        os.close(fd)
    return frames


def is_duckdb_file(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(12)[8:12] == DUCKDB_MAGIC
    except OSError:
        return False


# Files are created in DuckDB 1.4's storage format so that every DuckDB >= 1.4 opens them (the
# default of the DuckDB writing them may be newer than what the user's notebook or CLI reads). The
# format is fixed when a file is created: a file that already exists keeps its own, so recordings
# written before this setting keep loading, and a 1.4-format file stays readable by 1.4 after
# newer DuckDBs append to it.
STORAGE_COMPATIBILITY = "v1.4.0"

# New files get 16 KiB blocks, not DuckDB's 256 KiB: a file costs a header plus a block per table
# and per index even when nearly empty, so a session of a few frames took 1.5 MB (6 blocks) and
# takes 124 KB with these (bench/bench_files.py). DuckDB 1.4 reads such files. The price, paid by
# long sessions only: below 64 KiB blocks DuckDB does not bit-pack integer columns (seq, mono_ns,
# ts, byte_len cost 8 bytes a row each), and bulk inserts write 16x as many blocks. Like the
# storage format, the block size is fixed when a file is created.
BLOCK_SIZE = 16 * 1024

# ...except for a long session in a file the loader created: 16 KiB blocks cost the loader 35 MB
# of its peak and 12% of its rows/s (1M small frames: VmHWM 186-188 -> 151-152 MB, 55-57k ->
# 62-65k rows/s; 10M: 222-223 -> 155 MB, 51-55k -> 61-64k rows/s), and under its memory limit a
# bulk insert into them thrashes (1M rows by DuckDB's own JSON reader, 64 MB limit: 27 s against
# 2.9 s). So once such a file holds GROW_ROWS rows, `grow_blocks` copies it into 256 KiB blocks and
# the loader goes on there. A session's file is then larger by at most DuckDB's fixed cost of the
# big blocks (~1.4 MB; past ~100k frames like kimi's the big blocks are the smaller).
LOADING_BLOCK_SIZE = 256 * 1024
GROW_ROWS = 20_000


def _connect(path: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    import duckdb

    if read_only or os.path.exists(path):
        if not os.path.exists(path):
            raise NotARecording(f"{path}: no such file")
        if os.path.isdir(path):
            raise NotARecording(f"{path} is a directory, not a recording")
        if not os.access(path, os.R_OK):
            raise NotARecording(f"{path} is not readable", "check its permissions")
        if os.path.getsize(path) and not is_duckdb_file(path):
            raise NotARecording(f"{path} is not a DuckDB file",
                                "give a .db written by wire-proxy (or a .jsonl transcript)")
    if not read_only:
        _drop_if_empty(path)
    try:
        if read_only:
            return duckdb.connect(path, read_only=True)
        return duckdb.connect(path, config={"storage_compatibility_version": STORAGE_COMPATIBILITY,
                                            "default_block_size": str(BLOCK_SIZE)})
    except duckdb.IOException as e:
        msg = str(e)
        if not read_only and is_disk_full(e):
            # DuckDB made the file but had no room for its header: a 0-byte file that every
            # reader would call "not a DuckDB file". Nothing is in it; the next open makes it.
            _drop_if_empty(path)
            raise DiskFull(_first_line(e),
                           "make room on its disk") from None
        if is_lock_error(msg):
            holder = ""
            if "PID" in msg:
                holder = " (" + msg[msg.index("PID"):].split(")")[0].strip() + ")"
            raise DBLocked(f"{path} is in use by another process{holder}",
                           "wait for its recording to finish, or use another file") from None
        raise damaged(path, e) from None
    except duckdb.Error as e:
        raise damaged(path, e) from None


def is_disk_full(e: BaseException) -> bool:
    """A full disk or quota, as an OSError or in DuckDB's words."""
    import errno

    if isinstance(e, OSError):
        return e.errno in (errno.ENOSPC, errno.EDQUOT)
    text = str(e)
    return "No space left" in text or "Disk quota" in text


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]


def is_lock_error(msg: str) -> bool:
    """DuckDB's words for a file another process holds. Not any "lock": a damaged file's
    message names a "block"."""
    low = msg.lower()
    return "could not set lock" in low or "conflicting lock" in low


def damaged(path: str, e: BaseException) -> NotARecording:
    """A DuckDB file that DuckDB cannot read (cut short, bytes flipped), as one line."""
    first = (str(e).splitlines() or [type(e).__name__])[0]
    return NotARecording(f"{path} is damaged or not readable as a recording: {first}",
                         "restore it from a copy, or re-import its transcript")


def writer_lock_path(path: str) -> str:
    return os.fspath(path) + ".lock"


def take_writer_lock(path: str) -> int | None:
    """A descriptor holding the writer lock of the recording at `path` (`Store.close` lets go);
    None where no lock file can be made (a read-only folder: DuckDB's own lock is all there is).
    Raises DBLocked when another writer holds it.

    DuckDB's own lock is a POSIX record lock, which a process loses the moment it closes *any*
    descriptor of the file: a loader that read the file for another reason while it held the
    file (the work-dir manifest hashes the files of the agent's folder, the recording among
    them) let a second loader open it for writing too, and one session's rows were lost when
    both checkpointed (issue 28). This lock is a flock on `<db>.lock`, held by the open file
    description, so nothing else the process opens or closes can drop it. The file is removed
    when the lock is let go; whoever gets the lock on a file that is no longer the one at that
    name tries again, so at most one writer holds the lock on the file the name points to."""
    lock = writer_lock_path(path)
    for _ in range(16):
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise DBLocked(f"{path} is in use by another process",
                           "wait for its recording to finish, or use another file") from None
        try:
            if os.path.samestat(os.fstat(fd), os.stat(lock)):
                return fd
        except OSError:
            pass
        os.close(fd)  # its last holder removed it meanwhile: take the one at that name now
    raise DBLocked(f"{path} is in use by other processes (its writer lock kept changing)")


def drop_writer_lock(path: str, fd: int | None) -> None:
    """Let go of the writer lock `take_writer_lock` gave (after the DuckDB connection is
    closed: closing the descriptor drops DuckDB's record locks on nothing else)."""
    if fd is None:
        return
    try:
        os.unlink(writer_lock_path(path))  # only the holder removes it
    except OSError:
        pass
    os.close(fd)


def _drop_if_empty(path: str) -> None:
    """DuckDB refuses a 0-byte file, which is what a process killed while DuckDB was creating the
    file leaves (a loader SIGKILLed with its proxy). Nothing is in it: remove it so the file is
    created afresh, unless some process holds DuckDB's lock on it (then it is being created now)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return
    try:
        if os.fstat(fd).st_size:
            return
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return
        if os.fstat(fd).st_size == 0 and os.path.samestat(os.fstat(fd), os.stat(path)):
            os.unlink(path)
    except OSError:
        pass
    finally:
        os.close(fd)


RECORDER_TABLES = ("meta", "frames", "sessions", "workdir_files")


def check_base_tables(con: duckdb.DuckDBPyConnection, path: str, catalog: str | None = None) -> None:
    """Refuse a file whose `meta`, `frames` or `sessions` is anything but a base table: a view
    (or a macro) planted in an untrusted file would run its own SQL, e.g. read a local file, the
    moment a reader selects from it. Checked before anything in the file is read."""
    rows = planted(con, None if catalog is None else [catalog])
    if rows:
        raise NotARecording(planted_message(path, rows[0]))


def check_columns(con: duckdb.DuckDBPyConnection, path: str, version: int,
                  catalog: str | None = None) -> None:
    """Refuse a file whose `frames` or `sessions` lacks a column its schema version has (a file
    made by hand, or another program's tables under our names): one clear line, instead of a
    Binder error from the first reader's SELECT."""
    db = "current_database()" if catalog is None else "'" + catalog.replace("'", "''") + "'"
    have: dict[str, set[str]] = {}
    for table, column in con.execute(
            f"SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = {db} "
            "AND schema_name = 'main' AND table_name IN ('frames', 'sessions')").fetchall():
        have.setdefault(table, set()).add(column)
    for t in (FRAMES, SESSIONS):
        missing = [c.name for c in t.columns if c.since <= version
                   and c.name not in have.get(t.name, set())]
        if missing:
            raise NotARecording(f"{path} is not a wire-recorder recording: its {t.name} table "
                                f"lacks {', '.join(missing[:3])}"
                                + (f" and {len(missing) - 3} more" if len(missing) > 3 else ""),
                                "give a .db written by wire-proxy or wire-import")


def planted(con: duckdb.DuckDBPyConnection,
            catalogs: list[str] | None) -> list[tuple[str, str, str]]:
    """(catalog, name, "view" or "macro") of each recorder table name that is not a base table
    in these attached catalogs (None: the connection's own database), in one catalog scan (a
    reader attaching many files checks them all at once)."""
    if catalogs is None:
        db = "= current_database()"
    else:
        db = "IN (" + ", ".join("'" + c.replace("'", "''") + "'" for c in catalogs) + ")"
    names = ", ".join(f"'{n}'" for n in RECORDER_TABLES)
    return [tuple(r) for r in con.execute(
        f"SELECT database_name, view_name, 'view' FROM duckdb_views() WHERE database_name {db} "
        f"AND schema_name = 'main' AND view_name IN ({names}) "
        f"UNION ALL SELECT database_name, function_name, 'macro' FROM duckdb_functions() "
        f"WHERE database_name {db} AND function_name IN ({names})").fetchall()]


def planted_message(path: str, row: tuple[str, str, str]) -> str:
    return f"{path}: not a wire-recorder recording: {row[1]} is a {row[2]}"


def schema_version(con: duckdb.DuckDBPyConnection, path: str = "the file",
                   catalog: str | None = None) -> int | None:
    """The file's schema version; None when it has none. A version that is not a whole number
    is NotARecording (a file made by hand, or damaged)."""
    import duckdb

    table = "meta" if catalog is None else f"{catalog}.meta"
    try:
        row = con.execute(f"SELECT value FROM {table} WHERE key = 'schema_version'").fetchone()
    except duckdb.CatalogException:
        return None
    if not row:
        return None
    try:
        return int(row[0])
    except (TypeError, ValueError):
        raise NotARecording(f"{path} is not a wire-recorder recording: its schema version "
                            f"{str(row[0])[:40]!r} is not a number") from None


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    current = schema_version(con) or 0
    if current > SCHEMA_VERSION:
        raise SchemaTooNew(f"written by a newer wire-recorder (schema {current}; this one reads up "
                           f"to {SCHEMA_VERSION})", "upgrade wire-recorder")
    for version, step in MIGRATIONS:
        if version > current:
            # a step and its version number commit together (the meta table with the first): a
            # process killed mid-way (SIGKILL of proxy and loader) leaves the file at one version
            # or the next, never between, and never as tables without a version
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute(META_DDL)
                step(con)
                con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                            [str(version)])
                con.execute("INSERT OR IGNORE INTO meta VALUES ('created_by', 'wire-recorder')")
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            current = version
    return current


class _PrivateFiles:
    """umask 077 while any store is open for writing: DuckDB creates the `.wal` beside a file
    (and its temporary files) when it first writes, long after the connect, and would give them
    the process's umask (0644 under 022). The umask is per process, so nested opens count."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._saved = 0

    def enter(self) -> None:
        with self._lock:
            if self._open == 0:
                self._saved = os.umask(0o077)
            self._open += 1

    def leave(self) -> None:
        with self._lock:
            self._open -= 1
            if self._open == 0:
                os.umask(self._saved)


_PRIVATE = _PrivateFiles()


class Store:
    def __init__(self, path: str, con: duckdb.DuckDBPyConnection, read_only: bool,
                 version: int = SCHEMA_VERSION, created: bool = False):
        self.path = path
        self.con = con
        self.read_only = read_only
        self.version = version  # below SCHEMA_VERSION only for old files opened read-only
        self._blobs_written = False  # sidecar bytes not yet synced to the disk
        # the memory_limit (MB) a writer keeps its DuckDB under (the loader's), None for DuckDB's
        # default; and whether values larger than a block were written since the last checkpoint
        # (its checkpoint then runs under a raised limit: recorder/loader.py, `checkpoint`)
        self.memory_limit_mb: int | None = None
        self.large_values = False
        self.created = created  # this open created the file
        self.writer_lock: int | None = None  # (take_writer_lock) held until close

    # -- reading --------------------------------------------------------------------------------
    def sessions(self) -> list[dict]:
        cur = self.con.execute(f"SELECT {SESSIONS.select_list(self.version)} FROM sessions "
                               f"ORDER BY started_at, session_id")
        return [dict(zip(SESSION_COLUMNS, r, strict=True)) for r in cur.fetchall()]

    def session(self, session_id: str | None = None) -> dict:
        """One session: the given name or id (or a unique prefix of either), or the only one in
        the file (recorder.sessions: the rule every command uses)."""
        from .sessions import pick_session

        return pick_session(self.sessions(), session_id, self.path)

    def frames(self, session_id: str, directions: tuple[str, ...] | None = None) -> list[Frame]:
        sql = f"SELECT {frame_select(self.version)} FROM frames WHERE session_id = ?"
        params: list = [session_id]
        if directions:
            sql += f" AND direction IN ({', '.join('?' * len(directions))})"
            params += list(directions)
        rows = self.con.execute(sql + " ORDER BY seq", params).fetchall()
        return resolve_blobs([Frame(*r) for r in rows], self.path)

    # -- writing --------------------------------------------------------------------------------
    def insert_frames(self, rows: list[tuple]) -> None:
        """Append rows (tuples in COLUMNS order); large raw values go to the sidecar."""
        if rows:
            rows = self._spill_large(rows)
            ap = self.con.appender("frames", columns=list(COLUMNS))
            ap.append_rows(rows)
            ap.flush()

    def _spill_large(self, rows: list[tuple]) -> list[tuple]:
        raw_i, off_i = COLUMNS.index("raw"), COLUMNS.index("blob_offset")
        big = [i for i, r in enumerate(rows) if r[raw_i] is not None and len(r[raw_i]) > INLINE_MAX]
        if not big:
            return rows
        rows = list(rows)
        # Only this DB's writer appends (DuckDB's lock makes it the only one). The bytes are
        # written before the rows pointing at them commit: a process killed in between leaves
        # unreferenced bytes, never a dangling offset. They are synced to the disk once, when the
        # store closes (`sync_blobs`), not per batch: an fsync per batch held up the kernel's
        # write-back of the proxy's own spool and cost up to 21% of a 1 GiB burst's recording.
        # After a power loss mid-session a row can point past the sidecar's end; reading it is
        # then a clear "cut short" error (`resolve_blobs`).
        self._blobs_written = True
        fd = os.open(blobs_path(self.path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            offset = os.fstat(fd).st_size
            for i in big:
                r = rows[i]
                raw = r[raw_i]
                view = memoryview(raw)
                while view:
                    view = view[os.write(fd, view):]
                rows[i] = r[:raw_i] + (None,) + r[raw_i + 1:off_i] + (offset,) + r[off_i + 1:]
                offset += len(raw)
        finally:
            os.close(fd)
        return rows

    def sync_blobs(self) -> None:
        """Put the sidecar's bytes on the disk (before the session's last row commits)."""
        if not self._blobs_written:
            return
        try:
            fd = os.open(blobs_path(self.path), os.O_RDONLY)
        except OSError:
            return
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)
        self._blobs_written = False

    def max_seq(self, session_id: str) -> int:
        row = self.con.execute("SELECT max(seq) FROM frames WHERE session_id = ?",
                               [session_id]).fetchone()
        return (row[0] if row else None) or 0

    def upsert_session(self, values: dict) -> None:
        cols = [c for c in SESSION_COLUMNS if c in values]
        exists = self.con.execute("SELECT 1 FROM sessions WHERE session_id = ?",
                                  [values["session_id"]]).fetchone()
        if exists:
            sets = ", ".join(f"{c} = ?" for c in cols if c != "session_id")
            self.con.execute(f"UPDATE sessions SET {sets} WHERE session_id = ?",
                             [values[c] for c in cols if c != "session_id"] +
                             [values["session_id"]])
        else:
            self.con.execute(f"INSERT INTO sessions ({', '.join(cols)}) VALUES "
                             f"({', '.join('?' * len(cols))})", [values[c] for c in cols])

    def insert_workdir_files(self, rows: list[tuple]) -> None:
        """Append rows of `workdir_files` (tuples in WORKDIR_COLUMNS order)."""
        if rows:
            ap = self.con.appender("workdir_files", columns=list(WORKDIR_COLUMNS))
            ap.append_rows(rows)
            ap.flush()

    def workdir_files(self, session_id: str) -> list[tuple] | None:
        """A session's `workdir_files` rows (WORKDIR_COLUMNS order, by path); None for a file
        older than schema 5, which has no such table."""
        if self.version < 5:
            return None
        return self.con.execute(f"SELECT {', '.join(WORKDIR_COLUMNS)} FROM workdir_files "
                                "WHERE session_id = ? ORDER BY path", [session_id]).fetchall()

    def close(self) -> None:
        if self.con is None:
            return
        try:
            self.sync_blobs()
        finally:
            try:
                self.con.close()
            finally:
                self.con = None  # type: ignore[assignment]  # closed: a second close does nothing
                if not self.read_only:
                    lock, self.writer_lock = self.writer_lock, None
                    drop_writer_lock(self.path, lock)
                    _PRIVATE.leave()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_store(path: str, read_only: bool = False, wait_for_loader: bool = True) -> Store:
    """Open a recording. Read-only opens never change the file; writable opens create it (owner
    only) and migrate it to the current schema. Tables only: analysis installs its views when
    it opens a file (analysis/views.py).

    Either waits first for a loader still storing a session its proxy has handed over (every
    opener but that loader itself: `wait_for_loader=False`), so `wire-proxy ... && wire-import
    --db` the same file does not fail on the loader's lock."""
    import duckdb

    from .handoff import wait_for_loaders

    path = os.fspath(path)
    if wait_for_loader:
        wait_for_loaders(path)  # a session its proxy handed to a loader still storing it
    if not read_only:
        _PRIVATE.enter()  # left when the store closes
        lock = None
        try:
            # checked first, so the error for a folder that does not exist is DuckDB's
            if os.path.isdir(os.path.dirname(os.path.abspath(path))):
                lock = take_writer_lock(path)
            created = not os.path.exists(path) or os.path.getsize(path) == 0
            con = _connect(path, read_only=False)
        except BaseException:
            drop_writer_lock(path, lock)
            _PRIVATE.leave()
            raise
        try:
            if os.path.getsize(path) and schema_version(con) is None and _has_tables(con):
                raise NotARecording(f"{path} is a DuckDB file but not a wire-recorder recording")
            version = migrate(con)
        except BaseException as e:
            con.close()
            drop_writer_lock(path, lock)
            _PRIVATE.leave()
            if isinstance(e, (duckdb.Error, OSError)) and is_disk_full(e):
                raise DiskFull(_first_line(e),
                               "make room on its disk") from None
            raise
        store = Store(path, con, False, version, created=created)
        store.writer_lock = lock
        return store
    con = _connect(path, read_only=True)
    try:
        check_base_tables(con, path)
        # a reader needs no file but this one: whatever SQL the file holds cannot reach others
        con.execute("SET enable_external_access = false")
        found = schema_version(con, path)
    except duckdb.Error as e:
        con.close()
        raise damaged(path, e) from None
    except BaseException:
        con.close()
        raise
    if found is None:
        con.close()
        raise NotARecording(f"{path} is not a wire-recorder recording (no schema version)")
    if found > SCHEMA_VERSION:
        con.close()
        raise SchemaTooNew(f"{path} was written by a newer wire-recorder (schema {found}; this "
                           f"one reads up to {SCHEMA_VERSION})", "upgrade wire-recorder")
    try:
        check_columns(con, path, found)
    except BaseException:
        con.close()
        raise
    return Store(path, con, True, found)


def _has_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """Tables that are not ours. An empty `meta` alone is a file whose creation by wire-recorder
    before schema 3's fix was killed before its first commit (meta was created on its own)."""
    names = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE NOT internal").fetchall()]
    if names == ["meta"]:
        row = con.execute("SELECT count(*) FROM meta WHERE key <> 'created_by' "
                          "OR value <> 'wire-recorder'").fetchone()
        return bool(row and row[0])
    return bool(names)


def sql_str(text: str) -> str:
    """A SQL string literal (for statements that take no parameters: ATTACH, COPY)."""
    return "'" + text.replace("'", "''") + "'"


def remove_dead_copies(path: str) -> None:
    """Copies `grow_blocks` left half-made beside `path`: their loader was killed (its pid is
    gone). Every loader of the file removes them, as does the next copy."""
    folder, name = os.path.split(os.path.abspath(path))
    try:
        entries = os.listdir(folder)
    except OSError:  # no folder yet, or not readable: nothing of ours to remove there
        return
    for entry in entries:
        rest = entry[len(name) + 1:] if entry.startswith(name + ".") else ""
        pid, _, kind = rest.partition(".")
        if not pid.isdigit() or kind not in ("grow", "grow.wal"):
            continue
        if int(pid) != os.getpid():
            try:
                os.kill(int(pid), 0)
                continue  # a live process's copy, being made now
            except ProcessLookupError:
                pass
            except OSError:
                continue
        try:
            os.unlink(os.path.join(folder, entry))
        except OSError:
            pass


def grow_blocks(store: Store) -> bool:
    """Copy a writable store's file into a new one of `LOADING_BLOCK_SIZE` blocks and put it in
    the file's place; True when done. The caller has checkpointed the store (its WAL must be
    empty) and, when done, closes it and opens the path again. The
    copy is DuckDB's (`COPY FROM DATABASE`, every table and view, committed rows); the rename
    happens while this store still holds the old file, so another opener gets one file or the
    other, whole. Anything that goes wrong leaves the file as it was (it only costs speed)."""
    import duckdb

    con, path = store.con, store.path
    tmp = f"{path}.{os.getpid()}.grow"
    done = False
    _PRIVATE.enter()
    try:
        (catalog, block) = con.execute(
            "SELECT database_name, block_size FROM pragma_database_size() "
            "WHERE database_name = current_database()").fetchone() or ("", LOADING_BLOCK_SIZE)
        if block >= LOADING_BLOCK_SIZE:
            return False
        try:  # the old file's WAL would be replayed onto the new one: checkpointed first
            if os.path.getsize(path + ".wal"):
                return False
        except FileNotFoundError:
            pass
        remove_dead_copies(path)
        con.execute(f"ATTACH {sql_str(tmp)} AS wr_grow (BLOCK_SIZE {LOADING_BLOCK_SIZE}, "
                    f"STORAGE_VERSION '{STORAGE_COMPATIBILITY}')")
        try:
            con.execute(f'COPY FROM DATABASE "{catalog}" TO wr_grow')
        finally:
            con.execute("DETACH wr_grow")
        if os.path.exists(tmp + ".wal"):
            return False
        fsync_file(tmp)
        os.replace(tmp, path)
        done = True
        fsync_dir(os.path.dirname(os.path.abspath(path)))  # the rename too, before rows follow
        return True
    except (duckdb.Error, OSError):
        return False
    finally:
        if not done:
            for left in (tmp, tmp + ".wal"):
                try:
                    os.unlink(left)
                except OSError:
                    pass
        _PRIVATE.leave()
