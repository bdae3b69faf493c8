"""The conformance check: every frame of a recording against its protocol's model.

The JSON-RPC layer is judged here from what the recorder stored (`kind`, `parse_error`,
`known`); the rest by the session's protocol adapter (`Adapter.conformance`: Wire's own models,
the ACP and MCP SDKs' models). A frame is one of:

* conformant: nothing is said;
* a violation: not JSON, not JSON-RPC 2.0, a response to a request never sent, or a message
  the protocol's model rejects (the reason names the field);
* unknown: a method or type the protocol (or the model) does not know. Such frames are stored
  and replayed as they are; they are listed apart and do not fail the check.

`wire-check` prints the findings, `wire-show` counts them in its summary.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson

from wire_recorder.recorder import protocols
from wire_recorder.recorder.errors import UserError
from wire_recorder.recorder.sessions import pick_session

if TYPE_CHECKING:
    from wire_recorder.recorder.model import Frame
    from wire_recorder.recorder.store import Store

Severity = Literal["violation", "unknown"]


@dataclass(frozen=True)
class Violation:
    session_id: str
    seq: int
    direction: str
    kind: str  # request | notification | response | error | invalid
    # the frame's method and type; for a response, those of the request it answers
    method: str | None
    msg_type: str | None
    message: str
    severity: Severity = "violation"

    @property
    def label(self) -> str:
        what = self.msg_type or self.method or ""
        return f"answer to {what}" if what and self.kind in ("response", "error") else what

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _id_key(rpc_id: Any, text: str | None) -> tuple[str, Any]:
    # JSON-RPC keeps 1 and "1" apart; unhashable ids (invalid anyway) go by their text
    return (type(rpc_id).__name__, rpc_id if isinstance(rpc_id, (str, int, float)) else text)


def _say(out: list[Violation], sid: str, f: Frame, message: str,
         severity: Severity = "violation", **what: str | None) -> None:
    """Note a finding about frame f; `what` (method, msg_type) overrides the frame's own."""
    out.append(Violation(sid, f.seq, f.direction, f.kind, what.get("method", f.method),
                         what.get("msg_type", f.msg_type), message, severity))


def _decode(raw: bytes | None) -> dict[str, Any]:
    try:
        obj = orjson.loads(raw) if raw is not None else None
    except orjson.JSONDecodeError:
        return {}
    return obj if isinstance(obj, dict) else {}


def check_frames(session: dict[str, Any], frames: Iterable[Frame]) -> list[Violation]:
    """Findings for one session's frames (in seq order). Raises UserError when the protocol's
    model needs an SDK that is not installed."""
    sid = str(session.get("session_id"))
    adapter = protocols.get(session.get("protocol"))
    judge = adapter.conformance(session.get("protocol_version"))
    what = adapter.title or "JSON-RPC"
    out: list[Violation] = []
    # (direction, id) of requests sent -> (method, type) when the model accepted them, else None
    pending: dict[tuple[str, tuple[str, Any]], tuple[str, str | None] | None] = {}
    for f in frames:
        if f.direction not in ("c2a", "a2c"):
            continue

        say = functools.partial(_say, out, sid, f)
        obj = _decode(f.raw)
        key = (f.direction, _id_key(obj.get("id"), f.rpc_id))
        if f.kind == "invalid":
            say(f.parse_error or "not a JSON-RPC 2.0 message")
            if f.method is not None and "id" in obj:  # its answer is no stray
                pending[key] = None
            continue
        if f.kind in ("response", "error"):
            asked_by = "a2c" if f.direction == "c2a" else "c2a"
            asked = (asked_by, key[1])
            if asked not in pending:
                if f.kind == "response" or obj.get("id") is not None:
                    say(f"answers no request the recording holds (id {f.rpc_id})")
                continue
            answers = pending.pop(asked)
            method, msg_type = answers if answers else (None, None)
            verdict = judge(f.direction, obj, answers) if judge else None
            if verdict:
                say(verdict[1], verdict[0], method=method, msg_type=msg_type)
            continue
        if f.known is False:
            say(f"not a {what} {'type' if f.msg_type else 'method'}: kept as it is"
                if adapter is not protocols.GENERIC else
                f"no adapter knows protocol {session.get('protocol')}: kept as it is", "unknown")
            verdict = ("unknown", "")
        else:
            verdict = judge(f.direction, obj, None) if judge else None
            if verdict:
                say(verdict[1], verdict[0])
        if f.kind == "request":
            pending[key] = None if verdict else (f.method or "", f.msg_type)
    return out


