"""The only JSON-RPC shape check: what a frame is (request, notification, response, error or
invalid) and what is extracted from it. The loader stores what it says (`kind`, `method`,
`rpc_id`, `msg_type`, `payload`, `parse_error`, `known`, `anomaly`); replay reads those stored
fields back and sends the live agent's (or client's) frames through this same function, so a
recording and a replay never disagree about a frame.

`"jsonrpc": "2.0"` is required. The JSON-RPC 2.0 specification says the member "MUST be exactly
"2.0"", and every real peer sends it on every frame (kimi-cli's Wire server, the ACP SDK, both MCP
SDK lines). Receivers differ: the MCP SDKs reject a message without it, kimi-cli defaults it, the
ACP SDK never looks. A frame without it (or with another value) is stored as `invalid` with its
method, id, type and payload kept and `parse_error` saying why, so that it is visible in the
recording rather than silently counted as a request; replay sees such a live frame the same way
(it is compared, not answered). Real sessions never carry one.

Classification must keep up with 100k+ frames/s in the loader, so it works on plain dicts from
orjson and the protocol adapters' name sets (`protocols/`), not on pydantic models.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from . import protocols
from .rules import compiled


@dataclass(slots=True)
class Extracted:
    kind: str
    method: str | None = None
    rpc_id: str | None = None
    msg_type: str | None = None
    # JSON text, as stored; with `classify(..., values=True)` the value itself
    payload: Any = None
    parse_error: str | None = None
    known: bool | None = None
    protocol_hint: tuple[str, str | None] | None = None  # (protocol, version) this frame shows
    anomaly: str | None = None
    id_is_str: bool = False  # rpc_id is text for 1 and "1" alike; JSON-RPC keeps them apart
    obj: Any = None  # the parsed message; only with `classify(..., values=True)`


def _id_text(value: Any) -> str | None:
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


class Unstorable(Exception):
    """A parsed payload that cannot be written back as JSON text (nested too deep for the
    serialisers, or holding a non-finite number); the frame is stored with its raw bytes only."""


# Payloads orjson cannot write (nested deeper than its 254 levels) are written by the stdlib up to
# this depth. How deep the stdlib itself gets depends on the interpreter (3.11 stops near 1,000
# levels, 3.12 near 1,500, 3.13 has no such limit) and on the caller's stack, so a fixed bound
# keeps what a recording stores the same whichever Python recorded it.
STORED_DEPTH = 512


def _nested_deeper(value: Any, limit: int) -> bool:
    """Whether value holds lists or dicts nested more than `limit` levels (the value itself is
    level 1). Without recursion: the value may be nested a thousand levels."""
    stack = [(value, 1)]
    while stack:
        v, level = stack.pop()
        if not isinstance(v, (dict, list)):
            continue
        if level > limit:
            return True
        stack.extend((x, level + 1) for x in (v.values() if isinstance(v, dict) else v)
                     if isinstance(x, (dict, list)))
    return False


def _dump(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return orjson.dumps(value).decode()
    except TypeError as e:  # nested deeper than orjson's 254 levels, or ints beyond 64 bits
        first = str(e)
    if _nested_deeper(value, STORED_DEPTH):
        raise Unstorable(f"payload not stored: nested deeper than {STORED_DEPTH} levels ({first})")
    # A frame the stdlib cannot write all the same (a caller deep in its own stack) is kept raw
    # rather than killing the loader (one such frame once lost whole sessions).
    try:
        return json.dumps(value, allow_nan=False)
    except RecursionError:
        raise Unstorable(f"payload not stored: nested too deep to re-serialise ({first})") \
            from None
    except (ValueError, TypeError) as e:
        raise Unstorable(f"payload not stored: {e}") from None


def _no_payload(_value: Any) -> None:
    return None


def _value(value: Any) -> Any:
    return value


def classify(raw: bytes, direction: str, protocol: str | None = "wire",
             detect: bool = True, values: bool = False) -> Extracted:
    """Everything extracted from one frame on its own. Never raises: unknown or broken frames
    are flagged. `Classifier` adds what needs the session's history (detection, pending ids).

    values: keep the payload as a value (not JSON text, whatever its size) and the parsed
    message in `obj`, for readers that work on the message (replay) rather than store it."""
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
        if "depth limit" in str(e) or "recursion" in str(e).lower():
            return Extracted("invalid", parse_error=f"nested deeper than {PARSE_DEPTH} levels: "
                                                    f"not parsed, raw bytes kept ({e})",
                             known=False)
        obj = _stdlib_loads(raw) if "infinity" in str(e) else _FAILED
        if obj is _TOO_DEEP:
            return Extracted("invalid", parse_error=f"nested deeper than {STORED_DEPTH} levels "
                                                    f"with a number beyond a double: not parsed, "
                                                    f"raw bytes kept", known=False)
        if obj is _FAILED:
            return Extracted("invalid", parse_error=f"not JSON: {e}", known=False)
    try:
        ex = _classify_value(obj, raw, direction, protocol, detect, values)
    except Unstorable as e:
        # the same frame judged again without its payload: kind, method and id stay known
        ex = _classify_value(obj, raw, direction, protocol, detect, False, _no_payload)
        ex.parse_error = f"{ex.parse_error}; {e}" if ex.parse_error else str(e)
    if values:
        ex.obj = obj
    return ex


PARSE_DEPTH = 1024  # orjson's nesting limit when parsing
_FAILED = object()
_TOO_DEEP = object()


def _stdlib_loads(raw: bytes) -> Any:
    """A frame orjson refuses only for a number beyond a double (an id of 400 digits): the
    stdlib parses big integers exactly. NaN and Infinity stay refused, as JSON has none. Up to
    STORED_DEPTH levels, for the same frame to be parsed whichever Python records it."""
    def no_constant(name: str) -> Any:
        raise ValueError(name)

    def finite(text: str) -> float:
        value = float(text)
        if value in (math.inf, -math.inf):  # orjson would write null for it
            raise ValueError(text)
        return value
    try:
        obj = json.loads(raw, parse_constant=no_constant, parse_float=finite)
    except RecursionError:
        return _TOO_DEEP
    except ValueError:  # includes int digit limits and JSONDecodeError
        return _FAILED
    return _TOO_DEEP if _nested_deeper(obj, STORED_DEPTH) else obj


def _exact_number_id(raw: bytes) -> str | None:
    """The id's text as the frame wrote it, for a numeric id orjson made a float of (integers
    beyond 64 bits become floats, and two such ids would compare equal). Up to STORED_DEPTH
    levels, as `_stdlib_loads`."""
    try:
        obj = json.loads(raw, parse_int=str, parse_float=str,
                         parse_constant=lambda name: name)
    except (ValueError, RecursionError):
        return None
    if _nested_deeper(obj, STORED_DEPTH):
        return None
    value = obj.get("id") if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


def _classify_value(obj: Any, raw: bytes, direction: str, protocol: str | None, detect: bool,
                    values: bool, dump: Callable[[Any], Any] | None = None) -> Extracted:
    if dump is None:
        # Serialising a payload that would be dropped anyway costs milliseconds on MB frames.
        dump = _value if values else _dump if len(raw) <= PAYLOAD_MAX else _no_payload
    if isinstance(obj, list):
        return Extracted("invalid", payload=dump(obj), known=False,
                         parse_error=f"JSON-RPC batch (array of {len(obj)}) is not supported")
    if not isinstance(obj, dict):
        return Extracted("invalid", payload=dump(obj), known=False,
                         parse_error=f"not a JSON-RPC message (a JSON {type(obj).__name__})")
    ex = _classify_obj(obj, direction, protocol, dump, detect)
    if isinstance(obj.get("id"), float):
        exact = _exact_number_id(raw)
        if exact is not None:
            ex.rpc_id = exact
    return ex


def _classify_obj(obj: dict, direction: str, protocol: str | None,
                  dump: Callable[[Any], Any] = _dump, detect: bool = True) -> Extracted:
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
        # the rule table's Python compile for in-tree protocols (recorder/rules.py: the loader's
        # SQL is compiled from the same table), the adapter's own methods for others
        rules = compiled(adapter) or adapter
        msg_type = rules.msg_type(method, params)
        known = rules.known(direction, method, msg_type) if protocol else None
        return Extracted("invalid" if problem else kind, method, rpc_id, msg_type,
                         dump(rules.payload(method, params)), problem, known,
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
        # client requests that offered a version (initialize, server/discover), by (id, is str):
        # (method, offer); the agent's answer to one settles what the session negotiated
        self._offers: dict[tuple[str, bool], tuple[str, str | None]] = {}

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
            if hint[0] == self.protocol and direction == "c2a" and ex.kind == "request" and \
                    ex.rpc_id is not None and (hint[1] or ex.method == "initialize"):
                self._offers[(ex.rpc_id, ex.id_is_str)] = (ex.method or "", hint[1])
        elif self._offers and direction == "a2c" and ex.rpc_id is not None:
            self._answered(raw, ex)
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


    def _answered(self, raw: bytes, ex: Extracted) -> None:
        """The agent's answer to a request that offered a version: the version it settles (the
        agent's, e.g. Wire 1.10 to a client's 1.7) replaces the offer."""
        asked = self._offers.pop((ex.rpc_id or "", ex.id_is_str), None)
        if asked is None or ex.kind != "response" or self.protocol is None:
            return
        try:
            result = orjson.loads(raw).get("result")
        except (orjson.JSONDecodeError, AttributeError):
            return
        answered = protocols.get(self.protocol).answered_version(asked[0], asked[1], result)
        if answered is not None:
            self.version = answered


def _join(a: str | None, b: str) -> str:
    return b if not a else f"{a}; {b}"
