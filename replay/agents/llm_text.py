"""Text of a recorded model request against a live one: the stored copy is redacted
(recorder/redact.py puts `REDACTED:<12 hex>` where it saw a secret, keyed per recording), so a
recorded string matches a live one when the live one is the same with anything non-empty at
each placeholder."""

from __future__ import annotations

import re

from wire_recorder.recorder.redact import PLACEHOLDER_TEXT_RE


def aligned(recorded: str, live: str) -> str:
    """`live` as the recording would hold it: `recorded` itself when the two match around the
    placeholders, else `live` unchanged (its difference is then shown as it is)."""
    if recorded == live or not PLACEHOLDER_TEXT_RE.search(recorded):
        return live
    parts = PLACEHOLDER_TEXT_RE.split(recorded)
    pattern = "(.+?)".join(re.escape(p) for p in parts)
    return recorded if re.fullmatch(pattern, live, re.DOTALL) else live


def first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
