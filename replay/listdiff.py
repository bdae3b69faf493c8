"""Differences between two JSON lists of different lengths, for reports: what was added and what
was removed (`tools/list`'s tools, Wire's slash commands), not both lists cut at the same prefix.

Items are matched by their `name` when they are objects that have one (a tool that changed its
description is one changed item, not one removed and one added), else by their whole value."""

from __future__ import annotations

from collections.abc import Callable
from difflib import SequenceMatcher
from typing import Any

import orjson

from wire_recorder.recorder.protocols.text import short

Diff = Callable[[Any, Any, str, list[str], int], list[str]]


def _key(item: Any) -> str:
    name = item.get("name") if isinstance(item, dict) else None
    if isinstance(name, str):
        return "name=" + name
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS).decode()


def _where(path: str, item: Any, i: int) -> str:
    name = item.get("name") if isinstance(item, dict) else None
    return f"{path}[{short(name, 40) if isinstance(name, str) else i}]"


def list_diff(a: list, b: list, path: str, out: list[str], limit: int, diff: Diff) -> list[str]:
    """Append `path: N → M items`, then `path[x]: (absent) → item` per added item,
    `path[x]: item → (absent)` per removed one, and `diff`'s lines for an item (same name) that
    changed, up to `limit` lines in `out`."""
    added = removed = 0
    lines: list[str] = []
    ka, kb = [_key(x) for x in a], [_key(y) for y in b]
    for op, i1, i2, j1, j2 in SequenceMatcher(None, ka, kb, autojunk=False).get_opcodes():
        if op == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                if a[i] != b[j]:  # same name, other content
                    diff(a[i], b[j], _where(path, b[j], j), lines, limit)
            continue
        left: dict[str, list[int]] = {}
        for j in range(j1, j2):
            left.setdefault(kb[j], []).append(j)
        for i in range(i1, i2):
            same = left.get(ka[i])
            if same:  # moved or replaced in place: the same key on both sides
                j = same.pop(0)
                if a[i] != b[j]:
                    diff(a[i], b[j], _where(path, b[j], j), lines, limit)
                continue
            removed += 1
            lines.append(f"{_where(path, a[i], i)}: {short(a[i], 60)} → (absent)")
        for j in sorted(j for js in left.values() for j in js):
            added += 1
            lines.append(f"{_where(path, b[j], j)}: (absent) → {short(b[j], 60)}")
    out.append(f"{path or '(frame)'}: {len(a)} → {len(b)} items "
               f"({added} added, {removed} removed)")
    for line in lines:
        if len(out) >= limit:
            break
        out.append(line)
    return out
