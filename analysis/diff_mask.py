"""Volatile values of one session masked before `wire-diff` compares it, as replay masks them
(recorder/protocols/volatile.py): UUIDs, clocks, redaction placeholders, the adapter's own
patterns, and the scratch paths and session id its command line and work dir name. What is left
differs only where the agent or its client did something else."""

from __future__ import annotations

import re
from typing import Any

import orjson

from wire_recorder.recorder.protocols import volatile
from wire_recorder.recorder.protocols.base import Adapter


class Masker:
    def __init__(self, adapter: Adapter, command: list[str], cwd: str | None,
                 workdir: str | None = None):
        values = volatile.environment_values(command, cwd, None, adapter)
        if workdir and len(workdir.rstrip("/")) > 1:
            values.append((volatile.json_inner(workdir.rstrip("/")), b"<path>"))
            values.sort(key=lambda x: -len(x[0]))
        patterns = volatile.value_patterns(adapter)
        alts = [re.escape(lit) for lit, _ in values] + [p for _, p, _ in patterns]
        self._placeholders = [ph for _, ph in values] + [ph for _, _, ph in patterns]
        self._re = re.compile(b"|".join(b"(" + a + b")" for a in alts)) if alts else None

    def _sub(self, m: re.Match) -> bytes:
        return self._placeholders[(m.lastindex or 1) - 1]

    def value(self, v: Any) -> Any:
        """v (any JSON value) with its volatile parts replaced by placeholders."""
        if v is None or isinstance(v, (bool, int, float)) or self._re is None:
            return v
        raw = orjson.dumps(v)
        out = self._re.sub(self._sub, raw)
        return v if out == raw else orjson.loads(out)

    def json_text(self, text: str | None) -> Any:
        """A JSON text (tool arguments, an answer) as its masked value; text that is not JSON
        stays text (masked)."""
        if text is None:
            return None
        try:
            return self.value(orjson.loads(text))
        except orjson.JSONDecodeError:
            return self.value(text)
