"""What the web app shows, as plain data: the index of every session in every input, one
session's cards, timeline bars, token chart and conversation, its frames, live sessions read
from their spool, and replay reports.

Recordings are opened read-only through the analysis workspace (`analysis.sources`) for each
question and closed after it: a read-only attach still locks a file against a writer, and a
session being recorded needs its loader to be able to write. A session being recorded is read
from its spool (`<db>.<session>.spool`) the way `wire-show --follow` reads it.
"""

from __future__ import annotations

import base64
import contextlib
import glob
import hashlib
import os
import re
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import orjson

from wire_recorder.recorder.errors import DBLocked, UserError
from wire_recorder.recorder.model import Frame

from . import closing

if TYPE_CHECKING:  # rich and the timeline load with the first session, not before the URL
    from .conversation import Conversation


PAGE = 2000  # conversation items per request
REPORT_WAITS_FOR_INDEX_S = 30.0
INDEX_COLUMNS = ("key", "session_id", "name", "protocol", "agent", "started_at", "duration_ms",
                 "turns", "tokens", "tool_calls", "errors", "anomalies", "tags", "source_file",
                 "live")
SORTABLE = {"name", "protocol", "agent", "started_at", "duration_ms", "turns", "tokens",
            "tool_calls", "errors", "anomalies", "source_file"}


def sql(name: str) -> str:
    return files(__package__).joinpath("sql", f"{name}.sql").read_text(encoding="utf-8")


def _rows(con: Any, text: str, params: dict | None = None) -> list[dict]:
    from .coldindex import dicts

    return dicts(con.execute(text, params or {}))


def _json_safe(v: Any) -> Any:
    if hasattr(v, "isoformat"):
        return v.isoformat(sep=" ") if hasattr(v, "hour") else v.isoformat()
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    return v


