"""A tool call's arguments, compared as the agent assembled them, not as the model cut them.

A real model streams a tool call's JSON arguments in pieces cut anywhere: Wire shows a
`ToolCall` (its first piece) and then one `ToolCallPart` per piece, and a path is often cut in
two. Normalising each frame alone then misses the path (neither half is the work dir), so a
replay from another work dir differs in both halves although the agent got the same arguments
once its work dir is masked. Here each tool call's pieces are joined and normalised as one text
(the same normaliser, on the assembled text); when that finds something the pieces alone did
not, the ToolCall item carries the normalised assembled arguments and each of its parts only
the mark PART: how many pieces there were still counts, where they were cut does not. Tool
calls whose pieces normalise alike either way are left as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson

from .normalize import canonical

if TYPE_CHECKING:
    from .compare import Item
    from .normalize import Normalizer

PART = "<part of the arguments above>"
_TYPES = frozenset({"ToolCall", "ToolCallPart", "SubagentEvent"})


def _inner(obj: Any) -> tuple[str | None, list[str], Any]:
    """(event type, scope, payload) of a Wire event frame, through SubagentEvent wrappers;
    scope is the chain of subagent ids ([] for the root agent)."""
    params = obj.get("params") if isinstance(obj, dict) else None
    if not isinstance(params, dict) or obj.get("method") != "event":
        return None, [], None
    etype, payload, scope = params.get("type"), params.get("payload"), []
    while etype == "SubagentEvent" and isinstance(payload, dict):
        scope.append(str(payload.get("agent_id")))
        event = payload.get("event")
        if not isinstance(event, dict):
            return None, [], None
        etype, payload = event.get("type"), event.get("payload")
    return (etype if isinstance(etype, str) else None), scope, payload


def _piece(etype: str, payload: Any) -> Any:
    if not isinstance(payload, dict):
        return None
    if etype == "ToolCall":
        fn = payload.get("function")
        return fn.get("arguments") if isinstance(fn, dict) else None
    return payload.get("arguments_part")


def _calls(items: list[Item]) -> Iterator[list[Item]]:
    """The items of each tool call that has parts: its ToolCall, then its ToolCallParts, per
    scope (the root agent, each subagent), in stream order."""
    open_: dict[tuple[str, ...], list[Item]] = {}
    for it in items:
        if it.msg.msg_type not in _TYPES:  # most frames: one set lookup
            continue
        etype, scope, _ = _inner(it.msg.obj)
        if etype == "ToolCall":
            group = open_.pop(tuple(scope), None)
            if group is not None and len(group) > 1:
                yield group
            open_[tuple(scope)] = [it]
        elif etype == "ToolCallPart" and tuple(scope) in open_:
            open_[tuple(scope)].append(it)
    for group in open_.values():
        if len(group) > 1:
            yield group


def _text(normalizer: Normalizer, s: str) -> Any:
    return orjson.loads(normalizer.text(orjson.dumps(s)))


def join_tool_arguments(items: list[Item], normalizer: Normalizer) -> None:
    """Rewrite, in place, the items of tool calls whose assembled arguments normalise to more
    than their pieces do (see the module's doc)."""
    for group in _calls(items):
        raw, done = [], []
        for it in group:
            etype, _, payload = _inner(it.msg.obj)
            r, d = _piece(str(etype), payload), _piece(str(etype), _inner(it.norm)[2])
            if not (r is None or isinstance(r, str)) or not (d is None or isinstance(d, str)):
                break  # a shape the agent did not send: compared frame by frame
            raw.append(r or "")
            done.append(d or "")
        else:
            # one pass over the whole text: most calls (nothing cut in two) stop here
            joined = _text(normalizer, "".join(raw))
            if not isinstance(joined, str) or joined == "".join(done):
                continue
            if any(d != _text(normalizer, r) for r, d in zip(raw, done, strict=True)):
                continue  # an ignore rule took a piece: it stays as the rule left it
            for it in group:
                norm = orjson.loads(orjson.dumps(it.norm))  # a copy: the value may be shared
                etype, _, payload = _inner(norm)
                if etype == "ToolCall":
                    if isinstance(payload.get("function"), dict):
                        payload["function"]["arguments"] = joined
                else:
                    payload["arguments_part"] = PART
                it.norm, it.sig = norm, canonical(norm)
