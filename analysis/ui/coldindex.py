"""The index's rows and search text of many `.db` recordings, read a batch at a time.

wire-proxy writes a file per session, so a data folder holds thousands of small files. Each
file costs an ATTACH (~1 ms); what made the first start slow was everything done once per file
on top of it: the check that `meta`, `frames` and `sessions` are base tables (a scan of every
function DuckDB knows, ~11-18 ms) and a workspace's analysis views. Here a batch of files is
attached to one connection, checked with one catalog scan, locked, and read:

* rows: from the session's stored summary (`analysis.summary`, written by the loader) when the
  file has a valid one; otherwise the batch's base tables are copied into memory (session ids
  made unique per file), the analysis views installed once over the copy and the same summary
  statement run, so turns, tokens, tool calls and errors keep their one definition;
* search text: the "text", "think" and "user_input" strings of the frames, in order, capped
  (read in a second pass, after every row is shown).

`read_files` runs in worker processes (both cores: `Workers`, `python -m` this module, batches
in and results out as JSON lines) and returns plain data; nothing in a file is executed and every
file is attached read-only.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
from typing import Any

import orjson

from wire_recorder.recorder.store import sql_str

from . import closing

TEXT_CAP = 20000  # characters of search text per session
# ...of at most PIECE_CAP from each frame: the heap below holds cap + 1 pieces, and whole pieces
# of 64 KiB frames took the loader's after-close index step to 1.9 GB (20 KB frames; 5.9 GB
# with 64 KiB ones). With it, a long message no longer hides the ones after it from the search.
PIECE_CAP = 2000
# Strings are looked for in each frame's first HEAD_CHARS characters (a string cut there is
# taken up to the cut): the regular expression over whole 200 KB payloads took the after-close
# index step 5.1 s and 964 MB for 2,684 such frames, over their heads 1.5 s and 520 MB (DuckDB's
# scan of the payloads themselves: 460 MB). Its string is `[^"\\]*(?:\\.[^"\\]*)*`, not
# `(?:[^"\\]|\\.)*`: over 8,000-character heads 0.5 s instead of 2.8 for 6,710 frames of 20 KB.
HEAD_CHARS = 4 * PIECE_CAP
# The pieces of the first cap + 1 frames with text in seq order, joined by a space: as many
# characters as all of them joined would give under the cap, but min_by keeps only those (a
# bounded heap) where string_agg(... ORDER BY seq) sorted every piece of the session first (a
# 200k-frame session: 167 MB more in the loader's after-close index step, measured). Which frames
# those are is found first, by `contains` and a heap of their seqs, so the regular expression runs
# on them only (200k small frames 0.33 -> 0.10 s, 65k of 2 KiB 1.6 -> 0.8 s; the CTEs are inlined
# where used: materialised, they held every frame's head).
_TEXT_SQL = """WITH heads AS NOT MATERIALIZED (
    SELECT session_id, seq, left(payload, {head}) AS head FROM {frames}
    WHERE direction IN ('c2a', 'a2c')),
said AS NOT MATERIALIZED (
    SELECT session_id, seq, head FROM heads
    WHERE contains(head, '"text":"') OR contains(head, '"think":"')
        OR contains(head, '"user_input":"')),
cut AS NOT MATERIALIZED (
    SELECT session_id, list_max(min_by(seq, seq, {cap} + 1)) AS last FROM said GROUP BY ALL)
SELECT said.session_id, left(array_to_string(min_by(left(array_to_string(regexp_extract_all(
    head, '"(?:text|think|user_input)":"([^"\\\\]*(?:\\\\.[^"\\\\]*)*)', 1), ''), {piece}),
    seq, {cap} + 1), ' '), {cap}) AS said
