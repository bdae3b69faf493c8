"""What `wire-diff` compares: each side is a session named by a file (its only session),
`FILE#SESSION` (a name, id, or unique prefix of either), or a session name or id found in the
`--db` files; the second side may also be a replay report (`wire-replay --report r.json`) of
the first, read as data."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import orjson

from wire_recorder.recorder.errors import InputError, NotARecording, SessionNotFound

from .diff_trace import Trace, load_trace
from .sources import open_workspace

SPEC_HINT = "give FILE, FILE#SESSION, or a session name or id with --db FILE"


@dataclass
class ReplayReport:
    """A wire-replay JSON report: what the replay of one recorded session found."""

    path: str
    data: dict[str, Any]

    @property
    def session_id(self) -> str | None:
        return self.data.get("session_id")

    def describe(self) -> dict[str, Any]:
        return {"path": self.path, "session_id": self.session_id, "name": self.data.get("name"),
                "replay_of": self.data.get("recording"), "mode": self.data.get("mode")}


def read_report(path: str) -> ReplayReport | None:
    """The replay report at path, None when the file is not one (a JSON object with the
    report's keys)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1)
            if head not in (b"{", b" ", b"\n"):
                return None
            data = orjson.loads(head + f.read())
    except (OSError, orjson.JSONDecodeError):
        return None
    if isinstance(data, dict) and "divergences" in data and "session_id" in data:
        return ReplayReport(path, data)
    return None


def _split(spec: str) -> tuple[str, str | None]:
    """(file, session) of FILE#SESSION, or (spec, None)."""
    if os.path.exists(spec):
        return spec, None
    head, sep, tail = spec.rpartition("#")
    if sep and head and os.path.exists(head):
        return head, tail or None
    return spec, None


def load_side(spec: str, dbs: list[str]) -> Trace | ReplayReport:
    path, session = _split(os.path.expanduser(spec))
    if os.path.exists(path):
        if path.endswith(".json"):
            report = read_report(path)
            if report is None:
                raise NotARecording(f"{path} is neither a recording nor a wire-replay report",
                                    SPEC_HINT)
            return report
        with open_workspace([path], materialize=True) as ws:
            try:
                sid = ws.resolve_session(session)
            except SessionNotFound as e:
                hint = e.hint.replace("pick one with --session NAME or ID",
                                      f"pick one with {path}#NAME or ID") if e.hint else None
                raise SessionNotFound(e.message, hint) from None
            return load_trace(ws, sid, path)
    if not dbs:
        raise InputError(f"{spec}: no such file", SPEC_HINT)
    with open_workspace(dbs, materialize=True) as ws:
        sid = ws.resolve_session(spec)
        where = ws.con.execute("SELECT source_file FROM sessions WHERE session_id = ?",
                               [sid]).fetchone()
        return load_trace(ws, sid, where[0] if where else ws.where())
