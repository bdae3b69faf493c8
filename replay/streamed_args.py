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

from ..recorder.redact_stream import piece_of
from .normalize import canonical

if TYPE_CHECKING:
    from .compare import Item
    from .normalize import Normalizer

PART = "<part of the arguments above>"
# the protocols' streamed pieces (recorder/protocols/*/streamed.py) of a tool call's arguments:
# the group of the piece that begins one, and of the pieces that go on with it, plus its scope
_START, _GOES_ON = "tool-start", "tool"


def _calls(items: list[Item]) -> Iterator[list[Item]]:
    """The items of each tool call that has parts: the one that begins it, then the pieces that
    go on with it, per scope (the root agent, each subagent), in stream order."""
    open_: dict[str, list[Item]] = {}
    for it in items:
        found = piece_of(it.msg.obj)
        if found is None:
            continue
        group = found[0]
        if group.startswith(_START):
            calls = open_.pop(group[len(_START):], None)
            if calls is not None and len(calls) > 1:
                yield calls
            open_[group[len(_START):]] = [it]
        elif group.startswith(_GOES_ON) and group[len(_GOES_ON):] in open_:
            open_[group[len(_GOES_ON):]].append(it)
    for calls in open_.values():
        if len(calls) > 1:
            yield calls


def _put(obj: Any, path: tuple[str, ...], value: str) -> None:
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


def _text(normalizer: Normalizer, s: str) -> Any:
    return orjson.loads(normalizer.text(orjson.dumps(s)))


def join_tool_arguments(items: list[Item], normalizer: Normalizer) -> None:
    """Rewrite, in place, the items of tool calls whose assembled arguments normalise to more
    than their pieces do (see the module's doc)."""
    for group in _calls(items):
        raw, done, paths = [], [], []
        for it in group:
            r, d = piece_of(it.msg.obj), piece_of(it.norm)
            if r is None or d is None or d[1] != r[1]:
                break  # a shape the agent did not send: compared frame by frame
            raw.append(r[2])
            done.append(d[2])
            paths.append(d[1])
        else:
            # one pass over the whole text: most calls (nothing cut in two) stop here
            joined = _text(normalizer, "".join(raw))
            if not isinstance(joined, str) or joined == "".join(done):
                continue
            if any(d != _text(normalizer, r) for r, d in zip(raw, done, strict=True)):
                continue  # an ignore rule took a piece: it stays as the rule left it
            for i, (it, path) in enumerate(zip(group, paths, strict=True)):
                norm = orjson.loads(orjson.dumps(it.norm))  # a copy: the value may be shared
                _put(norm, path, joined if i == 0 else PART)
                it.norm, it.sig = norm, canonical(norm)
