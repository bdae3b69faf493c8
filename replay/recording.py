"""A recorded session as replay sees it: the client and agent messages in recorded order, with
each agent request paired with the client's answer and the client's own requests identified.

Every frame is kept, known or not: unknown methods and types, non-JSON lines and frames without a
final newline are replayed (sent or compared) as they were recorded.

What a recorded frame is (kind, method, type, payload) is read from the recording, as the
recorder's classifier stored it; live frames go through that same classifier (`parse_msg`), so
both sides are judged alike.
"""

from __future__ import annotations

import os
import shlex
import signal
from dataclasses import dataclass, field
from typing import Any

import orjson

from wire_recorder.recorder import protocols
from wire_recorder.recorder.classify import PAYLOAD_MAX, Classifier, classify
from wire_recorder.recorder.errors import InputError, NotARecording, UserError
from wire_recorder.recorder.handoff import exists_after_loaders
from wire_recorder.recorder.model import Frame
from wire_recorder.recorder.protocols.base import Adapter
from wire_recorder.recorder.transcript import load_recording

WIRE = protocols.get("wire")


@dataclass(slots=True)
class Msg:
    """One protocol frame, recorded or live. `obj` is the parsed JSON (None when not JSON)."""

    direction: str  # c2a | a2c
    raw: bytes
    t: float  # seconds since the session (or the live run) started
    obj: Any = None
    kind: str = "invalid"  # request | notification | response | error | invalid
    method: str | None = None
    rpc_id: Any = None
    msg_type: str | None = None  # the adapter's finer type (Wire event/request type, …)
    payload: Any = None
    newline: bool = True
    index: int = -1  # position among the session's messages
    adapter: Adapter = WIRE

    @property
    def id_key(self) -> bytes | None:
        """The JSON-RPC id as canonical JSON: "1" and 1 are different ids."""
        if self.kind == "invalid" or not isinstance(self.obj, dict) or "id" not in self.obj:
            return None
        return orjson.dumps(self.rpc_id)

    @property
    def coarse(self) -> tuple:
        """What "this frame arrived" means for causal ordering: its kind and type (or the client
        request it answers), never its content, so a changed text still counts as arrived."""
        if self.kind in ("response", "error"):
            return ("response", self.id_key)
        if self.kind == "invalid":
            return ("invalid",)
        if self.msg_type is not None:
            return (self.method, self.msg_type)
        return (self.kind, self.method)


def parse_msg(raw: bytes, direction: str, t: float = 0.0, newline: bool = True,
              adapter: Adapter = WIRE) -> Msg:
    """A live frame, classified by the recorder's classifier."""
    ex = classify(raw, direction, adapter.name, detect=False, values=True)
    obj = ex.obj
    return Msg(direction, raw, t, obj, ex.kind, ex.method, _id_of(obj), ex.msg_type, ex.payload,
               newline, adapter=adapter)


def recorded_msg(f: Frame, t: float, adapter: Adapter) -> Msg:
    """A recorded frame, as the recording classified it. The message itself is parsed too: the
    stored rpc_id is text and cannot tell 1 from "1", and replay sends, rewrites and normalises
    the message."""
    raw = bytes(f.raw)
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        obj = None
    if f.payload is not None:
        payload = orjson.loads(f.payload)
    elif len(raw) > PAYLOAD_MAX:  # not stored for frames this big
        payload = classify(raw, f.direction, adapter.name, detect=False, values=True).payload
    else:
        payload = None
    return Msg(f.direction, raw, t, obj, f.kind, f.method, _id_of(obj), f.msg_type, payload,
               f.newline is not False, adapter=adapter)


def _id_of(obj: Any) -> Any:
    return obj.get("id") if isinstance(obj, dict) else None


