"""Short one-line renderings of JSON values, shared by every adapter's labels (reports, the
timeline). Kept apart from base.py so that the adapters' label modules are all that needs them."""

from __future__ import annotations

from typing import Any

import orjson

MAX = 70


def short(s: Any, n: int = MAX) -> str:
    """`s` on one line, cut at `n` characters; a non-string as JSON (None as `null`)."""
    if not isinstance(s, str):
        s = orjson.dumps(s).decode() if s is not None else "null"
    s = s.replace("\n", "\\n")
    return s if len(s) <= n else s[: n - 1] + "…"


def quote(s: Any, n: int = MAX) -> str:
    """`short(s, n)` in double quotes."""
    return '"' + short(s, n) + '"'


def quote_text(s: Any, n: int = 60) -> str:
    """Like `quote`, but a non-string as Python prints it and None as the empty string (the
    labels of ACP and MCP reports have always read so)."""
    s = "" if s is None else str(s)
    s = s.replace("\n", "\\n")
    return '"' + (s if len(s) <= n else s[: n - 1] + "…") + '"'


def as_dict(v: Any) -> dict:
    """`v` when it is a JSON object, else an empty one (fields of a frame may be anything)."""
    return v if isinstance(v, dict) else {}
