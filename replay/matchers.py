"""Which recorded request does a live agent request stand for? Decided by what it asks, never
by its id (kimi makes a fresh one per run).

A matcher is a small named function from a request (method, the protocol adapter's finer type,
normalised payload) to a JSON value; two requests match when every selected matcher gives equal
values. Matchers that do not concern a request's type give None on both sides, so they compose
freely.

Two matchers are generic and defined here: `method` and `payload`. Each protocol adapter adds
its own (`Adapter.matchers`, e.g. recorder/protocols/wire/matchers.py) and names its defaults
(`Adapter.default_match_on`):

    wire:     ("method", "type", "approval", "tool_call", "question", "hook", "other")
    acp, mcp: ("method", "payload")

All names share one namespace (`--match-on` takes any): the generic ones first, then each
adapter's in detection order; a name already taken is skipped with a warning on stderr.

Recorded requests wait in one queue per key (the tuple of matcher values), in recording order;
a live request takes the head of its key's queue. Register more with `@matcher("name")`.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from wire_recorder.recorder import protocols
from wire_recorder.recorder.completing_dict import CompletedOnDemand
from wire_recorder.recorder.errors import UsageError
from wire_recorder.recorder.protocols.base import Adapter, Matcher, Request

from .labels import _short, field_diff
from .normalize import canonical
from .recording import Msg

__all__ = ["DEFAULT_MATCH_ON", "MATCHERS", "MATCHER_DOCS", "Matcher", "Request", "RequestBook",
           "fallback_answer", "matcher", "parse_match_on", "rewrite_answer"]

class _Table(CompletedOnDemand[Any]):
    """MATCHERS and MATCHER_DOCS: the generic and in-tree adapters' matchers at import; those
    of third-party adapters (entry points, whose scan of every installed distribution costs
    10-30 ms a command) the first time a name is not found here or the whole table is read.
    The names and their order are the same as if all were registered at import."""

    def _complete(self) -> None:
        _adapter_matchers()


MATCHERS: dict[str, Matcher] = _Table()
MATCHER_DOCS: dict[str, str] = _Table()


def _put(name: str, fn: Matcher, doc: str) -> None:
    dict.__setitem__(MATCHERS, name, fn)
    dict.__setitem__(MATCHER_DOCS, name, doc or (fn.__doc__ or "").strip())


def matcher(name: str, doc: str = "") -> Callable[[Matcher], Matcher]:
    def register(fn: Matcher) -> Matcher:
        if _registered is not None:  # after the adapters' (not the generic ones at import)
            _adapter_matchers()
        _put(name, fn, doc)
        return fn

    return register


_registered: set[str] | None = None  # the adapters whose matchers are in MATCHERS


@matcher("method", "JSON-RPC method (`request` for Wire requests)")
def _method(r: Request) -> Any:
    return r.method


@matcher("payload", "the whole normalised payload, for every type (strict)")
def _payload(r: Request) -> Any:
    return r.payload


def _register(adapter: Adapter) -> None:
    assert _registered is not None
    if adapter.name in _registered:
        return
    _registered.add(adapter.name)
    for name, (fn, doc) in adapter.matchers.items():
        if dict.__contains__(MATCHERS, name):
            print(f"wire-replay: matcher {name!r} of protocol {adapter.name} is already "
                  f"taken; skipped", file=sys.stderr)
            continue
        _put(name, fn, doc)


def _adapter_matchers(in_tree_only: bool = False) -> None:
    global _registered
    if _registered is None:
        _registered = set()
    # the in-tree adapters come first in detection order, so registering them alone first
    # keeps the order (and which of two equal names wins) of registering all at once
    for name in protocols.IN_TREE:
        _register(protocols.get(name))
    if not in_tree_only:
        for adapter in protocols.ADAPTERS.values():
            _register(adapter)


_adapter_matchers(in_tree_only=True)

DEFAULT_MATCH_ON: tuple[str, ...] = protocols.get(protocols.LEGACY).default_match_on


def parse_match_on(spec: str | Sequence[str] | None,
                   default: Sequence[str] = DEFAULT_MATCH_ON) -> tuple[str, ...]:
    """Matcher names from `--match-on`; None: `default` (the protocol adapter's)."""
    if spec is None:
        return tuple(default)
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec)]
    names = [n for n in names if n]
    if names and names[0] == "+":  # "+,tool_call_id": the defaults and more
        names = list(default) + names[1:]
    unknown = [n for n in names if n not in MATCHERS]
    if unknown or not names:
        raise UsageError(f"unknown matcher {', '.join(unknown) or '(none given)'}",
                               f"known: {', '.join(MATCHERS)}")
    return tuple(dict.fromkeys(names))


@dataclass
class Entry:
    """A recorded request waiting to be matched."""

    msg: Msg
    request: Request
    parts: tuple[bytes, ...]  # canonical value of each matcher
    used_by: Msg | None = None