def _pick(sessions: list[dict[str, Any]], wanted: str | None, where: str) -> list[dict[str, Any]]:
    if wanted is None:
        return sessions
    return [pick_session(sessions, wanted, where)]


def sessions_of(source: str | Store, session: str | None = None
                ) -> Iterator[tuple[dict[str, Any], list[Frame]]]:
    """(session row, frames) of every session in a .db, a transcript or a kimi log (.jsonl), or
    of the one named by id, id prefix or name."""
    from wire_recorder.recorder.store import Store, open_store

    if isinstance(source, Store):
        for s in _pick(source.sessions(), session, source.path):
            yield s, list(stream_frames(source, s["session_id"]))
        return
    if source.endswith(".jsonl"):
        from .importers import read_any_jsonl

        row, frames = read_any_jsonl(source)
        _pick([row], session, source)
        yield row, frames
        return
    store = open_store(source, read_only=True)
    try:
        yield from sessions_of(store, session)
    finally:
        store.close()


# frames read from a file at a time when a check streams them
CHUNK = 10_000


def stream_frames(store: Store, session_id: str) -> Iterator[Frame]:
    """A session's frames in order, CHUNK at a time: a check of 10^7 frames holds one chunk,
    not the session."""
    from wire_recorder.recorder.model import Frame
    from wire_recorder.recorder.store import frame_select, resolve_blobs

    cur = store.con.cursor()
    select = f"SELECT {frame_select(store.version)} FROM frames WHERE session_id = ?"
    try:
        lo, hi, n = cur.execute("SELECT min(seq), max(seq), count(*) FROM frames "
                                "WHERE session_id = ?", [session_id]).fetchall()[0]
        if not n:
            return
        if hi - lo < 4 * n:
            # seqs are dense: a range of them at a time (the file's zone maps skip the rest).
            # One ORDER BY over the session would sort all of it: gigabytes for 10^7 frames
            at = lo - 1
            while at < hi:
                rows = cur.execute(select + " AND seq > ? AND seq <= ? ORDER BY seq",
                                   [session_id, at, at + CHUNK]).fetchall()
                at += CHUNK
                yield from resolve_blobs([Frame(*r) for r in rows], store.path)
            return
        cur.execute(select + " ORDER BY seq", [session_id])
        while rows := cur.fetchmany(CHUNK):
            yield from resolve_blobs([Frame(*r) for r in rows], store.path)
    finally:
        cur.close()


def streamed_sessions(source: str, session: str | None = None
                      ) -> Iterator[tuple[dict[str, Any], Iterable[Frame]]]:
    """sessions_of, with a .db's frames streamed (read them before the next session)."""
    from wire_recorder.recorder.store import open_store

    if source.endswith(".jsonl"):
        yield from sessions_of(source, session)
        return
    store = open_store(source, read_only=True)
    try:
        for s in _pick(store.sessions(), session, store.path):
            yield s, stream_frames(store, s["session_id"])
    finally:
        store.close()


def check(source: str | Store, session: str | None = None) -> list[Violation]:
    """Findings of every frame of the recording (or of one session), violations and unknowns
    alike; `severity` tells them apart."""
    out: list[Violation] = []
    for row, frames in sessions_of(source, session):
        out.extend(check_frames(row, frames))
    return out


def violations(findings: Iterable[Violation]) -> list[Violation]:
    return [v for v in findings if v.severity == "violation"]


def has_model(session: dict[str, Any]) -> bool:
    """Whether the session's protocol has a model; without one only JSON-RPC itself is checked.
    Raises UserError like check_frames when the model's SDK is missing."""
    adapter = protocols.get(session.get("protocol"))
    return adapter.conformance(session.get("protocol_version")) is not None


def summary_line(session: dict[str, Any], frames: Iterable[Frame]) -> str:
    """One line for wire-show: how many frames break the protocol's model, the first one."""
    try:
        found = check_frames(session, frames)
        what = "conformance" if has_model(session) else \
            f"conformance (JSON-RPC only: no model of {session.get('protocol') or 'this protocol'})"
    except UserError as e:
        return f"conformance: not checked ({e.one_line()})"
    bad = violations(found)
    unknown = len(found) - len(bad)
    tail = f", {unknown} unknown" if unknown else ""
    if not bad:
        return f"{what}: no violations{tail}"
    first = bad[0]
    return (f"{what}: {len(bad)} violation{'s' if len(bad) > 1 else ''}{tail} "
            f"(first: seq {first.seq} {' '.join(filter(None, (first.direction, first.label)))}: "
            f"{first.message})")
