"""A recorded streamed answer served in another work dir: the recorded work dir becomes the live
one in what the model said (text, reasoning, tool arguments), the way the derived pin maps it
(kimi.PathMap): a tool call's arguments as assembled from all its pieces, then cut again into
as many pieces, so a path the model cut across two SSE events is mapped too. Only events that
change are written anew (JSON re-serialized); the others, and the chunk boundaries, stay as
recorded. A body that is not a stream of one SSE event per chunk is served as recorded.
Anthropic messages (`event: NAME` then `data:`) the same way: text and thinking deltas, and a
tool_use block's input_json_delta pieces as one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .kimi import PathMap


def _head(chunk: bytes) -> bytes:
    """What comes before the data of an SSE event: an Anthropic `event: NAME` line, or b""."""
    if chunk.startswith(b"event: ") and b"\ndata: " in chunk:
        return chunk[:chunk.index(b"\ndata: ") + 1]
    return b""


def _event(chunk: bytes) -> Any:
    chunk = chunk[len(_head(chunk)):]
    if not chunk.startswith(b"data: ") or not chunk.endswith(b"\n\n") or \
            chunk.count(b"\n\n") != 1:
        return None
    text = chunk[6:-2]
    if text.strip() == b"[DONE]":
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def mapped_chunks(chunks: Sequence[bytes], paths: PathMap) -> list[bytes]:
    """`chunks` (one SSE event each, OpenAI chat-completions) with the work dir mapped."""
    events = [_event(c) for c in chunks]
    changed: set[int] = set()
    # every tool call's argument pieces, in order: (event, choice, call) -> where each sits
    calls: dict[tuple[int, int], list[tuple[int, dict[str, Any], str]]] = {}
    for i, ev in enumerate(events):
        if ev is None:
            continue
        delta = ev.get("delta") if ev.get("type") == "content_block_delta" else None
        if isinstance(delta, dict):  # Anthropic
            for key in ("text", "thinking"):
                if isinstance(delta.get(key), str):
                    new = paths.plain(delta[key])
                    if new != delta[key]:
                        delta[key] = new
                        changed.add(i)
            if isinstance(delta.get("partial_json"), str):
                calls.setdefault((-1, int(ev.get("index") or 0)), []).append(
                    (i, delta, "partial_json"))
        for choice in ev.get("choices") or []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            for key in ("content", "reasoning_content"):
                if isinstance(delta.get(key), str):
                    new = paths.plain(delta[key])
                    if new != delta[key]:
                        delta[key] = new
                        changed.add(i)
            for tc in delta.get("tool_calls") or []:
                fn = tc.get("function") if isinstance(tc, dict) else None
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    key2 = (int(choice.get("index") or 0), int(tc.get("index") or 0))
                    calls.setdefault(key2, []).append((i, fn, "arguments"))
    for pieces in calls.values():
        before: list[str | None] = [fn[key] for _, fn, key in pieces]
        after = paths.pieces(before)
        for (i, fn, key), a, b in zip(pieces, before, after, strict=True):
            if a != b:
                fn[key] = b or ""
                changed.add(i)
    return [_head(c) + b"data: " + json.dumps(events[i], ensure_ascii=False).encode("utf-8")
            + b"\n\n" if i in changed else c for i, c in enumerate(chunks)]
