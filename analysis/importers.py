"""Import into a DB: the project's text transcripts, and kimi's own session logs.

kimi writes `~/.kimi/sessions/<md5(work dir)>/<session id>/wire.jsonl`: a metadata line, then
`{"timestamp": <unix s>, "message": {"type", "payload"}}` per event (kimi-cli 1.51.0 writes
every event and request it sends, in order, with the same type and payload as on the wire; the
tests compare an import with a proxy recording of the same run). Each record becomes an agent→client frame
serialised the way kimi puts it on stdout, so every view works on it. What the log cannot say is
missing: client frames (prompts, answers), approvals, JSON-RPC responses; text chunks are merged.
The turn status is then inferred (see docs/analysis.md).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
from collections.abc import Callable, Iterable

import duckdb
import orjson

from wire_recorder.recorder.classify import classify
from wire_recorder.recorder.errors import NotARecording, TranscriptError
from wire_recorder.recorder.model import Frame, command_argv, frame_row
from wire_recorder.recorder.protocols.wire.names import REQUEST_TYPES
from wire_recorder.recorder.redact import Redactor
from wire_recorder.recorder.store import open_store
from wire_recorder.recorder.transcript import read_transcript, store_session

from . import import_kimicode
from .inputs import expand, files_below

KIMI_SOURCE = "kimi-wire-jsonl"


def _first_line(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.readline(1 << 20)
    except OSError as e:
        raise TranscriptError(f"cannot read {path}: {e.strerror}") from None


def detect(path: str) -> str:
    """'transcript', 'kimi' or 'kimicode' (Kimi Code's journal); anything else is a user error."""
    head = _first_line(path).strip()
    if not head:
        raise TranscriptError(f"{path} is empty")
    try:
        obj = orjson.loads(head)
    except orjson.JSONDecodeError:
        raise TranscriptError(f"{path}:1: not JSON",
                           "expected a wire-recorder transcript or a kimi wire.jsonl") from None
    if isinstance(obj, dict) and "wire_transcript" in obj:
        return "transcript"
    if isinstance(obj, dict) and obj.get("type") == "metadata" and import_kimicode.is_journal(path):
        return "kimicode"
    if isinstance(obj, dict) and (obj.get("type") == "metadata" or "message" in obj):
        return "kimi"
    raise TranscriptError(f"{path}:1: neither a wire-recorder transcript nor a kimi wire.jsonl",
                       'a transcript starts with {"wire_transcript":2,...}, a kimi log with '
                       '{"type": "metadata", ...}')


def _kimi_session_id(path: str) -> str:
    parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
    if os.path.basename(path) == "wire.jsonl" and parent:
        return parent
    return os.path.splitext(os.path.basename(path))[0]


def kimi_frame_bytes(record_type: str, payload) -> bytes:
    """The frame kimi would have written on stdout for this log record (compact JSON, raw UTF-8,
    model-field key order)."""
    if record_type in REQUEST_TYPES:
        rid = payload.get("id") if isinstance(payload, dict) else None
        msg = {"jsonrpc": "2.0", "method": "request", "id": rid,
               "params": {"type": record_type, "payload": payload}}
    else:
        msg = {"jsonrpc": "2.0", "method": "event", "params": {"type": record_type, "payload": payload}}
    return orjson.dumps(msg)


def read_kimi_wire_log(path: str, session_id: str | None = None) -> tuple[dict, list[Frame]]:
    """A kimi `wire.jsonl` as a session and its frames. Raises TranscriptError on a bad line."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TranscriptError(f"cannot read {path}: {e.strerror}") from None
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    sid = session_id or _kimi_session_id(path)
    protocol_version = None
    frames: list[Frame] = []
    first_ns = None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            cut = "" if lineno < len(lines) or data.endswith(b"\n") else " (the file ends mid-line: truncated?)"
            raise TranscriptError(f"{path}:{lineno}: not valid JSON{cut}: {e}",
                               "fix or remove that line") from None
        if not isinstance(rec, dict):
            raise TranscriptError(f"{path}:{lineno}: not a JSON object")
        if rec.get("type") == "metadata":
            protocol_version = rec.get("protocol_version")
            continue
        msg = rec.get("message")
        ts = rec.get("timestamp")
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str) or \
                not isinstance(ts, (int, float)):
            raise TranscriptError(f"{path}:{lineno}: not a kimi wire record",
                               'expected {"timestamp": ..., "message": {"type": ..., "payload": ...}}')
        ns = int(round(ts * 1e9))
        if first_ns is None:
            first_ns = ns
        raw = kimi_frame_bytes(msg["type"], msg.get("payload"))
        ex = classify(raw, "a2c", "wire")
        wall = _dt.datetime.fromtimestamp(ts, _dt.UTC).replace(tzinfo=None)
        frames.append(Frame(*frame_row(sid, len(frames) + 1, wall, ns, "a2c", raw, True, ex)))
    started = frames[0].ts if frames else _dt.datetime.fromtimestamp(
        os.path.getmtime(path), _dt.UTC).replace(tzinfo=None)
    session = {
        "session_id": sid,
        "started_at": started,
        "ended_at": frames[-1].ts if frames else started,
        "protocol": "wire",
        "protocol_version": protocol_version,
        "source": KIMI_SOURCE,
        "mono_start_ns": first_ns or 0,
        "tags": {"imported_from": os.path.abspath(path)},
        "db_note": "imported from kimi's own log: no client frames, approvals or responses; "
                   "text chunks merged",
    }
    return session, frames


def read_any_jsonl(path: str) -> tuple[dict, list[Frame]]:
    kind = detect(path)
    if kind == "transcript":
        session, frames = read_transcript(path)
        session.setdefault("source", "transcript")
        return session, frames
    if kind == "kimicode":
        return import_kimicode.read_kimicode_journal(path)
    return read_kimi_wire_log(path)


def redact_session(session: dict, frames: list[Frame],
                   redactor: Redactor) -> tuple[dict, list[Frame]]:
    """The session as a recording made through wire-proxy would store it: secrets in frames
    (raw and payload) and in the session's argv, cwd, name and tags replaced by placeholders
    (recorder.redact), and `redaction` saying which rules ran. Placeholders already there stay."""
    session = dict(session)
    session["redaction"] = redactor.describe()
    if not redactor.enabled:
        return session, frames
    for k in ("name", "cwd"):
        if isinstance(session.get(k), str):
            session[k] = redactor.redact_text(session[k])
    cmd = command_argv(session.get("command"))
    if cmd is not None:
        session["command"] = [redactor.redact_text(a) for a in cmd]
    tags = session.get("tags")
    if isinstance(tags, dict):
        session["tags"] = redactor.redact_json(tags)
    out = []
    for f in frames:
        raw = f.raw
        new_raw = redactor.redact_bytes(raw) if raw is not None else raw
        payload = redactor.redact_text(f.payload) if f.payload else f.payload
        if new_raw is not raw or payload is not f.payload:
            byte_len = len(new_raw) if new_raw is not None else f.byte_len
            f = dataclasses.replace(f, raw=new_raw, payload=payload, byte_len=byte_len)
        out.append(f)
    return session, out


def expand_import_inputs(specs: list[str]) -> list[str]:
    """Files, globs and folders (a kimi or Kimi Code session folder, a sessions tree, a folder of
    transcripts) to a list of .jsonl files. Subagent logs are skipped: their events are already
    in the parent's log as SubagentEvent records (Kimi Code: read with the parent's journal)."""

    def in_folder(folder: str) -> list[str]:
        own = os.path.join(folder, "wire.jsonl")
        if os.path.isfile(own):
            return [own]
        kimicode = import_kimicode.session_journal(folder)
        if kimicode:
            return [kimicode]
        return import_kimicode.journal_files(
            [h for h in files_below(folder, "*.jsonl")
             if os.sep + "subagents" + os.sep not in h
             and os.path.basename(h) not in ("context.jsonl", "session_index.jsonl")])

    return expand(specs, in_folder, "{} holds no .jsonl files to import",
                  keep=lambda h: os.path.isfile(h) and bool(import_kimicode.journal_files([h])))


def import_files(paths: list[str], db: str, replace: bool = False,
                 progress: Callable[[str, int], None] | None = None,
                 redact: bool = True) -> list[dict]:
    """Import each file into db (one session per file). Stops at the first bad file with a
    UserError naming it; sessions imported before it stay. What is stored is redacted like a
    proxy recording (one Redactor, so one set of placeholders, per file) unless `redact` is
    False."""
    from .summary import store_summaries
    from .views import store_views

    results: list[dict] = []
    if not paths:
        return results
    # the first file is read before the DB is created, and a DB this call created is removed
    # again when a later file is bad: a bad input leaves no empty .db behind
    first = read_any_jsonl(paths[0])
    created = not os.path.exists(db)
    try:
        with open_store(db) as store:
            # a file analysis writes gets the analysis views stored in it (plain duckdb sees them)
            store_views(store.con)
            for i, path in enumerate(paths):
                session, frames = first if i == 0 else read_any_jsonl(path)
                session, frames = redact_session(
                    session, frames, Redactor.from_config(os.path.dirname(os.path.abspath(path)),
                                                          enabled=redact))
                source = session.get("source") or "transcript"
                try:
                    sid = store_session(store, session, frames, source, replace=replace)
                except (duckdb.ConversionException, duckdb.InvalidInputException) as e:
                    # a header value of the wrong type ("exit_code": "x"): edited by hand
                    first_line = (str(e).splitlines() or [type(e).__name__])[0]
                    raise NotARecording(f"{path}:1: a value in the header's session has the "
                                        f"wrong type: {first_line}",
                                        "fix it, or remove it from the header") from None
                # "frames" means what it means in wire-stats (sessions.frame_count): the
                # messages between client and agent; stderr lines and proxy events apart
                messages = sum(1 for f in frames if f.direction in ("c2a", "a2c"))
                results.append({"path": path, "session_id": sid, "frames": messages,
                                "other_rows": len(frames) - messages, "source": source})
                if progress:
                    progress(path, os.path.getsize(path))
            # what the loader's after-load step stores for a recorded session
            store_summaries(store.con, [r["session_id"] for r in results])
    except BaseException:
        if created:
            for leftover in (db, db + ".wal", db + ".blobs"):
                if os.path.exists(leftover):
                    os.unlink(leftover)
        raise
    return results


def import_bytes_total(paths: Iterable[str]) -> int:
    return sum(os.path.getsize(p) for p in paths)


__all__ = ["read_kimi_wire_log", "read_any_jsonl", "import_files", "expand_import_inputs",
           "redact_session",
           "detect", "TranscriptError", "KIMI_SOURCE"]
