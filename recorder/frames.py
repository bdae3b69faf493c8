"""The frame record, and what is extracted from a frame's bytes at write time.

Classification must keep up with 100k+ frames/s in the loader, so it works on plain dicts from
orjson and the protocol adapters' name sets (`protocols/`), not on pydantic models.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

import orjson

from . import protocols

DIRECTIONS = ("c2a", "a2c", "stderr", "proxy")

COLUMNS = ("session_id", "seq", "ts", "mono_ns", "direction", "raw", "newline", "byte_len",
           "kind", "method", "rpc_id", "msg_type", "payload", "parse_error", "known", "blob_offset", "anomaly")


@dataclass(slots=True)
class Frame:
    session_id: str
    seq: int
    ts: _dt.datetime
    mono_ns: int
    direction: str
    raw: bytes
    newline: bool
    byte_len: int
    kind: str
    method: str | None
    rpc_id: str | None
    msg_type: str | None
    payload: str | None  # JSON text
    parse_error: str | None
    known: bool | None
    # Set when raw lives in the sidecar file (raw is NULL in the DB); readers resolve it.
    blob_offset: int | None = None
    # What is wrong with a frame at the protocol level though it parsed: a request id reused
    # while pending, a frame of another protocol than the session's (schema 3).
    anomaly: str | None = None

    def row(self) -> tuple:
        return (self.session_id, self.seq, self.ts, self.mono_ns, self.direction, self.raw,
                self.newline, self.byte_len, self.kind, self.method, self.rpc_id,
                self.msg_type, self.payload, self.parse_error, self.known, self.blob_offset,
                self.anomaly)

    def message(self):
        """The parsed JSON message, or None for frames that are not JSON."""
        if self.direction not in ("c2a", "a2c"):
            return None
        try:
            return orjson.loads(self.raw)
        except orjson.JSONDecodeError:
            return None


@dataclass(slots=True)
class Extracted:
    kind: str
    method: str | None = None
    rpc_id: str | None = None
    msg_type: str | None = None
    payload: str | None = None
    parse_error: str | None = None
    known: bool | None = None
    protocol_hint: tuple[str, str | None] | None = None  # (protocol, version) this frame shows
    anomaly: str | None = None
    id_is_str: bool = False  # rpc_id is text for 1 and "1" alike; JSON-RPC keeps them apart


def _id_text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):  # bool is an int subclass; keep it distinct
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return orjson.dumps(value).decode()


# DuckDB stores MB-sized strings slowly (tens of MB/s) and with much memory; the raw bytes are
# always kept, the parsed copy (payload) only for frames up to this size.
PAYLOAD_MAX = 1 << 20


def _dump(value) -> str | None:
    if value is None:
        return None
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # ints beyond 64 bits
        import json

        return json.dumps(value)


def classify(raw: bytes, direction: str, protocol: str | None = "wire",
             detect: bool = True) -> Extracted:
    """Everything extracted from one frame on its own. Never raises: unknown or broken frames
    are flagged. `Classifier` adds what needs the session's history (detection, pending ids)."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as ue:
            return Extracted("invalid", parse_error=f"not valid UTF-8 (byte {ue.start})",
                             known=False)
        if not raw.strip():
            return Extracted("invalid", parse_error="empty line", known=False)
        return Extracted("invalid", parse_error=f"not JSON: {e}", known=False)
    if isinstance(obj, list):
        return Extracted("invalid", payload=_dump(obj), known=False,
                         parse_error=f"JSON-RPC batch (array of {len(obj)}) is not supported")
    if not isinstance(obj, dict):
        return Extracted("invalid", payload=_dump(obj), known=False,
                         parse_error=f"not a JSON-RPC message (a JSON {type(obj).__name__})")
    # Serialising a payload that would be dropped anyway costs milliseconds on MB frames.
    return _classify_obj(obj, direction, protocol,
                         _dump if len(raw) <= PAYLOAD_MAX else _no_payload, detect)


def _no_payload(_value) -> None:
    return None


