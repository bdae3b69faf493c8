"""Text transcripts: a session as one JSON line per frame, reviewable in a diff.

A frame that is valid UTF-8 JSON on one line is embedded verbatim under "frame", so the exact
bytes come back by slicing the line (no re-serialisation). Other frames use "text" (UTF-8) or
"b64". Timing ("t_ms", monotonic, from the session start) comes last so that a diff of two
recordings lines up on content.
"""

from __future__ import annotations

import base64
import datetime as _dt
import os
from collections.abc import Iterable
from typing import IO

import orjson

from .classify import Classifier, Extracted
from .errors import TranscriptError, UserError
from .model import SESSION_COLUMNS, Frame, frame_row
from .store import Store, open_store

FORMAT_VERSION = 1
_FRAME_KEY = b',"frame":'
_T_KEY = b',"t_ms":'


def _jsonable(v):
    if isinstance(v, _dt.datetime):
        return v.isoformat()
    return v


def session_header(session: dict) -> bytes:
    s = {k: _jsonable(session.get(k)) for k in SESSION_COLUMNS if session.get(k) is not None}
    for k in ("command", "tags"):
        if isinstance(s.get(k), str):
            s[k] = orjson.loads(s[k])
    return orjson.dumps({"wire_transcript": FORMAT_VERSION, "session": s})


def _embeddable(raw: bytes) -> bool:
    if b"\n" in raw or b"\r" in raw or not raw.strip():
        return False
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True


def frame_line(f: Frame, mono_start_ns: int) -> bytes:
    t = b'%.3f' % ((f.mono_ns - mono_start_ns) / 1e6 if f.mono_ns is not None else 0.0)
    nl = b'' if f.newline in (True, None) else b',"nl":false'
    if f.direction == "proxy":
        data = orjson.loads(f.payload) if f.payload else {}
        return b'{"dir":"proxy","event":' + orjson.dumps(f.method) + b',"data":' + \
            orjson.dumps(data) + _T_KEY + t + b'}'
    head = b'{"dir":"' + f.direction.encode() + b'"'
    if f.direction != "stderr" and _embeddable(f.raw):
        return head + _FRAME_KEY + f.raw + nl + _T_KEY + t + b'}'
    try:
        body = b',"text":' + orjson.dumps(f.raw.decode("utf-8"))
    except UnicodeDecodeError:
        body = b',"b64":"' + base64.b64encode(f.raw) + b'"'
    return head + body + nl + _T_KEY + t + b'}'


def write_transcript(store: Store, session_id: str, out: IO[bytes]) -> int:
    session = store.session(session_id)
    return write_session(session, store.frames(session["session_id"]), out)


def write_session(session: dict, frames: list[Frame], out: IO[bytes]) -> int:
    """A session row and its frames (in seq order) as a transcript; returns the frame count."""
    start = session.get("mono_start_ns")
    if start is None:
        start = frames[0].mono_ns if frames else 0
    out.write(session_header(session) + b"\n")
    for f in frames:
        out.write(frame_line(f, start) + b"\n")
    return len(frames)


def export_transcript(db: str, out_path: str, session_id: str | None = None) -> int:
    with open_store(db, read_only=True) as store:
        sid = store.session(session_id)["session_id"]
        from .paths import open_private  # 0600: a transcript holds what the recording holds

        with open_private(out_path) as out:
            return write_transcript(store, sid, out)


def _parse_frame_line(line: bytes, lineno: int, path: str) -> tuple[str, bytes, bool, float, dict]:
    def bad(why: str):
        raise TranscriptError(f"{path} line {lineno}: {why}",
                              "fix or remove that line (one JSON object per line)")

    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        bad(f"not valid JSON ({e})")
    if not isinstance(obj, dict) or obj.get("dir") not in ("c2a", "a2c", "stderr", "proxy"):
        bad('not a transcript frame (needs "dir": c2a, a2c, stderr or proxy)')
    t = obj.get("t_ms", 0.0)
    if not isinstance(t, (int, float)):
        bad('"t_ms" is not a number')
    nl = obj.get("nl", True) is not False
    d = obj["dir"]
    if d == "proxy":
        return d, b"", True, float(t), obj
    if "frame" in obj:
        start = line.find(_FRAME_KEY) + len(_FRAME_KEY)
        end = line.rfind(b',"nl":false') if not nl else line.rfind(_T_KEY)
        raw = line[start:end]
        if orjson.loads(raw) != obj["frame"]:
            bad("the embedded frame could not be recovered byte for byte")
    elif "text" in obj and isinstance(obj["text"], str):
        raw = obj["text"].encode("utf-8")
    elif "b64" in obj:
        try:
            raw = base64.b64decode(obj["b64"], validate=True)
        except ValueError:
            bad('"b64" is not valid base64')
    else:
        bad('a frame line needs "frame", "text" or "b64"')
    return d, raw, nl, float(t), obj