@dataclass
class Recording:
    path: str
    session: dict
    msgs: list[Msg]
    # number of messages recorded before the client closed its stdin (None: it never did)
    eof_at: int | None
    eof_t: float | None = None
    # index of an agent request -> index of the client's answer to it
    answers: dict[int, int] = field(default_factory=dict)
    # recorded client request id (id_key) -> method
    client_requests: dict[bytes, str] = field(default_factory=dict)
    stderr: bytes = b""  # the agent's stderr (its last STDERR_KEEP bytes)
    # signals the client sent the agent (through wire-proxy): (number of messages recorded
    # before it, seconds, signal name)
    signals: list[tuple[int, float, str]] = field(default_factory=list)

    adapter: Adapter = WIRE
    # the recorded work dir's manifest (recorder.workdir.Manifest or None), when it was read
    # with the session: a .db is then opened once (each open checks its tables, ~50 ms)
    manifest: Any = field(default=None, repr=False)
    manifest_read: bool = False

    @property
    def protocol(self) -> str:
        return self.adapter.name

    @property
    def session_id(self) -> str:
        return str(self.session.get("session_id"))

    @property
    def name(self) -> str:
        return str(self.session.get("name") or self.session_id)

    @property
    def command(self) -> list[str]:
        cmd = self.session.get("command")
        if isinstance(cmd, str):
            try:
                cmd = orjson.loads(cmd)
            except orjson.JSONDecodeError:
                cmd = shlex.split(cmd)
        return [str(c) for c in cmd] if isinstance(cmd, list) else []

    @property
    def cwd(self) -> str | None:
        return self.session.get("cwd")

    @property
    def exit_code(self) -> int | None:
        return self.session.get("exit_code")

    @property
    def exit_signal(self) -> str | None:
        """The signal that ended the recorded agent, when one did."""
        sig = self.session.get("exit_signal")
        return sig if isinstance(sig, str) and sig else None

    def agent_msgs(self) -> list[Msg]:
        return [m for m in self.msgs if m.direction == "a2c"]

    def requests(self) -> list[Msg]:
        return [m for m in self.msgs if m.direction == "a2c" and m.kind == "request"]

    def answer_to(self, req: Msg) -> Msg | None:
        i = self.answers.get(req.index)
        return None if i is None else self.msgs[i]

    def anchor_ids(self) -> set[bytes]:
        """Client requests whose responses fix the order of what surrounds them: the adapter's
        anchor methods, unless the client had another one outstanding at the same time (an MCP
        client may send several requests at once; a server may answer them in any order)."""
        anchors = self.adapter.anchor_methods
        pending: set[bytes] = set()
        overlapping: set[bytes] = set()
        for m in self.msgs:
            k = m.id_key
            if k is None:
                continue
            if m.direction == "c2a" and m.kind == "request" and m.method in anchors:
                if pending or k in pending:
                    overlapping |= pending | {k}
                pending.add(k)
            elif m.direction == "a2c" and m.kind in ("response", "error"):
                pending.discard(k)
        return {k for k, meth in self.client_requests.items()
                if meth in anchors and k not in overlapping}

    def turn_ids(self) -> set[bytes]:
        """Client requests that are turns (prompts): their responses end a turn."""
        return {k for k, m in self.client_requests.items() if m in self.adapter.turn_methods}


# wire-proxy stamps a frame after forwarding it, so a fast client's reaction (the prompt sent on the
# initialize response, the answer to a request) can be recorded a fraction of a millisecond
# before the frame it reacts to. Frames the client frame cannot have caused are moved back in
# front of it when they follow it this closely.
REORDER_WINDOW_S = 0.05
STDERR_KEEP = 1 << 16


def repair_order(msgs: list[Msg]) -> list[Msg]:
    out = list(msgs)
    # a response recorded before the client request it answers: move the request in front
    i = 0
    while i < len(out):
        r = out[i]
        if r.direction == "a2c" and r.kind in ("response", "error") and r.id_key is not None:
            for j in range(i + 1, len(out)):
                c = out[j]
                if c.t - r.t > REORDER_WINDOW_S:
                    break
                if c.direction == "c2a" and c.kind == "request" and c.id_key == r.id_key:
                    out.insert(i, out.pop(j))
                    i += 1
                    break
        i += 1
    sent_before: set[bytes] = set()
    i = 0
    while i < len(out):
        c = out[i]
        if c.direction != "c2a":
            i += 1
            continue
        j = i + 1
        moved = []
        while j < len(out) and out[j].direction == "a2c" and out[j].t - c.t <= REORDER_WINDOW_S:
            a = out[j]
            k = a.id_key
            earlier_response = a.kind in ("response", "error") and k in sent_before and \
                k != c.id_key
            answered_request = a.kind == "request" and c.kind in ("response", "error") and \
                k is not None and k == c.id_key
            if not (earlier_response or answered_request):
                break
            moved.append(a)
            j += 1
        if moved:
            out[i:j] = moved + [c]
            i += len(moved)
        if c.kind == "request" and c.id_key is not None:
            sent_before.add(c.id_key)
        i += 1
    for n, m in enumerate(out):
        m.index = n
    return out


def session_adapter(session: dict, frames) -> Adapter:
    """The recorded session's protocol adapter: its protocol column, else detected from the
    frames the way the recorder detects it (recordings imported from elsewhere)."""
    name = session.get("protocol")
    if name not in protocols.ADAPTERS:
        detect = Classifier()
        for f in frames:
            if f.direction in ("c2a", "a2c") and f.raw is not None:
                detect(bytes(f.raw), f.direction)
                if detect.protocol:
                    name = detect.protocol
                    break
    return protocols.get(name) if name in protocols.ADAPTERS else WIRE


def _signal_name(f: Frame) -> str | None:
    """The name of a recorded signal event (`{"signal": "SIGTERM", ...}`), if it is one that
    can be sent here."""
    try:
        data = orjson.loads(f.payload) if f.payload is not None else orjson.loads(bytes(f.raw or b"{}"))
    except (orjson.JSONDecodeError, TypeError):
        return None
    name = data.get("signal") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name.startswith("SIG"):
        return None
    return name if getattr(signal, name, None) is not None else None