def _classify_obj(obj, direction: str, protocol: str | None, dump=_dump,
                  detect: bool = True) -> Extracted:
    method = obj.get("method")
    has_id = "id" in obj
    rpc_id = _id_text(obj.get("id"))
    id_is_str = isinstance(obj.get("id"), str)
    problem = None if obj.get("jsonrpc") == "2.0" else "jsonrpc is not \"2.0\""
    if method is not None:
        if not isinstance(method, str):
            return Extracted("invalid", rpc_id=rpc_id, payload=dump(obj), known=False,
                             parse_error="method is not a string")
        kind = "request" if has_id else "notification"
        params = obj.get("params")
        adapter = protocols.get(protocol)
        msg_type = adapter.msg_type(method, params)
        known = adapter.known(direction, method, msg_type) if protocol else None
        return Extracted("invalid" if problem else kind, method, rpc_id, msg_type,
                         dump(adapter.payload(method, params)), problem, known,
                         protocols.detect(method, params, direction)
                         if detect or method == "initialize" else None,
                         id_is_str=id_is_str)
    if "error" in obj:
        return Extracted("invalid" if problem else "error", rpc_id=rpc_id,
                         payload=dump(obj["error"]), parse_error=problem, known=True,
                         id_is_str=id_is_str)
    if "result" in obj:
        return Extracted("invalid" if problem else "response", rpc_id=rpc_id,
                         payload=dump(obj["result"]), parse_error=problem, known=True,
                         id_is_str=id_is_str)
    return Extracted("invalid", rpc_id=rpc_id, payload=dump(obj), known=False,
                     parse_error="neither a request (method) nor a response (result/error)")


VERSION_WINDOW = 64  # frames in which a known protocol's version is still looked for


class Classifier:
    """Classifies the frames of one session in order: detects its protocol from the first frames
    that show it (unless given), and flags protocol-level anomalies that single frames cannot
    show: a request id reused while a request with that id is pending in the same direction, and
    a frame whose method belongs to another protocol than the session's."""

    def __init__(self, protocol: str | None = None):
        self.protocol = protocol
        self.version: str | None = None
        self.pending: dict[tuple[str, str, bool], int] = {}  # (direction, id, is str) -> frame
        self.n = 0
        self._foreign: dict[str, str | None] = {}  # method -> anomaly text

    def __call__(self, raw: bytes, direction: str) -> Extracted:
        self.n += 1
        # detection runs until the protocol is known, then for its version only in the session's
        # first frames (a Wire client that never sends initialize would otherwise pay for it on
        # every frame), and always on initialize (which settles an MCP version after a
        # server/discover fallback)
        ex = classify(raw, direction, self.protocol,
                      detect=self.protocol is None or (self.version is None
                                                       and self.n <= VERSION_WINDOW))
        hint = ex.protocol_hint
        if hint is not None:
            if self.protocol is None:
                self.protocol, self.version = hint
                self._foreign.clear()
                if ex.method is not None:  # judged again now that the protocol is known
                    ex = classify(raw, direction, self.protocol, detect=False)
            elif hint[0] == self.protocol and hint[1] and (
                    self.version is None or ex.method == "initialize"):
                # an MCP client that falls back from server/discover settles the version in
                # initialize
                self.version = hint[1]
        method = ex.method
        if method is not None and self.protocol:
            try:
                foreign = self._foreign[method]
            except KeyError:
                other = protocols.foreign(method, protocols.get(self.protocol))
                foreign = self._foreign[method] = None if other is None else \
                    f"{method} is a {other.name} method, in a {self.protocol} session"
            ex.anomaly = foreign
        rpc_id = ex.rpc_id
        if rpc_id is not None:
            kind = ex.kind
            if kind == "request":
                key = (direction, rpc_id, ex.id_is_str)
                if key in self.pending:
                    ex.anomaly = _join(ex.anomaly, f"request id {rpc_id} reused while an "
                                                   f"earlier {direction} request with that id "
                                                   f"is unanswered")
                self.pending[key] = self.n
            elif kind == "response" or kind == "error":
                self.pending.pop(("a2c" if direction == "c2a" else "c2a", rpc_id, ex.id_is_str),
                                 None)
        return ex


def _join(a: str | None, b: str) -> str:
    return b if not a else f"{a}; {b}"


def wall_ts(wall_ns: int) -> _dt.datetime:
    """Naive UTC: TIMESTAMPTZ would make every reader depend on pytz."""
    return _dt.datetime.fromtimestamp(wall_ns / 1e9, _dt.timezone.utc).replace(tzinfo=None)
