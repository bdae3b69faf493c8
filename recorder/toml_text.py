"""A TOML document for what `tomllib` (or a JSON config) read: the model leg writes a copy of an
agent's config with one value changed (recorder/llm_upstream_kimicode.py), replay's pins write
the agent's config with the model pinned (replay/agents/). Comments and layout are not kept; the
values are, but for nulls (a JSON config's), which TOML has not: they are left out."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import date, datetime, time
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _string(s: str) -> str:
    # JSON's escapes are TOML's; TOML also wants DEL escaped
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def _key(k: str) -> str:
    return k if _BARE_KEY.fullmatch(k) else _string(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, datetime | date | time):
        return v.isoformat()
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v if x is not None) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(str(k))} = {_value(x)}" for k, x in v.items()
                               if x is not None) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def dumps(data: Mapping[str, Any]) -> str:
    """Tables as [headers], the rest inline."""
    lines: list[str] = []

    def table(prefix: tuple[str, ...], d: Mapping[str, Any]) -> None:
        subtables = [(k, v) for k, v in d.items() if isinstance(v, dict)]
        plain = [(k, v) for k, v in d.items() if not isinstance(v, dict) and v is not None]
        if prefix and (plain or not subtables):
            lines.append("")
            lines.append("[" + ".".join(_key(p) for p in prefix) + "]")
        for k, v in plain:
            lines.append(f"{_key(str(k))} = {_value(v)}")
        for k, v in subtables:
            table((*prefix, str(k)), v)

    table((), data)
    return "\n".join(lines).lstrip("\n") + "\n"
