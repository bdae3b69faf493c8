"""A recorded streamed answer served in another work dir: the recorded work dir becomes the live
one in what the model said (text, reasoning, tool arguments), the way the derived pin maps it
(kimi.PathMap): a tool call's arguments as assembled from all its pieces, then cut again into
as many pieces, so a path the model cut across two SSE events is mapped too. Only events that
change are written anew (JSON re-serialized); the others, and the chunk boundaries, stay as
recorded. A body that is not a stream of one SSE event per chunk is served as recorded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .kimi import PathMap


def _event(chunk: bytes) -> Any:
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
    calls: dict[tuple[int, int], list[tuple[int, dict[str, Any]]]] = {}
    for i, ev in enumerate(events):
        if ev is None:
            continue
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
                    calls.setdefault(key2, []).append((i, fn))
    for pieces in calls.values():
        before: list[str | None] = [fn["arguments"] for _, fn in pieces]
        after = paths.pieces(before)
        for (i, fn), a, b in zip(pieces, before, after, strict=True):
            if a != b:
                fn["arguments"] = b or ""
                changed.add(i)
    return [b"data: " + json.dumps(events[i], ensure_ascii=False).encode("utf-8") + b"\n\n"
            if i in changed else c for i, c in enumerate(chunks)]