@dataclass
class NearMiss:
    entry: Entry
    failed: list[str]  # names of the matchers that gave different values
    detail: str  # first failing matcher: recorded value vs live value

    def line(self, describe: Callable[[Msg], str]) -> str:
        state = "already used" if self.entry.used_by is not None else "unused"
        why = ", ".join(self.failed) if self.failed else "same key, but its queue is used up"
        return (f"{describe(self.entry.msg)} (recorded frame {self.entry.msg.index + 1}, {state}): "
                f"differs in {why}" + (f" — {self.detail}" if self.detail else ""))


class RequestBook:
    """The recorded requests, one queue per key, used up in recording order."""

    def __init__(self, match_on: Sequence[str] = DEFAULT_MATCH_ON):
        self.match_on = tuple(match_on)
        self.fns = [MATCHERS[n] for n in self.match_on]
        self.entries: list[Entry] = []
        self.queues: dict[tuple[bytes, ...], deque[Entry]] = {}

    def parts(self, r: Request) -> tuple[bytes, ...]:
        return tuple(canonical(fn(r)) for fn in self.fns)

    def add(self, msg: Msg, request: Request) -> None:
        e = Entry(msg, request, self.parts(request))
        self.entries.append(e)
        self.queues.setdefault(e.parts, deque()).append(e)

    def extend(self, items: Iterable[tuple[Msg, Request]]) -> RequestBook:
        for m, r in items:
            self.add(m, r)
        return self

    def match(self, live: Msg, request: Request) -> Entry | None:
        q = self.queues.get(self.parts(request))
        if not q:
            return None
        e = q.popleft()
        e.used_by = live
        return e

    def near_misses(self, request: Request, n: int = 3) -> list[NearMiss]:
        parts = self.parts(request)
        scored = []
        for e in self.entries:
            failed = [name for name, a, b in zip(self.match_on, e.parts, parts, strict=True) if a != b]
            scored.append((len(failed), e.used_by is not None, e.msg.index, e, failed))
        scored.sort(key=lambda x: x[:3])
        out = []
        for _, _, _, e, failed in scored[:n]:
            detail = ""
            if failed:
                i = self.match_on.index(failed[0])
                old, new = orjson.loads(e.parts[i]), orjson.loads(parts[i])
                diffs = field_diff(old, new, limit=1) if isinstance(old, (dict, list)) or \
                    (isinstance(old, str) and isinstance(new, str)
                     and max(len(old), len(new)) > 60) else []
                # the first differing field says more than the start of two long payloads
                detail = (f"{failed[0]}: {diffs[0]}" if diffs else
                          f"{failed[0]}: recorded {_short(old, 60)}, live {_short(new, 60)}")
            out.append(NearMiss(e, failed, detail))
        return out

    def unused(self) -> list[Entry]:
        return [e for e in self.entries if e.used_by is None]


def rewrite_answer(answer: Msg, recorded_req: Msg, live_req: Msg) -> bytes:
    """The recorded answer, re-addressed to the live request: its JSON-RPC id and the ids inside
    the result that the protocol adapter names (Wire: request_id, tool_call_id, …) become the
    live request's."""
    mapping: dict[str, Any] = {}
    if isinstance(recorded_req.rpc_id, str):
        mapping[recorded_req.rpc_id] = live_req.rpc_id
    rp, lp = recorded_req.payload, live_req.payload
    if isinstance(rp, dict) and isinstance(lp, dict):
        for k in live_req.adapter.answer_id_fields:
            if isinstance(rp.get(k), str) and k in lp:
                mapping.setdefault(rp[k], lp[k])
    obj = answer.obj if isinstance(answer.obj, dict) else {}
    out = {}
    for k, v in obj.items():
        if k == "id":
            out[k] = live_req.rpc_id
        elif k in ("result", "error"):
            out[k] = _replace(v, mapping)
        else:
            out[k] = v
    return orjson.dumps(out)


def _replace(v: Any, mapping: dict[str, Any]) -> Any:
    if isinstance(v, str):
        return mapping.get(v, v)
    if isinstance(v, dict):
        return {k: _replace(x, mapping) for k, x in v.items()}
    if isinstance(v, list):
        return [_replace(x, mapping) for x in v]
    return v


def fallback_answer(live_req: Msg, mode: str) -> bytes:
    """What `--on-unmatched reject|error` sends for a request with no recorded answer: the
    protocol adapter's way of declining it, else a JSON-RPC error."""
    rid = live_req.rpc_id
    if mode == "reject":
        result = live_req.adapter.reject_answer(live_req.method, live_req.msg_type,
                                                live_req.payload, rid)
        if result is not None:
            return orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result})
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "error": {
        "code": -32000, "message": "wire-replay: no recorded answer for this request"}})