def build_recording(path: str, session: dict, frames) -> Recording:
    frames = list(frames)
    adapter = session_adapter(session, frames)
    # the stored fields were extracted with the session's adapter; a session without a known
    # protocol is read with the one detected now, so its frames are classified again
    stored = session.get("protocol") == adapter.name
    mono0 = session.get("mono_start_ns")
    msgs: list[Msg] = []
    eof_t: float | None = None
    stderr: list[bytes] = []
    for f in frames:
        if f.direction == "proxy":
            t_ev = ((f.mono_ns or 0) - mono0) / 1e9 if mono0 is not None and f.mono_ns else None
            if f.method == "client_eof" and eof_t is None:
                # a marker, so that the order repair can move it like a client frame
                eof_t = t_ev if t_ev is not None else (msgs[-1].t if msgs else 0.0)
                msgs.append(Msg("c2a", b"", eof_t, kind="eof"))
            elif f.method == "signal":
                name = _signal_name(f)
                if name is not None:
                    t_sig = t_ev if t_ev is not None else (msgs[-1].t if msgs else 0.0)
                    msgs.append(Msg("c2a", b"", t_sig, kind="signal", method=name))
            continue
        if f.direction == "stderr":
            stderr.append(bytes(f.raw or b"") + (b"\n" if f.newline is not False else b""))
            continue
        if f.direction not in ("c2a", "a2c"):
            continue
        if mono0 is None:
            mono0 = f.mono_ns or 0
        t = ((f.mono_ns or mono0) - mono0) / 1e9
        msgs.append(recorded_msg(f, t, adapter) if stored else
                    parse_msg(bytes(f.raw), f.direction, t, f.newline is not False, adapter))
    msgs = repair_order(msgs)
    eof_at = next((i for i, m in enumerate(msgs) if m.kind == "eof"), None)
    if eof_at is not None:
        del msgs[eof_at]
    signals: list[tuple[int, float, str]] = []
    kept: list[Msg] = []
    before_eof = 0
    for i, m in enumerate(msgs):
        if m.kind == "signal":
            signals.append((len(kept), m.t, str(m.method)))
            before_eof += eof_at is not None and i < eof_at
        else:
            kept.append(m)
    msgs = kept
    if eof_at is not None:
        eof_at -= before_eof
    for n, m in enumerate(msgs):
        m.index = n
    rec = Recording(path, session, msgs, eof_at, eof_t)
    rec.adapter = adapter
    rec.signals = signals
    rec.stderr = b"".join(stderr)[-STDERR_KEEP:]
    open_agent_requests: dict[bytes, int] = {}
    for m in msgs:
        k = m.id_key
        if m.direction == "a2c" and m.kind == "request" and k is not None:
            open_agent_requests[k] = m.index
        elif m.direction == "c2a":
            if m.kind in ("response", "error") and k in open_agent_requests:
                rec.answers[open_agent_requests.pop(k)] = m.index
            elif m.kind == "request" and k is not None:
                rec.client_requests[k] = m.method or ""
    return rec


def _load_db(path: str, session_id: str | None) -> tuple[dict, list[Frame], Any]:
    """load_recording's reading of a .db, with the work dir's manifest read in the same open."""
    from wire_recorder.recorder.store import open_store
    from wire_recorder.recorder.workdir import read_stored

    with open_store(path, read_only=True) as store:
        if session_id is None:  # a resumed session's file: its origins are no choice
            from .origins import final_session  # (origins builds on this module)

            session_id = final_session(path, store)
        session = store.session(session_id)
        frames = store.frames(session["session_id"])
        try:
            manifest = read_stored(store, session)
        except UserError:  # as replay.workdir.load_manifest had it: no manifest
            manifest = None
    return session, frames, manifest


def load(path: str | os.PathLike, session_id: str | None = None) -> Recording:
    """Load one session from a .db or a .jsonl transcript. Raises UserError subclasses."""
    path = os.fspath(path)
    if not exists_after_loaders(path):  # (a loader may be creating it)
        raise NotARecording(f"{path}: no such file", "give a .db written by wire-proxy or a "
                                                        ".jsonl transcript")
    if os.path.isdir(path):
        raise NotARecording(f"{path} is a directory, not a recording")
    manifest: Any = None
    read = False
    try:
        if path.endswith(".jsonl"):
            session, frames = load_recording(path, session_id)
        else:
            session, frames, manifest = _load_db(path, session_id)
            read = True
    except UserError:
        raise
    except Exception as e:  # duckdb internals on a damaged file: one line, no traceback
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise NotARecording(f"cannot read {path}: {first}") from None
    rec = build_recording(path, session, frames)
    rec.manifest, rec.manifest_read = manifest, read
    if not rec.msgs:
        raise InputError(f"session {rec.session_id} in {path} has no client or agent frames",
                               "nothing to replay")
    return rec