def _parsed(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return orjson.loads(v)
        except orjson.JSONDecodeError:
            return v
    return v


def agent_of(command: Any) -> str:
    """The agent a session ran: the program's name, and its first word after it when the
    program is an interpreter (`python server.py` is `server.py`)."""
    argv = _parsed(command)
    if not isinstance(argv, list) or not argv:
        return ""
    words = [os.path.basename(str(a)) for a in argv]
    if words[0].startswith(("python", "node", "uv", "npx", "bun", "deno")) and len(words) > 1:
        rest = [str(a) for a in argv[1:] if not str(a).startswith("-")]
        # an npm package's program is named by its package (`.../node_modules/@moonshot-ai/
        # kimi-code/dist/main.mjs` is @moonshot-ai/kimi-code), not by its file (main.mjs)
        _, sep, pkg = rest[0].rpartition("node_modules/") if rest else ("", "", "")
        if sep and "/" in pkg:
            parts = pkg.split("/")
            return "/".join(parts[:2] if parts[0].startswith("@") else parts[:1])
        return os.path.basename(rest[0]) if rest else words[0]
    return words[0]


def session_data(ws: Any, sid: str) -> tuple[dict, dict]:
    """A session's header, cards, timeline bars and token chart (as JSON data), and its row as
    it is in `sessions` (for the timeline)."""
    srow = _rows(ws.con, "SELECT * FROM sessions WHERE session_id = $sid", {"sid": sid})[0]
    counts = _rows(ws.con, sql("counts"), {"sid": sid})[0]
    spans = _rows(ws.con, sql("spans"), {"sid": sid})
    tokens = _rows(ws.con, sql("tokens"), {"sid": sid})
    head = {k: _json_safe(v) for k, v in srow.items()}
    head["command"] = _parsed(head.get("command"))
    head["tags"] = _parsed(head.get("tags"))
    head["agent"] = agent_of(head["command"])
    info = _rows(ws.con, sql("agent_info"), {"sid": sid})
    if info and info[0].get("name"):  # what the agent says it is beats its command's name
        head["agent"] = " ".join(str(v) for v in (info[0]["name"], info[0].get("version")) if v)
    return {"session": head, "counts": counts, "spans": spans, "tokens": tokens}, srow


ROW_KEYS = ("session_id", "name", "protocol", "protocol_version", "cwd", "started_at", "ended_at",
            "tags", "frame_count", "source", "source_file", "mono_start_ns", "duration_ms",
            "turns", "tokens", "tool_calls", "errors", "anomalies")


def index_row(r: dict, text: str | None = None) -> dict:
    """A row of the index from a session's columns and counts (`_text`: what search looks
    through, lower case; None until it has been read)."""
    out = {k: r.get(k) for k in ROW_KEYS}
    out["agent"] = agent_of(r.get("command"))
    out["tags"] = _parsed(out["tags"])
    out["live"] = False
    out["_text"] = text.lower() if text is not None else None
    if isinstance(out["duration_ms"], float):  # the same from SQL's epochs and Python's dates
        out["duration_ms"] = round(out["duration_ms"], 3)
    for k in ("started_at", "ended_at"):
        out[k] = _json_safe(out.get(k))
    return out


def index_rows(ws: Any) -> list[dict]:
    """The index's rows of a workspace, with their search text."""
    from .coldindex import summary_rows, text_sql, unescape

    said = dict(ws.con.execute(text_sql("frames")).fetchall())
    return [index_row(r, unescape(said.get(r["session_id"]))) for r in summary_rows(ws.con)]


def _has_spool(folder: str) -> bool:
    """A folder whose recording is still being made holds its spool before the loader has
    written the .db (wire-proxy opens the DB after spawning its agent)."""
    return bool(glob.glob(os.path.join(glob.escape(folder), "**", "*.spool"), recursive=True))


@dataclass
class Live:
    """A session being recorded, followed through its spool."""

    spool: str
    db: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    conv: Conversation | None = None
    meta: dict = field(default_factory=dict)
    ended: bool = False
    frames: list[Frame] = field(default_factory=list)
    _reader: Any = None
    _ingest: Any = None
    _quiet: int = 0

    def poll(self) -> None:
        from wire_recorder.recorder.loader import Ingest
        from wire_recorder.recorder.protocols import GENERIC
        from wire_recorder.recorder.spool import SpoolReader

        with self.lock:
            if self.ended:
                return
            if self._reader is None:
                try:
                    self._reader = SpoolReader(self.spool)
                except (OSError, UserError):
                    self.ended = True
                    return
                from .conversation import Conversation

                self.meta = self._reader.meta
                self._ingest = Ingest(None, self.meta)  # splits and classifies; writes nothing
                self.conv = Conversation(self.meta.get("mono_start_ns"), self.meta.get("protocol"))
            assert self.conv is not None
            try:
                records = self._reader.read_available()
            except (OSError, UserError):
                records = []
            if records:
                self._quiet = 0
                self._ingest.feed(records)
                # not detected (yet): plain JSON-RPC, as the loader stores it at the end
                # ("unknown"); a later detection switches the renderer
                self.conv.protocol = self._ingest.classifier.protocol or GENERIC.name
                new, self._ingest.rows = self._ingest.rows, []
                for r in new:
                    f = Frame(*r)
                    self.frames.append(f)
                    self.conv.add(f)
            else:
                self._quiet += 1
                if self._quiet == 2:
                    self.conv.pause()
            if self._ingest.ended or not os.path.exists(self.spool):
                self.conv.finish()
                self.ended = True
                self._reader.close()


BATCH = 100  # files attached at once while indexing (one catalog check, one copy for the views)
BATCH_BYTES = 256 << 20  # and at most this much of them
BIG_FILE = 32 << 20  # a file this big is a batch alone (read in place, not copied)
PROCESSES_FROM = 300  # files to read before worker processes pay for their start (~0.5 s)
CHUNK = 2000  # frames read from the file at a time for the conversation
# frames one request for conversation items reads at most: a page of a 10^7-frame session of
# streamed text answers in bounded time, and "more" takes the next share
READ_MAX = 50_000
# frames of a session whose conformance findings the inspector shows (wire-check's default)
CHECK_MAX = 250_000
# a session of more client/agent frames than this gets a light view (`Catalog._big_session`)
VIEW_MAX = 1_000_000


@contextlib.contextmanager
def frames_of(path: str) -> Iterator[tuple[Any, str]]:
    """(connection, table expression) of a recording's frames, read-only and locked like a
    workspace, but without the analysis views: a `.db` is attached alone, which is what a page
    of frames needs (a workspace's views cost more than the read)."""
    from wire_recorder.recorder.store import frame_select, is_duckdb_file

    from ..sources import attach_db, bound_memory, lock, open_workspace, remove_spill

    if os.path.isdir(path) or not is_duckdb_file(path):  # a transcript or a Parquet export
        with open_workspace([path], materialize=False) as ws, \
                closing.interruptible(ws.con):
            yield ws.con, "frames"
        return
    import duckdb

    with closing.using_duckdb():
        con = duckdb.connect(":memory:")
        spill = bound_memory(con)
        try:
            with closing.interruptible(con):
                version = attach_db(con, path, "rec")
                lock(con)
                yield con, f"(SELECT {frame_select(version)} FROM rec.frames)"
        finally:
            con.close()
            remove_spill(spill)


@dataclass
class Cursor:
    """A session's conversation made as far as the pages asked for so far: the first page of a
    long session is shown after reading and feeding its first frames only. Frames are read
    CHUNK at a time, each time through a workspace opened (without the derived views) and closed
    again, so no file stays locked between pages."""

    conv: Conversation
    source_file: str
    session_id: str
    last_seq: int = 0
    done: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _read(self) -> list[Frame]:
        from wire_recorder.recorder.model import COLUMNS
        from wire_recorder.recorder.store import resolve_blobs

        with frames_of(self.source_file) as (con, table):
            rows = con.execute(f"SELECT {', '.join(COLUMNS)} FROM {table} WHERE session_id = ? "
                               f"AND seq > ? ORDER BY seq LIMIT {CHUNK}",
                               [self.session_id, self.last_seq]).fetchall()
        frames = [Frame(*r) for r in rows]
        if any(f.raw is None and f.blob_offset is not None for f in frames):
            resolve_blobs(frames, self.source_file)
        return frames

    def page(self, start: int, n: int = PAGE) -> dict:
        with self.lock:
            read = 0
            while not self.done and len(self.conv.items) < start + n:
                if read >= READ_MAX:  # a request reads a bounded share of a huge session
                    self.conv.pause()  # the text streamed so far, as an item
                    break
                frames = self._read()
                read += len(frames)
                for f in frames:
                    self.conv.add(f)
                if frames:
                    self.last_seq = frames[-1].seq
                if len(frames) < CHUNK:
                    self.conv.finish()
                    self.done = True
            items = self.conv.items
            return {"items": items[start:start + n], "items_total": len(items),
                    "more": not self.done}


class _Batches:
    """Batches of `.db` files read by `coldindex.read_files`: in two worker processes when there
    are many (DuckDB per file is mostly single-threaded catalog work), else in this thread. A
    batch that fails as a whole is read a file at a time, in this thread."""

    def __init__(self, paths: list[str]):
        self.paths = paths
        self.pool: Any = None

    def __enter__(self) -> _Batches:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.pool is not None:
            closing.discard(self.pool)
            self.pool.close()

    def run(self, what: str, paths: list[str] | None = None) -> Iterator[tuple[list[str], dict]]:
        from concurrent.futures import ThreadPoolExecutor

        from . import coldindex

        todo = self.paths if paths is None else paths
        groups: list[list[str]] = []
        size = 0
        for p in todo:  # a batch without stored summaries is copied into memory: bounded
            try:
                n = os.path.getsize(p)
            except OSError:
                n = 0
            # the first batch small: its rows are on the page while the others are read
            full = BATCH if len(groups) > 1 else BATCH // 4
            if (not groups or len(groups[-1]) >= full or size + n > BATCH_BYTES
                    or n > BIG_FILE or size > BIG_FILE):
                groups.append([])
                size = 0
            groups[-1].append(p)
            size += n
        if self.pool is None and len(todo) >= PROCESSES_FROM:
            try:
                self.pool = coldindex.Workers(min(2, os.cpu_count() or 1))
            except OSError:  # no process to be had: this thread reads them all
                self.pool = None
            else:
                closing.add(self.pool)  # wire-ui closing ends them (the batches abandoned)
        pool = self.pool if len(todo) >= PROCESSES_FROM else None
        ex = ThreadPoolExecutor(max_workers=2)
        try:
            # the first batch here, while the workers start: its rows are on the page sooner
            futures = [None] + [ex.submit(pool.read, g, what) for g in groups[1:]] if pool else None
            for n, group in enumerate(groups):
                closing.check()
                try:
                    fut = futures[n] if futures is not None else None
                    res = fut.result() if fut is not None else coldindex.read_files(group, what)
                except Exception:  # noqa: BLE001 - a worker's failure: each file on its own
                    closing.check()  # (or wire-ui closing: no file read again)
                    res = self._one_by_one(group, what)
                yield group, res
        finally:  # (wire-ui closing: the batches not started are dropped)
            ex.shutdown(wait=True, cancel_futures=True)

    @staticmethod
    def _one_by_one(group: list[str], what: str) -> dict:
        from . import coldindex

        res: dict[str, Any] = {"rows": {}, "text": {}, "problems": {}, "busy": []}
        for p in group:
            try:
                one = coldindex.read_files([p], what)
            except closing.Closed:
                raise
            except Exception as e:  # noqa: BLE001 - one line for the page, not a trace
                first = (str(e).splitlines() or [type(e).__name__])[0]
                res["problems"][p] = f"{p}: cannot be indexed: {first}"
                continue
            for k in ("rows", "text", "problems"):
                res[k] |= one.get(k, {})
            res["busy"] += one["busy"]
        return res


class Catalog:
    """The sessions of the inputs. `specs` as for wire-query (files, globs, folders, .jsonl);
    `.json` inputs are wire-replay reports. Safe to use from several threads."""

    def __init__(self, specs: list[str], reports: list[str] | None = None,
                 cache: str | None = ""):
        # the index rows of files read by an earlier start ("": the default place, None: none)
        self.cache_path = index_cache_path() if cache == "" else cache
        self._disk: dict[str, dict] | None = None
        self.progress = (0, 0)  # files read, files to read (the build under way)
        self.search_progress = (0, 0)  # files whose search text is read, of
        self.search_ready = False
        self.files_read = 0  # by the last build: what the cache did not have
        self.specs = [s for s in specs if not s.endswith(".json")]
        self.report_paths = [s for s in specs if s.endswith(".json")] + list(reports or [])
        self._lock = threading.Lock()
        self._file_no: dict[str, int] = {}
        self.rows: list[dict] = []
        self.by_key: dict[str, dict] = {}
        self.problems: list[str] = []
        self.ready = False
        self.built_at = 0.0
        self.build_ms = 0.0
        self._signature: tuple = ()
        self._live: dict[str, Live] = {}
        self._conv_cache: OrderedDict[str, Cursor] = OrderedDict()
        self._data_cache: OrderedDict[str, dict] = OrderedDict()
        self._check_cache: dict[str, dict[int, list[str]]] = {}
        self._file_rows: dict[str, tuple[tuple, list[dict]]] = {}

    # -- the index -------------------------------------------------------------------------------
    def _paths(self) -> list[str]:
        from ..sources import expand_inputs

        out: list[str] = []
        problems: list[str] = []
        for spec in self.specs:
            try:
                out += [p for p in expand_inputs([spec]) if p not in out]
            except UserError as e:
                folder = os.path.expanduser(spec)
                if os.path.isdir(folder) and _has_spool(folder):
                    continue  # its only session is being recorded: followed from the spool
                problems.append(e.one_line())
        self.problems = problems
        return out

    def _spools(self, paths: list[str]) -> list[tuple[str, str]]:
        """(spool, db) of recordings in progress beside the inputs' files and in their folders."""
        out: dict[str, str] = {}  # a folder and its parent find the same spool
        dirs = {os.path.dirname(os.path.abspath(p)) for p in paths if not os.path.isdir(p)}
        dirs |= {os.path.abspath(os.path.expanduser(s)) for s in self.specs
                 if os.path.isdir(os.path.expanduser(s))}
        for d in sorted(dirs):
            for sp in glob.glob(os.path.join(glob.escape(d), "**", "*.spool"), recursive=True):
                out[os.path.abspath(sp)] = os.path.abspath(sp).rsplit(".", 2)[0]
        return sorted(out.items())

    def _key(self, path: str, sid: str) -> str:
        # a link that stays valid when the inputs change order: a hash of the file's path
        return f"{hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:10]}.{sid}"

    def build(self) -> None:
        """(Re)read every input into the index: the rows of every file first (served as they
        come), then the search text of the files (the page says search is still being read)."""
        from ..sources import open_workspace

        t0 = time.perf_counter()
        paths = self._paths()
        problems: list[str] = list(self.problems) if not paths else []
        spools = self._spools(paths)
        busy = {os.path.abspath(db) for _, db in spools}  # being recorded: shown from the spool
        # a file read before and not changed since keeps its rows (a reload reads what is new)
        sigs = {p: _file_sig(p) for p in paths}
        if self._disk is None:
            self._disk = load_index_cache(self.cache_path)
        # the entries loaders wrote of the files they recorded since (ui.recindex)
        folded = bool(self.cache_path) and self._fold(self._disk)
        for p in paths:
            if self._file_rows.get(p, (None, []))[0] == sigs[p]:
                continue
            hit = self._disk.get(os.path.abspath(p))
            if hit is not None and tuple(hit["sig"]) == sigs[p]:
                self._file_rows[p] = (sigs[p], [r | {"source_file": p} for r in hit["rows"]])
        todo = [p for p in paths if self._file_rows.get(p, (None, []))[0] != sigs[p]]
        self.files_read = len(todo)
        self.progress = (0, len(todo))
        dbs = [p for p in todo if _is_db(p)]
        others = [p for p in todo if not _is_db(p)]
        read = 0

        def noted(res: dict) -> None:
            problems.extend(m for p, m in res["problems"].items())
            for p in res["busy"]:
                if os.path.abspath(p) not in busy:  # held by something else than a recording
                    problems.append(DBLocked(f"{p} is in use by another process (still "
                                             "recording?)").one_line())

        # transcripts and Parquet exports: a workspace each (rows and text at once)
        for p in others:
            closing.check()
            try:
                with open_workspace([p]) as ws, \
                        closing.interruptible(ws.con):
                    self._file_rows[p] = (sigs[p], index_rows(ws))
            except UserError as e:
                problems.append(e.one_line())
            read += 1
            self.progress = (read, len(todo))
        published = 0.0
        with _Batches(dbs) as batches:
            for group, res in batches.run("rows"):
                noted(res)
                for p, got in res["rows"].items():
                    self._file_rows[p] = (sigs[p], [r | {"source_file": p} for r in got])
                read += len(group)
                self.progress = (read, len(todo))
                # the first build: what is read so far is served already (each copy of the
                # rows costs the reading, so at most twice a second; the page asks once)
                if not self.ready and time.monotonic() - published > 0.5:
                    self._publish(paths, busy)
                    published = time.monotonic()
            self._finish(paths, spools, problems, t0)
            # the search text, once every row is shown
            need = [p for p in paths if p in self._file_rows and _is_db(p)
                    and any(r.get("_text") is None for r in self._file_rows[p][1])]
            self.search_progress = (0, len(need))
            self.search_ready = not need
            if todo or folded:
                self._save(paths, sigs)
            done = 0
            for group, res in batches.run("text", need):
                noted(res)
                with self._lock:
                    for p, by_sid in res["text"].items():
                        for r in self._file_rows[p][1]:
                            r["_text"] = (by_sid.get(r["session_id"]) or "").lower()
                            shown = self.by_key.get(self._key(p, r["session_id"]))
                            if shown is not None:
                                shown["_text"] = r["_text"]
                done += len(group)
                self.search_progress = (done, len(need))
            if need:
                self._save(paths, sigs)
        with self._lock:
            self.search_ready = True
            self.problems = list(dict.fromkeys(problems))

    def _finish(self, paths: list[str], spools: list[tuple[str, str]], problems: list[str],
                t0: float) -> None:
        """Serve every file's rows and the sessions being recorded (from their spools)."""
        rows = [dict(r) for p in paths if p in self._file_rows for r in self._file_rows[p][1]]
        live_rows = []
        for sp, db in spools:
            key = "live." + str(self._file_no.setdefault(os.path.abspath(sp), len(self._file_no)))
            lv = self._live.get(key) or Live(sp, db)
            self._live[key] = lv
            lv.poll()
            sid = lv.meta.get("session_id")
            if not sid:
                continue
            live_rows.append({
                "key": key, "session_id": sid, "name": lv.meta.get("name"),
                "protocol": (lv.conv.protocol if lv.conv else None) or lv.meta.get("protocol"),
                "agent": agent_of(lv.meta.get("command")), "started_at": None,
                "duration_ms": None, "turns": None, "tokens": None, "tool_calls": None,
                "errors": None, "anomalies": None, "tags": lv.meta.get("tags"),
                "source_file": db, "live": not lv.ended, "_text": ""})
        live_ids = {r["session_id"] for r in live_rows}
        out = []
        for r in rows:
            if r["session_id"] in live_ids:
                continue
            r["key"] = self._key(r["source_file"], r["session_id"])
            out.append(r)
        out += live_rows
        with self._lock:
            self.rows = out
            self.by_key = {r["key"]: r for r in out}
            self.problems = list(dict.fromkeys(problems))
            self.ready = True
            self.built_at = time.monotonic()
            self.build_ms = (time.perf_counter() - t0) * 1000
            self._signature = self._sig(paths, spools)

    def _publish(self, paths: list[str], busy: set[str]) -> None:
        """Serve the rows read so far. A file being recorded is left out: its session is shown
        from the spool once the build ends, under its live key."""
        part = [dict(r) for p in paths if p in self._file_rows and os.path.abspath(p) not in busy
                for r in self._file_rows[p][1]]
        for r in part:
            r["key"] = self._key(r["source_file"], r["session_id"])
        with self._lock:
            self.rows = part
            self.by_key = {r["key"]: r for r in part}

    def _fold(self, disk: dict[str, dict]) -> bool:
        from .recindex import log_path, take_log

        got = take_log(log_path(self.cache_path))
        disk |= got
        return bool(got)

    def _save(self, paths: list[str], sigs: dict[str, tuple]) -> None:
        if not self.cache_path:
            return
        disk = self._disk or {}
        here = {os.path.abspath(p): p for p in paths if p in self._file_rows}
        keep = {k: v for k, v in disk.items() if k not in here and os.path.exists(k)}
        for a, p in here.items():
            keep[a] = {"sig": list(self._file_rows[p][0]), "rows": self._file_rows[p][1]}
        self._disk = keep
        save_index_cache(self.cache_path, keep)

    def _sig(self, paths: list[str], spools: list) -> tuple:
        def mt(p: str) -> float:
            try:
                return os.path.getmtime(p)
            except OSError:
                return 0.0
        return tuple((p, mt(p)) for p in paths) + tuple(s for s, _ in spools)

    def stale(self) -> bool:
        """Whether files or live recordings came or went since the index was built."""
        paths = self._paths()
        return self._sig(paths, self._spools(paths)) != self._signature

    def page(self, q: str = "", protocol: str = "", tag: str = "", errors: bool = False,
             day_from: str = "", day_to: str = "", sort: str = "started_at", desc: bool = True,
             offset: int = 0, limit: int = 100) -> dict:
        with self._lock:
            rows = self.rows
        # words must all occur; "a quoted phrase" as it is
        words = [a or b for a, b in re.findall(r'"([^"]+)"|(\S+)', q.lower())]
        sel = []
        for r in rows:
            if protocol and r.get("protocol") != protocol:
                continue
            if errors and not (r.get("errors") or r.get("anomalies")):
                continue
            day = (r.get("started_at") or "")[:10]
            if day_from and day and day < day_from or day_to and day and day > day_to:
                continue
            if tag and not _has_tag(r.get("tags"), tag):
                continue
            if words:
                hay = ((r.get("_text") or "") + " " + (r.get("name") or "").lower() + " "
                       + r["session_id"].lower())
                if not all(w in hay for w in words):
                    continue
            sel.append(r)
        key = sort if sort in SORTABLE else "started_at"
        present = [r for r in sel if r.get(key) is not None]
        missing = [r for r in sel if r.get(key) is None]
        present.sort(key=lambda r: r[key] if not isinstance(r[key], str) else r[key].lower(),
                     reverse=desc)
        sel = present + missing
        limit = max(1, min(limit, 1000))
        protocols = sorted({r["protocol"] for r in rows if r.get("protocol")})
        return {"ready": self.ready, "total": len(rows), "matched": len(sel),
                "progress": {"read": self.progress[0], "of": self.progress[1]},
                "search": {"ready": self.search_ready, "read": self.search_progress[0],
                           "of": self.search_progress[1]},
                "offset": offset, "build_ms": round(self.build_ms, 1),
                "rows": [{k: r.get(k) for k in INDEX_COLUMNS} for r in sel[offset:offset + limit]],
                "protocols": protocols, "problems": self.problems,
                "reports": [os.path.basename(p) for p in self.report_paths]}

    # -- one session -----------------------------------------------------------------------------
    def row(self, key: str) -> dict:
        with self._lock:
            r = self.by_key.get(key)
            if r is None:  # a session id alone, or an older link by file position ("0.<id>")
                sid = re.sub(r"^\d+\.", "", key)
                found = [v for v in self.by_key.values() if v.get("session_id") in (key, sid)]
                r = found[0] if len(found) == 1 else None
        if r is None:
            raise KeyError(key)
        return r

    @contextlib.contextmanager
    def _open(self, r: dict) -> Iterator[Any]:
        from ..sources import open_workspace

        # wire-ui closing interrupts its statements and waits for it to be closed
        with closing.using_duckdb(), open_workspace([r["source_file"]]) as ws, \
                closing.interruptible(ws.con):
            yield ws

    def session(self, key: str) -> dict:
        """The header, cards, timeline and token chart (the conversation: `items`)."""
        if key.startswith("live."):
            return self._live_session(key)
        with self._lock:
            data = self._data_cache.get(key)
        if data is None:
            r = self.row(key)
            if (r.get("frame_count") or 0) > VIEW_MAX:
                data = self._big_session(r)
            else:
                with self._open(r) as ws:
                    data, _ = session_data(ws, r["session_id"])
            with self._lock:
                self._data_cache[key] = data
                while len(self._data_cache) > 8:
                    self._data_cache.popitem(last=False)
        return {"key": key, "live": False} | data

    def _big_session(self, r: dict) -> dict:
        """The header and frame count of a session too big for the derived views (the cards,
        timeline and token chart read every frame through them): bounded in time and memory,
        and the page says what it left out. The conversation is paged as for any session."""
        from ..sources import open_workspace

        with open_workspace([r["source_file"]], materialize=False, views=False) as ws, \
                closing.interruptible(ws.con):
            srow = _rows(ws.con, "SELECT * FROM sessions WHERE session_id = $sid",
                         {"sid": r["session_id"]})[0]
            frames = ws.con.execute("SELECT count(*) FROM frames WHERE session_id = ?",
                                    [r["session_id"]]).fetchall()[0][0]
        head = {k: _json_safe(v) for k, v in srow.items()}
        head["command"] = _parsed(head.get("command"))
        head["tags"] = _parsed(head.get("tags"))
        head["agent"] = agent_of(head["command"])
        return {"session": head, "counts": {"frames": frames}, "spans": [], "tokens": [],
                "note": f"{frames:,} frames: the cards, timeline and token chart are left out "
                        f"above {VIEW_MAX:,} (wire-stats and wire-query give the numbers); the "
                        "conversation below is read a page at a time"}

    def items(self, key: str, start: int, n: int = PAGE) -> dict:
        if key.startswith("live."):
            lv = self._live_get(key)
            lv.poll()
            conv_items = lv.conv.items if lv.conv else []
            return {"items": conv_items[start:start + PAGE], "items_total": len(conv_items),
                    "more": False, "live": not lv.ended, "frames": len(lv.frames)}
        with self._lock:
            cur = self._conv_cache.get(key)
            if cur is not None:
                self._conv_cache.move_to_end(key)
        if cur is None:
            from .conversation import Conversation

            r = self.row(key)
            cur = Cursor(Conversation(r.get("mono_start_ns"), r.get("protocol")),
                         r["source_file"], r["session_id"])
            with self._lock:
                cur = self._conv_cache.setdefault(key, cur)
                while len(self._conv_cache) > 4:
                    self._conv_cache.popitem(last=False)
        return cur.page(start, max(1, min(n, PAGE))) | {"live": False}

    def _live_get(self, key: str) -> Live:
        lv = self._live.get(key)
        if lv is None:
            raise KeyError(key)
        return lv

    def _live_session(self, key: str) -> dict:
        lv = self._live_get(key)
        lv.poll()
        items = lv.conv.items if lv.conv else []
        meta = lv.meta
        srow = {"session_id": meta.get("session_id"), "name": meta.get("name"),
                "protocol": (lv.conv.protocol if lv.conv else None) or meta.get("protocol"),
                "command": meta.get("command"), "cwd": meta.get("cwd"), "tags": meta.get("tags"),
                "agent": agent_of(meta.get("command")), "source_file": lv.db,
                "started_at": None, "source": "live spool"}
        return {"key": key, "live": not lv.ended, "session": srow, "counts": {"frames": len(lv.frames)},
                "spans": [], "tokens": [], "items": items[:PAGE], "items_total": len(items),
                "more": False}

    # -- frames ----------------------------------------------------------------------------------
    def frames(self, key: str, lo: int, hi: int) -> list[dict]:
        hi = min(hi, lo + 500)
        if key.startswith("live."):
            lv = self._live_get(key)
            with lv.lock:
                picked = [f for f in lv.frames if lo - 1 <= f.seq <= hi]
            return frame_dicts(picked, lo)
        r = self.row(key)
        # the file alone, without the analysis views: a page of frames of a 10^7-frame session
        # reads the row groups that hold it
        with frames_of(r["source_file"]) as (con, table):
            got = self._frames_in(con, table, r, f"seq BETWEEN {int(lo) - 1} AND {int(hi)}", lo)
        return self._mark(key, got)

    def _violations(self, key: str) -> dict[int, list[str]]:
        """seq -> the conformance findings of that frame (`wire-check`'s, for the inspector)."""
        with self._lock:
            found = self._check_cache.get(key)
        if found is not None:
            return found
        from wire_recorder.recorder.model import COLUMNS

        from ..conformance import check_frames
        from ..sources import open_workspace

        r = self.row(key)
        out: dict[int, list[str]] = {}
        with open_workspace([r["source_file"]], materialize=False, views=False) as ws, \
                closing.interruptible(ws.con):
            srow = _rows(ws.con, "SELECT * FROM sessions WHERE session_id = $sid",
                         {"sid": r["session_id"]})[0]
            # the first CHECK_MAX frames (as wire-check): a bound on seq, found over seq alone
            bound = ws.con.execute("SELECT seq FROM frames WHERE session_id = ? ORDER BY seq "
                                   f"LIMIT 1 OFFSET {CHECK_MAX - 1}",
                                   [r["session_id"]]).fetchall()
            upto = f" AND seq <= {int(bound[0][0])}" if bound else ""
            cur = ws.con.execute(f"SELECT {', '.join(COLUMNS)} FROM frames WHERE session_id = ? "
                                 f"AND direction IN ('c2a', 'a2c'){upto} ORDER BY seq",
                                 [r["session_id"]])

            def stream() -> Iterator[Frame]:
                while rows := cur.fetchmany(CHUNK):
                    yield from (Frame(*x) for x in rows)

            try:
                for v in check_frames(srow, stream()):
                    out.setdefault(v.seq, []).append(f"{v.severity}: {v.message}")
            except UserError:  # the protocol's model needs an SDK not installed here
                out = {}
        with self._lock:
            self._check_cache[key] = out
        return out

    def _mark(self, key: str, frames: list[dict]) -> list[dict]:
        if not key.startswith("live."):
            found = self._violations(key)
            for f in frames:
                f["conformance"] = found.get(f["seq"])
        return frames

    def related(self, key: str, seq: int) -> list[dict]:
        if key.startswith("live."):
            return self.frames(key, seq, seq)
        r = self.row(key)
        from ..sources import open_workspace

        # the views computed for this one query (not materialised over the whole file)
        with open_workspace([r["source_file"]], materialize=False) as ws, \
                closing.interruptible(ws.con):
            seqs = [x[0] for x in ws.con.execute(sql("related"), {"sid": r["session_id"],
                                                                   "seq": seq}).fetchall()]
            if not seqs:
                return []
            got = self._frames_in(ws.con, "frames", r,
                                  f"seq IN ({', '.join(str(int(s)) for s in seqs)})", None)
        return self._mark(key, got)

    def _frames_in(self, con: Any, table: str, r: dict, where: str,
                   lo: int | None) -> list[dict]:
        from wire_recorder.recorder.model import COLUMNS
        from wire_recorder.recorder.store import resolve_blobs

        rows = con.execute(f"SELECT {', '.join(COLUMNS)} FROM {table} WHERE session_id = ? "
                           f"AND {where} ORDER BY seq", [r["session_id"]]).fetchall()
        frames = [Frame(*x) for x in rows]
        if any(f.raw is None and f.blob_offset is not None for f in frames):
            resolve_blobs(frames, r["source_file"])
        if lo is None:  # scattered frames: each one's gap is to the frame just before it
            prev = {x[0]: x[1] for x in con.execute(
                f"SELECT seq + 1, mono_ns FROM {table} WHERE session_id = ? AND seq IN "
                f"({', '.join(str(f.seq - 1) for f in frames) or 'NULL'})",
                [r["session_id"]]).fetchall()}
            return frame_dicts(frames, None, prev)
        return frame_dicts(frames, lo)

    def _find_recorded(self, key: str, divs: list[dict]) -> None:
        """Give each divergence the seq of the recorded frame it names (`recorded_seq`)."""
        r = self.row(key)
        try:
            with self._open(r) as ws:
                for d in divs:
                    exp = d.get("expected")
                    if not isinstance(exp, dict) or not isinstance(exp.get("method"), str):
                        continue
                    params = exp.get("params")
                    kind = params.get("type") if isinstance(params, dict) else None
                    turn, step = _where(d.get("where"))
                    hit = ws.con.execute(sql("recorded_frame"), {
                        "sid": r["session_id"], "turn": turn, "step": step,
                        "method": exp["method"],
                        "type": kind if isinstance(kind, str) else None}).fetchone()
                    if hit:
                        d["recorded_seq"] = hit[0]
        except UserError:
            return

    # -- replay reports --------------------------------------------------------------------------
    def report(self, n: int) -> dict:
        path = self.report_paths[n]
        try:
            with open(path, "rb") as fh:
                rep = orjson.loads(fh.read())
        except (OSError, orjson.JSONDecodeError) as e:
            raise UserError(f"{path}: not a wire-replay --json report ({e})") from None
        if not isinstance(rep, dict) or "divergences" not in rep:
            raise UserError(f"{path}: not a wire-replay --json report")
        sid = rep.get("session_id")
        # a report opened while the first index build runs (wire-ui's start) links to its
        # recorded session once that file is read, not never
        deadline = time.monotonic() + REPORT_WAITS_FOR_INDEX_S
        while ((key := next((r["key"] for r in self.rows if r["session_id"] == sid), None))
               is None and not self.ready and time.monotonic() < deadline):
            time.sleep(0.05)
        divs = rep.get("divergences") or []
        first = rep.get("first_divergence")
        order = ([first] if first else []) + [d for d in divs if d != first]
        if key is not None:
            self._find_recorded(key, order)
        return {"path": path, "name": os.path.basename(path), "ok": rep.get("ok"),
                "session_id": sid, "session_name": rep.get("name"), "key": key,
                "recording": rep.get("recording"), "mode": rep.get("mode"),
                "stopped": rep.get("stopped"), "stats": rep.get("stats"),
                "divergences": order}


CACHE_FORMAT = "wire-ui index cache 2"  # zlib over JSON: search text is most of it
_NUMBERS = ("frame_count", "mono_start_ns", "duration_ms", "turns", "tokens", "tool_calls",
            "errors", "anomalies")
_CACHED_KEYS = {"session_id", "name", "protocol", "protocol_version", "cwd", "started_at",
                "ended_at", "tags", "source", "source_file", "agent", "live", "_text", *_NUMBERS}


def index_cache_path() -> str:
    """Where the index rows of files already read are kept between starts."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "wire-recorder", "ui-index.json.z")


def load_index_cache(path: str | None) -> dict[str, dict]:
    """abspath -> {"sig", "rows"} from the cache file; anything unexpected: an empty cache (it
    is rebuilt). Only index rows come from it, and the page escapes them like any value."""
    if not path:
        return {}
    try:
        with open(path, "rb") as fh:
            doc = orjson.loads(zlib.decompress(fh.read()))
        if not isinstance(doc, dict) or doc.get("format") != CACHE_FORMAT:
            return {}
        return valid_files(doc["files"]) or {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, zlib.error):
        return {}


def valid_files(files: Any) -> dict[str, dict] | None:
    """abspath -> {"sig", "rows"} of an untrusted {abspath: {"sig", "rows"}} (the cache's, an
    entry the loader logged), or None when anything in it is not what the cache holds."""
    try:
        out: dict[str, dict] = {}
        for k, v in files.items():
            sig, rows = v["sig"], v["rows"]
            if not (isinstance(k, str) and isinstance(sig, list) and len(sig) == 4
                    and isinstance(rows, list)):
                return None
            for r in rows:
                if not (isinstance(r, dict) and isinstance(r.get("session_id"), str)
                        and isinstance(r.get("_text"), str | None) and r.keys() <= _CACHED_KEYS
                        and all(isinstance(r.get(k), int | float | None) for k in _NUMBERS)):
                    return None
            out[k] = {"sig": sig, "rows": rows}
        return out
    except (KeyError, TypeError, AttributeError):
        return None


def save_index_cache(path: str, files_rows: dict[str, dict]) -> None:
    """Write the cache privately (0600) and atomically; a failure only costs the next start."""
    d = os.path.dirname(path)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        body = zlib.compress(orjson.dumps({"format": CACHE_FORMAT, "files": files_rows},
                                          default=str), 1)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(body)
        os.replace(tmp, path)
    except (OSError, TypeError):  # TypeError: orjson's, a value it cannot write
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _is_db(path: str) -> bool:
    """A `.db` recording (read by the cold index), not a transcript or a Parquet export folder
    (read through a workspace)."""
    return not path.endswith(".jsonl") and not os.path.isdir(path)


def _file_sig(path: str) -> tuple:
    """What changes when a recording does: its (and its WAL's) size and time."""
    out: list = []
    for p in (path, path + ".wal"):
        try:
            st = os.stat(p)
            out += [st.st_size, st.st_mtime_ns]
        except OSError:
            out += [None, None]
    return tuple(out)


def _where(where: Any) -> tuple[int | None, int | None]:
    m = re.search(r"turn (\d+)(?:, step (\d+))?", where if isinstance(where, str) else "")
    return (int(m.group(1)), int(m.group(2)) if m.group(2) else None) if m else (None, None)


def _has_tag(tags: Any, want: str) -> bool:
    if isinstance(tags, dict):
        k, _, v = want.partition("=")
        return k in tags and (not v or str(tags[k]) == v)
    if isinstance(tags, list):
        return want in [str(t) for t in tags]
    return False


def frame_dicts(frames: list[Frame], lo: int | None, prev: dict | None = None) -> list[dict]:
    out = []
    last = None
    for f in frames:
        if lo is not None and f.seq < lo:
            last = f.mono_ns
            continue
        before = last if lo is not None else (prev or {}).get(f.seq)
        raw = bytes(f.raw) if f.raw is not None else None
        out.append({
            "seq": f.seq, "ts": _json_safe(f.ts), "mono_ns": f.mono_ns,
            "gap_ms": None if before is None or f.mono_ns is None else (f.mono_ns - before) / 1e6,
            "direction": f.direction, "kind": f.kind, "method": f.method, "rpc_id": f.rpc_id,
            "msg_type": f.msg_type, "byte_len": f.byte_len, "anomaly": f.anomaly,
            "parse_error": f.parse_error, "known": f.known,
            "raw_b64": base64.b64encode(raw).decode() if raw is not None else None,
        })
        last = f.mono_ns
    return out