FROM said JOIN cut ON said.session_id = cut.session_id AND said.seq <= cut.last
GROUP BY ALL"""


def unescape(s: str | None) -> str:
    if not s:
        return ""
    return s.replace("\\n", " ").replace('\\"', '"').replace("\\\\", "\\")


def text_sql(frames: str) -> str:
    """Per session of `frames` (a table expression): the text search looks through, raw."""
    return _TEXT_SQL.format(cap=TEXT_CAP, piece=PIECE_CAP, head=HEAD_CHARS, frames=frames)


def _attach(con: Any, paths: list[str], problems: dict[str, str], busy: list[str]) -> dict[str, str]:
    """alias -> path of the files attached read-only; the others are in problems or busy."""
    import duckdb

    from wire_recorder.recorder.errors import UserError
    from wire_recorder.recorder.store import damaged, is_lock_error

    from ..sources import check_file

    out: dict[str, str] = {}
    for i, p in enumerate(paths):
        try:
            check_file(p)
        except UserError as e:
            problems[p] = e.one_line()
            continue
        alias = f"rec{i}"
        try:
            con.execute(f"ATTACH {sql_str(p)} AS {alias} (READ_ONLY)")
        except duckdb.Error as e:
            if is_lock_error(str(e)):
                busy.append(p)
            else:
                problems[p] = damaged(p, e).one_line()
            continue
        out[alias] = p
    return out


def _check(con: Any, attached: dict[str, str],
           problems: dict[str, str]) -> tuple[dict[str, int], set[str]]:
    """alias -> schema version of the attached files that are recordings, and the aliases of
    those with stored summaries. One catalog scan for the batch refuses a file whose meta, frames or sessions is a view or a macro (its own SQL
    would run when read), as recorder.store.check_base_tables does for one file."""
    import duckdb

    from wire_recorder.recorder.errors import NotARecording, UserError
    from wire_recorder.recorder.store import RECORDER_TABLES, damaged, planted, planted_message

    from ..sources import check_version
    from ..summary import TABLE

    if not attached:
        return {}, set()
    refused: set[str] = set()
    for row in planted(con, list(attached)):
        if row[0] not in refused:
            refused.add(row[0])
            problems[attached[row[0]]] = NotARecording(
                planted_message(attached[row[0]], row)).one_line()
    dbs = ", ".join(sql_str(a) for a in attached)
    names = ", ".join(sql_str(n) for n in RECORDER_TABLES)
    have = {(d, t) for d, t in con.execute(
        f"SELECT database_name, table_name FROM duckdb_tables() WHERE database_name IN ({dbs}) "
        f"AND schema_name = 'main' AND table_name IN ({names}, {sql_str(TABLE)})").fetchall()}
    out: dict[str, int] = {}
    tables = []
    for alias, p in attached.items():
        if alias in refused:
            continue
        if not {(alias, "meta"), (alias, "frames"), (alias, "sessions")} <= have:
            problems[p] = NotARecording(
                f"{p} is a DuckDB file but not a wire-recorder recording").one_line()
            continue
        tables.append(alias)

    def versions(aliases: list[str]) -> dict[str, Any]:
        return dict(con.execute(" UNION ALL ".join(
            f"SELECT '{a}', value FROM {a}.meta WHERE key = 'schema_version'" for a in aliases
        )).fetchall())

    found: dict[str, Any] = {}
    for i in range(0, len(tables), 25):  # a statement for 25 files: a fifth of the cost of 25
        try:
            found |= versions(tables[i:i + 25])
        except duckdb.Error:
            for alias in tables[i:i + 25]:
                try:
                    found |= versions([alias])
                except duckdb.Error as e:
                    problems[attached[alias]] = damaged(attached[alias], e).one_line()
    for alias in tables:
        p = attached[alias]
        if p in problems:
            continue
        value = found.get(alias)
        try:
            version = int(value) if value is not None else None
        except (TypeError, ValueError):
            version = None
        try:
            out[alias] = check_version(p, version)
        except UserError as e:
            problems[p] = e.one_line()
    return out, {a for a in out if (a, TABLE) in have}


# an index row: the session's own columns and the numbers of its summary (analysis.summary: the
# statement the loader stores its result of, so stored and computed rows agree)
_ROW_SQL = """SELECT x.*, (epoch(x.ended_at) - epoch(x.started_at)) * 1000 AS duration_ms,
    v.turns, coalesce(v.input_tokens, 0) + coalesce(v.output_tokens, 0) AS tokens,
    v.tool_calls, v.errors, v.session_id IS NOT NULL AS stored
