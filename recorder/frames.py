"""The frame record, and what is extracted from a frame's bytes at write time.

Classification must keep up with 100k+ frames/s in the loader, so it works on plain dicts from
orjson and name sets (`wire_names`), not on pydantic models.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

import orjson

from . import wire_names

DIRECTIONS = ("c2a", "a2c", "stderr", "proxy")

COLUMNS = ("session_id", "seq", "ts", "mono_ns", "direction", "raw", "newline", "byte_len",
           "kind", "method", "rpc_id", "msg_type", "payload", "parse_error", "known", "blob_offset")


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

    def row(self) -> tuple:
        return (self.session_id, self.seq, self.ts, self.mono_ns, self.direction, self.raw,
                self.newline, self.byte_len, self.kind, self.method, self.rpc_id,
                self.msg_type, self.payload, self.parse_error, self.known, self.blob_offset)

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
    protocol_hint: tuple[str, str | None] | None = None  # (protocol, version) from initialize


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


WIRE_ONLY_METHODS = frozenset({"prompt", "steer", "cancel", "set_plan_mode", "event", "request"})


def _protocol_hint(method, params) -> tuple[str, str | None] | None:
    if method in WIRE_ONLY_METHODS:
        return ("wire", None)
    if method != "initialize" or not isinstance(params, dict):
        return None
    if "protocol_version" in params:
        return ("wire", str(params["protocol_version"]))
    pv = params.get("protocolVersion")
    if isinstance(pv, int) and not isinstance(pv, bool):
        return ("acp", str(pv))
    if isinstance(pv, str):
        return ("mcp", pv)
    return None


def classify(raw: bytes, direction: str, protocol: str | None = "wire") -> Extracted:
    """Everything extracted from a frame. Never raises: unknown or broken frames are flagged."""
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
                         _dump if len(raw) <= PAYLOAD_MAX else _no_payload)


def _no_payload(_value) -> None:
    return None


def _classify_obj(obj, direction: str, protocol: str | None, dump=_dump) -> Extracted:
    method = obj.get("method")
    has_id = "id" in obj
    rpc_id = _id_text(obj.get("id"))
    problem = None if obj.get("jsonrpc") == "2.0" else "jsonrpc is not \"2.0\""
    if method is not None:
        if not isinstance(method, str):
            return Extracted("invalid", rpc_id=rpc_id, payload=dump(obj), known=False,
                             parse_error="method is not a string")
        kind = "request" if has_id else "notification"
        params = obj.get("params")
        msg_type = None
        payload = params
        if method in ("event", "request") and isinstance(params, dict):
            t = params.get("type")
            msg_type = t if isinstance(t, str) else None
            payload = params.get("payload")
        known = None
        if protocol in (None, "wire"):
            if direction == "c2a":
                known = method in wire_names.CLIENT_METHODS
            elif method == "event":
                known = msg_type in wire_names.EVENT_TYPES
            elif method == "request":
                known = msg_type in wire_names.REQUEST_TYPES
            else:
                known = False
        return Extracted("invalid" if problem else kind, method, rpc_id, msg_type, dump(payload),
                         problem, known, _protocol_hint(method, params))
    if "error" in obj:
        return Extracted("invalid" if problem else "error", rpc_id=rpc_id,
                         payload=dump(obj["error"]), parse_error=problem, known=True)
    if "result" in obj:
        return Extracted("invalid" if problem else "response", rpc_id=rpc_id,
                         payload=dump(obj["result"]), parse_error=problem, known=True)
    return Extracted("invalid", rpc_id=rpc_id, payload=dump(obj), known=False,
                     parse_error="neither a request (method) nor a response (result/error)")


def wall_ts(wall_ns: int) -> _dt.datetime:
    """Naive UTC: TIMESTAMPTZ would make every reader depend on pytz."""
    return _dt.datetime.fromtimestamp(wall_ns / 1e9, _dt.timezone.utc).replace(tzinfo=None)
