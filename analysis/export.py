"""Export sessions: to the text transcript, to JSONL (one frame per line, payload parsed), and
to Parquet partitioned by day, so months of sessions can live in a folder or bucket and be read by
DuckDB (`read_parquet('DIR/frames/**/*.parquet', hive_partitioning = true)`) or any Parquet
engine — and by wire-query / wire-stats, which accept such a folder directly.

Parquet layout: `DIR/frames/day=YYYY-MM-DD/<session_id>.parquet` and
`DIR/sessions/day=YYYY-MM-DD/<session_id>.parquet`. One file per session makes re-exporting a
session overwrite its own file instead of duplicating rows.

Every file and folder an export creates is its owner's only (0600 files, 0700 folders), like the
recording it comes from.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from typing import IO

import orjson

from wire_recorder.recorder.classify import PAYLOAD_MAX
from wire_recorder.recorder.errors import OutputError, UserError
from wire_recorder.recorder.model import COLUMNS, Frame
from wire_recorder.recorder.paths import make_private_dirs, open_private
from wire_recorder.recorder.store import SESSION_COLUMNS, resolve_blobs, sql_str
from wire_recorder.recorder.transcript import write_session
from wire_recorder.recorder.workdir import read_manifest

from .sources import Workspace


def _session_row(ws: Workspace, sid: str) -> dict:
    cur = ws.con.execute(f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE session_id = ?",
                         [sid])
    row = cur.fetchall()[0]  # the session was resolved: it is there
    return dict(zip(SESSION_COLUMNS, row, strict=True))


def _frames(ws: Workspace, sid: str, limit: int | None = None) -> list[Frame]:
    """The session's frames in order (the first `limit` only, when given)."""
    where, params = "session_id = ?", [sid]
    if limit is not None:
        # the limit as a bound on seq, found over seq alone: DuckDB's ORDER BY ... LIMIT over
        # whole rows held 2 GB for a 10^7-frame session; this reads only the first row groups
        bound = ws.con.execute("SELECT seq FROM frames WHERE session_id = ? ORDER BY seq "
                               f"LIMIT 1 OFFSET {max(int(limit), 1) - 1}", [sid]).fetchall()
        if bound:
            where, params = "session_id = ? AND seq <= ?", [sid, bound[0][0]]
    rows = ws.con.execute(f"SELECT {', '.join(COLUMNS)} FROM frames WHERE {where} "
                          "ORDER BY seq", params).fetchall()
    frames = [Frame(*r) for r in rows]
    if any(f.raw is None and f.blob_offset is not None for f in frames):
        resolve_blobs(frames, _source_file(ws, sid))
    return frames


def _source_file(ws: Workspace, sid: str) -> str:
    return ws.con.execute("SELECT source_file FROM sessions WHERE session_id = ?",
                          [sid]).fetchall()[0][0]


def _has_blobs(ws: Workspace, sid: str) -> bool:
    return ws.con.execute("SELECT count(*) FROM frames WHERE session_id = ? AND "
                          "blob_offset IS NOT NULL", [sid]).fetchall()[0][0] > 0


def _copy_frames_with_blobs(ws: Workspace, sid: str, fpath: str) -> None:
    """Parquet files carry the bytes themselves (no sidecar next to them): the sidecar bytes go
    through a temporary table, which is slow for big sessions but keeps exports self-contained."""
    frames = _frames(ws, sid)
    for f in frames:
        f.blob_offset = None
    ws.con.execute("CREATE OR REPLACE TEMP TABLE wr_export_frames AS "
                   "SELECT * FROM frames WHERE false")
    try:
        ap = ws.con.appender("wr_export_frames", columns=list(COLUMNS))
        ap.append_rows([f.row() for f in frames])
        ap.flush()
        ws.con.execute(f"COPY (SELECT {', '.join(COLUMNS)} FROM wr_export_frames ORDER BY seq) "
                       f"TO {sql_str(fpath)} (FORMAT parquet, COMPRESSION zstd)")
    finally:
        ws.con.execute("DROP TABLE IF EXISTS wr_export_frames")


def write_transcript(ws: Workspace, sid: str, out) -> int:
    source = _source_file(ws, sid)  # the work dir's files are in the recording, not the views
    workdir = None if os.path.isdir(source) else read_manifest(source, sid)
    return write_session(_session_row(ws, sid), _frames(ws, sid), out, workdir=workdir)


def jsonl_record(f: Frame, mono_start_ns: int) -> dict:
    rec = {"session_id": f.session_id, "seq": f.seq,
           "ts": f.ts.isoformat() if f.ts else None,
           "t_ms": round((f.mono_ns - mono_start_ns) / 1e6, 3) if f.mono_ns is not None else None,
           "direction": f.direction, "kind": f.kind, "method": f.method, "rpc_id": f.rpc_id,
           "type": f.msg_type, "byte_len": f.byte_len}
    deep = False
    if f.payload is not None:
        try:
            payload = orjson.loads(f.payload)
            orjson.dumps(payload)
            rec["payload"] = payload
        except (orjson.JSONDecodeError, TypeError):
            # nested deeper than orjson writes (254 levels): the frame's bytes stand in for it
            deep = True
            rec["payload_note"] = "nested too deep to export parsed; see text (or b64)"
    if f.parse_error:
        rec["parse_error"] = f.parse_error
    # frames over PAYLOAD_MAX have no payload: their bytes are the only copy of the content
    if deep or f.kind in ("invalid", "stderr") or (f.payload is None and f.byte_len is not None
                                                   and f.byte_len > PAYLOAD_MAX):
        try:
            rec["text"] = bytes(f.raw).decode("utf-8")
        except UnicodeDecodeError:
            rec["b64"] = base64.b64encode(bytes(f.raw)).decode()
    return rec