FROM ({sessions}) x LEFT JOIN ({summaries}) v USING (session_id)
ORDER BY x.started_at, x.session_id"""


def dicts(cur: Any) -> list[dict]:
    """The rows of an executed statement as dicts by column name."""
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, t, strict=True)) for t in cur.fetchall()]


def _stored_rows(con: Any, files: list[tuple[str, int]], paths: dict[str, str]) -> dict[str, list[dict]]:
    """Index rows of attached files (alias, schema version) from their stored summaries, each
    with `stored`: whether its summary is valid (`summary.valid_rows_sql`'s rule: this layout,
    and still the session's frame count and highest seq). Three plain reads, each a UNION ALL
    over the files: a join of them costs DuckDB ~4 ms to plan, more than the reads, and one
    statement for ten files costs about what two statements for one do."""
    from wire_recorder.recorder.model import SESSIONS

    from ..summary import TABLE, VERSION

    def union(part: str) -> str:
        return " UNION ALL ".join(part.format(a=a, v=SESSIONS.select_list(v), p=sql_str(paths[a]))
                                  for a, v in files)

    srows = dicts(con.execute(union("SELECT '{a}' AS _alias, {v}, {p} AS source_file "
                                     "FROM {a}.sessions")))
    frames = {(r[0], r[1]): (r[2], r[3]) for r in con.execute(union(
        "SELECT '{a}', session_id, count(*), max(seq) FROM {a}.frames GROUP BY session_id"
    )).fetchall()}
    sums = {(r[0], r[1]): r[2:] for r in con.execute(union(
        "SELECT '{a}', session_id, version, frame_rows, max_seq, turns, input_tokens, "
        f"output_tokens, tool_calls, errors FROM {{a}}.main.{TABLE}")).fetchall()}
    out: dict[str, list[dict]] = {paths[a]: [] for a, _ in files}
    srows.sort(key=lambda x: (x["started_at"] is None, x["started_at"] or 0, x["session_id"]))
    for x in srows:
        key = (x.pop("_alias"), x["session_id"])
        got = sums.get(key)
        n, m = frames.get(key, (0, None))
        ok = got is not None and got[0] == VERSION and got[1] == n and got[2] == m
        start: Any = x.get("started_at")
        end: Any = x.get("ended_at")
        dur = ((end - start).total_seconds() * 1000
               if hasattr(start, "hour") and hasattr(end, "hour") else None)
        row = x | {"duration_ms": dur, "stored": ok, "turns": None, "tokens": None,
                   "tool_calls": None, "errors": None}
        if ok and got is not None:
            row |= {"turns": got[3], "tokens": (got[4] or 0) + (got[5] or 0),
                    "tool_calls": got[6], "errors": got[7]}
        out[paths[key[0]]].append(row)
    return out


def summary_rows(con: Any, sessions: str = "SELECT * FROM sessions") -> list[dict]:
    """Index rows of a connection whose analysis views are installed, computed."""
    from ..summary import SCOPE, summary_sql

    con.execute(f"CREATE OR REPLACE TEMP TABLE {SCOPE} AS SELECT DISTINCT session_id "
                f"FROM ({sessions})")
    return dicts(con.execute(_ROW_SQL.format(sessions=sessions, summaries=summary_sql())))


def _rows_from_views(con: Any, versions: dict[str, int], attached: dict[str, str],
                     problems: dict[str, str]) -> dict[str, list[dict]]:
    """Index rows of files without a stored summary: their base tables copied into memory, the
    analysis views made once over the copy, the summary statement run once."""
    import duckdb

    from wire_recorder.recorder.model import FRAMES, SESSIONS
    from wire_recorder.recorder.store import damaged

    from ..summary import _compute

    def computed(frames_from: str, sessions_from: str) -> list[dict]:
        """The summary's own views over these tables (analysis.summary: one definition)."""
        ids = [r[0] for r in con.execute(f"SELECT DISTINCT session_id FROM {sessions_from}")
               .fetchall()]
        if not ids:
            return []
        _compute(con, frames_from, sessions_from, ids, "TEMP TABLE ix_sum")
        return [r | {"stored": False} for r in dicts(con.execute(_ROW_SQL.format(
            sessions=f"SELECT * FROM {sessions_from}", summaries="SELECT * FROM ix_sum")))]

    if len(versions) == 1:  # a file alone (a big one is): read in place
        (alias, version), = versions.items()
        return {attached[alias]: computed(
            f"(SELECT {FRAMES.select_list(version)} FROM {alias}.frames)",
            f"(SELECT {SESSIONS.select_list(version)}, {sql_str(attached[alias])} AS source_file "
            f"FROM {alias}.sessions)")}
    con.execute(FRAMES.create_current("ix_frames"))
    con.execute(SESSIONS.create_current("ix_sessions", "source_file VARCHAR")
                .replace(" PRIMARY KEY", ""))
    # a session id made unique per file: two files may hold the same session (a copy)
    def frames(alias: str, version: int) -> str:
        return (f"SELECT * REPLACE ('{alias}:' || session_id AS session_id) FROM "
                f"(SELECT {FRAMES.select_list(version)} FROM {alias}.frames)")

    def sessions(alias: str, version: int) -> str:
        return (f"SELECT * REPLACE ('{alias}:' || session_id AS session_id) FROM "
                f"(SELECT {SESSIONS.select_list(version)}, {sql_str(attached[alias])} "
                f"FROM {alias}.sessions)")

    def copy(part: list[tuple[str, int]]) -> None:
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute("INSERT INTO ix_frames " + " UNION ALL ".join(frames(*x) for x in part))
            con.execute("INSERT INTO ix_sessions " + " UNION ALL ".join(sessions(*x) for x in part))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    items = list(versions.items())
    for i in range(0, len(items), 10):  # ten a statement: half the cost of one, a 100 plans slowly
        closing.check()
        try:
            copy(items[i:i + 10])
        except duckdb.Error:
            closing.check()
            for alias, version in items[i:i + 10]:  # the one that fails is left out
                try:
                    copy([(alias, version)])
                except duckdb.Error as e:
                    problems[attached[alias]] = damaged(attached[alias], e).one_line()
    out: dict[str, list[dict]] = {}
    for r in computed("ix_frames", "ix_sessions"):
        alias, _, sid = r["session_id"].partition(":")
        r["session_id"] = sid
        out.setdefault(attached[alias], []).append(r)
    return out


def read_files(paths: list[str], what: str = "rows") -> dict[str, Any]:
    """One batch of `.db` files. what="rows": {"rows": {path: [index row]}} (`data.index_row`,
    JSON-safe, search text not read yet); what="text": {"text": {path: {session_id: text}}};
    what="all": both (the rows with their search text). Each: "problems" {path: one line} and
    "busy" [paths another process holds (a recording being made)]."""
    from .data import index_row

    got = _read_files(paths, what)
    got.setdefault("text", {})
    said = got["text"] if what == "all" else {}
    got["rows"] = {p: [index_row(r, said[p].get(r["session_id"], "") if p in said else None)
                       for r in rs] for p, rs in got.get("rows", {}).items()}
    return got


def _texts(con: Any, versions: dict[str, int], attached: dict[str, str],
           problems: dict[str, str]) -> dict[str, dict[str, str]]:
    """path -> {session_id: search text} of the attached files (ten a statement)."""
    import duckdb

    from wire_recorder.recorder.model import FRAMES
    from wire_recorder.recorder.store import damaged

    text: dict[str, dict[str, str]] = {}

    def said(part: list[tuple[str, int]]) -> list[tuple]:
        return con.execute(" UNION ALL ".join(
            f"SELECT '{a}', * FROM ({text_sql(f'(SELECT {FRAMES.select_list(v)} FROM {a}.frames)')})"
            for a, v in part)).fetchall()

    items = list(versions.items())
    for i in range(0, len(items), 10):
        closing.check()
        try:
            got = said(items[i:i + 10])
        except duckdb.Error:
            closing.check()  # interrupted: not a file to read alone
            got = []
            for one in items[i:i + 10]:
                try:
                    got += said([one])
                except duckdb.Error as e:
                    problems[attached[one[0]]] = damaged(attached[one[0]], e).one_line()
        for a, _ in items[i:i + 10]:
            if attached[a] not in problems:
                text.setdefault(attached[a], {})
        for a, sid, t in got:
            text[attached[a]][sid] = unescape(t)
    return text


def _rows(con: Any, versions: dict[str, int], stored: set[str], attached: dict[str, str],
          problems: dict[str, str]) -> dict[str, list[dict]]:
    """path -> index rows of the attached files: from stored summaries where every session of
    the file has a valid one, else computed through the summary's views."""
    import duckdb

    rows: dict[str, list[dict]] = {}
    need_views: dict[str, int] = {a: v for a, v in versions.items() if a not in stored}
    have = [(a, v) for a, v in versions.items() if a in stored]
    for i in range(0, len(have), 10):
        part = have[i:i + 10]
        closing.check()
        try:
            made = _stored_rows(con, part, attached)
        except duckdb.Error:  # one of them: read each alone
            closing.check()
            made = {}
            for one in part:
                try:
                    made |= _stored_rows(con, [one], attached)
                except duckdb.Error:  # a summary layout this version cannot read: computed
                    made[attached[one[0]]] = [{"stored": False}]
        for a, v in part:
            if all(r["stored"] for r in made[attached[a]]):
                rows[attached[a]] = made[attached[a]]
            else:
                need_views[a] = v
    if need_views:
        rows |= _rows_from_views(con, need_views, attached, problems)
        for alias in need_views:
            if attached[alias] not in problems:
                rows.setdefault(attached[alias], [])
    return rows


def _read_files(paths: list[str], what: str) -> dict[str, Any]:
    import duckdb

    from ..sources import bound_memory, lock, remove_spill

    problems: dict[str, str] = {}
    busy: list[str] = []
    out: dict[str, Any] = {"problems": problems, "busy": busy}
    with closing.using_duckdb():  # wire-ui closing interrupts it and waits for the close
        con = duckdb.connect(":memory:", config={"threads": 1})  # the processes use the cores
        spill = bound_memory(con)  # a 10^7-frame file is indexed within bounded memory
        try:
            with closing.interruptible(con):
                attached = _attach(con, paths, problems, busy)
                versions, stored = _check(con, attached, problems)
                lock(con)
                if what in ("text", "all"):
                    out["text"] = _texts(con, versions, attached, problems)
                if what in ("rows", "all"):
                    out["rows"] = _rows(con, versions, stored, attached, problems)
            return out
        finally:
            con.close()
            remove_spill(spill)


class Workers:
    """Two `python -m` worker processes reading batches (`read`, from several threads). A worker
    that fails or dies raises, and the caller reads that batch itself."""

    def __init__(self, n: int = 2):
        self.idle: queue.Queue[subprocess.Popen | None] = queue.Queue()
        self.all: list[subprocess.Popen] = []
        try:
            for _ in range(n):
                p = subprocess.Popen([sys.executable, "-P", "-m", __name__], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                self.all.append(p)
                self.idle.put(p)
        except OSError:
            self.close()
            raise

    def interrupt(self) -> None:
        """wire-ui is closing: the batches being read are abandoned, and a reader waiting for
        a worker is let go (None: there is none to have)."""
        for p in self.all:
            p.kill()
        self.idle.put(None)

    def read(self, paths: list[str], what: str) -> dict[str, Any]:
        p = self.idle.get()
        if p is None:
            self.idle.put(None)  # for the next one waiting
            raise RuntimeError("the workers were stopped")
        ok = False
        try:
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(orjson.dumps({"paths": paths, "what": what}) + b"\n")
            p.stdin.flush()
            line = p.stdout.readline()
            got = orjson.loads(line) if line else None
            if not isinstance(got, dict) or "error" in got:
                raise RuntimeError(str(got.get("error") if isinstance(got, dict) else "worker ended"))
            ok = True
            return got
        finally:
            if ok:
                self.idle.put(p)
            else:  # the others carry on; this batch is read by the caller
                p.kill()

    def close(self) -> None:
        for p in self.all:
            try:
                if p.stdin is not None:
                    p.stdin.close()
                p.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                p.kill()
                p.wait()


def _serve() -> None:
    """A worker: a JSON request per line on stdin, its answer per line on stdout."""
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            req = orjson.loads(line)
            got: Any = read_files([str(x) for x in req["paths"]], str(req["what"]))
        except Exception as e:  # noqa: BLE001 - the parent reads the batch itself
            got = {"error": f"{type(e).__name__}: {e}"}
        out.write(orjson.dumps(got, default=str) + b"\n")
        out.flush()


if __name__ == "__main__":
    _serve()


def forget_files(paths: list[str], cache_path: str | None = None) -> int:
    """Drop these recordings' entries (rows and search text) from wire-ui's index cache and
    from the log of entries the loaders wrote beside it (folded into the cache first, as
    wire-ui's start does): `wire-redact` calls it on each file it rewrote, so no cache keeps
    what the file no longer holds. Returns the entries dropped; a cache that cannot be read or
    written only costs a later start its speed."""
    from .data import index_cache_path, load_index_cache, save_index_cache
    from .recindex import log_path, take_log

    cache = cache_path or index_cache_path()
    gone = {os.path.abspath(p) for p in paths} | {os.path.realpath(p) for p in paths}
    logged = take_log(log_path(cache)) if os.path.exists(log_path(cache)) else {}
    if not logged and not os.path.exists(cache):
        return 0
    files = load_index_cache(cache) | logged
    dropped = [k for k in files if k in gone]
    if not dropped and not logged:
        return 0
    save_index_cache(cache, {k: v for k, v in files.items() if k not in gone})
    return len(dropped)