def read_transcript(path: str) -> tuple[dict, list[Frame]]:
    """The session and its frames, exactly as recorded. Raises TranscriptError on bad lines."""
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError as e:
        raise TranscriptError(f"cannot read {path}: {e.strerror}") from None
    if lines and lines[-1] == b"":
        lines.pop()
    if not lines:
        raise TranscriptError(f"{path} is empty", "a transcript starts with a session line")
    try:
        head = orjson.loads(lines[0])
    except orjson.JSONDecodeError:
        head = None
    if not isinstance(head, dict) or "wire_transcript" not in head:
        raise TranscriptError(f"{path} line 1: not a wire-recorder transcript header",
                              'it must start with {"wire_transcript":1,"session":{...}}')
    if head["wire_transcript"] > FORMAT_VERSION:
        raise TranscriptError(f"{path} uses transcript format {head['wire_transcript']}; this "
                              f"wire-recorder reads up to {FORMAT_VERSION}", "upgrade wire-recorder")
    session = dict(head.get("session") or {})
    sid = session.get("session_id") or os.path.splitext(os.path.basename(path))[0]
    session["session_id"] = sid
    started = session.get("started_at")
    started_dt = _dt.datetime.fromisoformat(started) if isinstance(started, str) else \
        _dt.datetime(2000, 1, 1)
    session["started_at"] = started_dt
    if isinstance(session.get("ended_at"), str):
        session["ended_at"] = _dt.datetime.fromisoformat(session["ended_at"])
    mono0 = int(session.get("mono_start_ns") or 0)
    session["mono_start_ns"] = mono0
    classify = Classifier(session.get("protocol") or None)
    frames: list[Frame] = []
    for i, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        d, raw, nl, t, obj = _parse_frame_line(line, i, path)
        mono = mono0 + int(round(t * 1e6))
        ts = started_dt + _dt.timedelta(milliseconds=t)
        if d == "proxy":
            data = obj.get("data") or {}
            raw = orjson.dumps(dict(data, event=obj.get("event")))
            ex = Extracted("lifecycle", method=obj.get("event"), payload=orjson.dumps(data).decode())
        elif d == "stderr":
            ex = Extracted("stderr")
        else:
            ex = classify(raw, d)
        frames.append(Frame(*frame_row(sid, len(frames) + 1, ts, mono, d, raw, nl, ex)))
    if not session.get("protocol") and classify.protocol:
        session["protocol"], session["protocol_version"] = classify.protocol, classify.version
    return session, frames


def store_session(store: Store, session: dict, frames: Iterable[Frame], source: str,
                  replace: bool = False) -> str:
    """Write an already-parsed session into a store (used by transcript and log imports)."""
    sid = session["session_id"]
    exists = store.con.execute("SELECT 1 FROM sessions WHERE session_id = ?", [sid]).fetchone()
    if exists:
        if not replace:
            raise UserError(f"session {sid} is already in {store.path}",
                            "use --replace to overwrite it, or import into another file")
        store.con.execute("DELETE FROM frames WHERE session_id = ?", [sid])
        store.con.execute("DELETE FROM sessions WHERE session_id = ?", [sid])
    frames = list(frames)
    values = {k: session.get(k) for k in SESSION_COLUMNS if session.get(k) is not None}
    for k in ("command", "tags"):
        if k in values and not isinstance(values[k], str):
            values[k] = orjson.dumps(values[k]).decode()
    values.setdefault("source", source)
    values["frame_count"] = sum(1 for f in frames if f.direction in ("c2a", "a2c"))
    store.upsert_session(values)
    store.insert_frames([f.row() for f in frames])
    return sid


def import_transcript(path: str, db: str, replace: bool = False) -> str:
    session, frames = read_transcript(path)
    with open_store(db) as store:
        return store_session(store, session, frames, "transcript", replace=replace)


def load_recording(path: str, session_id: str | None = None) -> tuple[dict, list[Frame]]:
    """A session from a .db or a .jsonl transcript: what replay and analysis start from."""
    if path.endswith(".jsonl"):
        session, frames = read_transcript(path)
        if session_id and not session["session_id"].startswith(session_id):
            from .errors import SessionNotFound

            raise SessionNotFound(f"{path} holds session {session['session_id']}, "
                                  f"not {session_id!r}")
        return session, frames
    with open_store(path, read_only=True) as store:
        session = store.session(session_id)
        return session, store.frames(session["session_id"])