def write_jsonl(ws: Workspace, sid: str, out) -> int:
    session = _session_row(ws, sid)
    frames = _frames(ws, sid)
    start = session.get("mono_start_ns")
    if start is None:
        start = frames[0].mono_ns if frames else 0
    for f in frames:
        out.write(orjson.dumps(jsonl_record(f, start)) + b"\n")
    return len(frames)


def export_file(writer: Callable[[Workspace, str, IO[bytes]], int], ws: Workspace, sid: str,
                path: str) -> int:
    """`writer` (write_transcript, write_jsonl) into a new file only its owner reads; returns
    the frame count."""
    try:
        with open_private(path) as out:
            n = writer(ws, sid, out)
        if writer is write_transcript and path.endswith(".jsonl"):
            # a resumed session's origin beside it, where wire-replay looks for it
            from .export_origin import origin_of

            origin = origin_of(ws, sid, _session_row, _frames)
            if origin is not None:
                with open_private(path[:-len(".jsonl")] + ".origin.jsonl") as out:
                    writer(ws, origin, out)
        return n
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror}") from None


def _private_copy_target(path: str) -> None:
    """DuckDB's COPY creates its file with the umask's mode; a file that exists keeps its own
    (COPY truncates it), so the target is made 0600 before the bytes go in."""
    open_private(path).close()


def _keep_private(path: str) -> None:
    """And made 0600 after, in case COPY replaced the file instead of truncating it."""
    if os.path.isfile(path):
        os.chmod(path, 0o600)


def export_parquet(ws: Workspace, out_dir: str, session_ids: list[str],
                   progress: Callable[[str], None] | None = None) -> list[str]:
    """Write each session's frames and session row under out_dir, partitioned by day."""
    written = []
    cols = ", ".join(COLUMNS)
    scols = ", ".join(SESSION_COLUMNS)
    for sid in session_ids:
        day = ws.con.execute(
            "SELECT strftime(coalesce(started_at, TIMESTAMP '1970-01-01'), '%Y-%m-%d') "
            "FROM sessions WHERE session_id = ?", [sid]).fetchall()[0][0]
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in sid)
        fdir = os.path.join(out_dir, "frames", f"day={day}")
        sdir = os.path.join(out_dir, "sessions", f"day={day}")
        fpath = os.path.join(fdir, safe + ".parquet")
        spath = os.path.join(sdir, safe + ".parquet")
        q = sql_str(sid)
        try:
            make_private_dirs(fdir)
            make_private_dirs(sdir)
            _private_copy_target(fpath)
            _private_copy_target(spath)
            if _has_blobs(ws, sid):
                _copy_frames_with_blobs(ws, sid, fpath)
            else:
                ws.con.execute(f"COPY (SELECT {cols} FROM frames WHERE session_id = {q} ORDER BY "
                               f"seq) TO {sql_str(fpath)} (FORMAT parquet, COMPRESSION zstd)")
            ws.con.execute(f"COPY (SELECT {scols} FROM sessions WHERE session_id = {q}) "
                           f"TO {sql_str(spath)} (FORMAT parquet)")
            _keep_private(fpath)
            _keep_private(spath)
        except UserError:
            raise
        except OSError as e:
            raise OutputError(f"cannot write {fpath}: {e.strerror}") from None
        except Exception as e:  # disk full, permissions: one line
            raise OutputError(f"cannot write {fpath}: {str(e).splitlines()[0]}") from None
        written.append(fpath)
        if progress:
            progress(sid)
    return written


def file_stems(ws: Workspace, session_ids: list[str]) -> dict[str, str]:
    """A file name stem per session: its name when that is unique among them, else its id;
    characters other than letters, digits, `-_.` become `_`."""
    rows = dict(ws.con.execute("SELECT session_id, name FROM sessions").fetchall())
    names = [rows.get(s) for s in session_ids]
    out = {}
    for sid, name in zip(session_ids, names, strict=True):
        stem = name if name and names.count(name) == 1 else sid
        out[sid] = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem).lstrip(".") or "_"
    return out


def export_sessions(writer: Callable[[Workspace, str, IO[bytes]], int], ws: Workspace,
                    session_ids: list[str], folder: str, suffix: str,
                    progress: Callable[[str], None] | None = None) -> list[tuple[str, str, int]]:
    """Each session into FOLDER/<stem><suffix> (file_stems); returns (session, path, frames)."""
    try:
        make_private_dirs(folder)
    except OSError as e:
        raise OutputError(f"cannot make {folder}: {e.strerror}") from None
    done = []
    for sid, stem in file_stems(ws, session_ids).items():
        path = os.path.join(folder, stem + suffix)
        done.append((sid, path, export_file(writer, ws, sid, path)))
        if progress:
            progress(sid)
    return done
