"""The origin of an exported session: the earlier session of the same recordings that it
reopens, written beside its transcript as NAME.origin.jsonl (where wire-replay looks for it), so
an exported resumed session replays on its own.

Two ways a session reopens an earlier one (docs/replay.md; replay/origins.py finds them in a
Recording, this module in the stored frames; the argv rules are recorder/resume_rules.py):

* a client request names a value an earlier session's agent minted (ACP session/load: the
  adapter's `refers` and `minted`);
* the agent command resumes one (kimi `-S ID` / `-r ID`: an earlier session of the same work dir
  whose command or frames name ID; `-C`: the work dir's latest earlier session).
"""

from __future__ import annotations

from typing import Any

import orjson

from wire_recorder.recorder import protocols
from wire_recorder.recorder.model import Frame
from wire_recorder.recorder.resume_rules import names_id, resume_flag_in, session_flags, workdir_in

from .sources import Workspace


def _command(session: dict) -> list[str]:
    cmd = session.get("command")
    try:
        value = orjson.loads(cmd) if isinstance(cmd, str) else cmd
    except orjson.JSONDecodeError:
        return []
    return [str(a) for a in value] if isinstance(value, list) else []


def _workdir(session: dict, argv: list[str]) -> Any:
    return workdir_in(argv, session.get("cwd"))


def _messages(frames: list[Frame]) -> list[tuple[str, dict]]:
    out = []
    for f in frames:
        if f.direction in ("c2a", "a2c") and f.raw:
            try:
                obj = orjson.loads(f.raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                out.append((f.direction, obj))
    return out


def _minted(adapter: protocols.Adapter, msgs: list[tuple[str, dict]]) -> set[str]:
    asked = {repr(m.get("id")): m.get("method") for d, m in msgs
             if d == "c2a" and "method" in m and "id" in m}
    out: set[str] = set()
    for d, m in msgs:
        if d == "a2c" and "result" in m and repr(m.get("id")) in asked:
            out.update(adapter.minted(asked[repr(m.get("id"))], m["result"]))
    return out


def origin_of(ws: Workspace, sid: str, session_row, frames_of) -> str | None:
    """The id of the session `sid` reopens among the workspace's earlier sessions, or None.
    `session_row(ws, sid)` and `frames_of(ws, sid)` read a session (export.py's readers)."""
    session = session_row(ws, sid)
    adapter = protocols.for_session(session.get("protocol"))
    argv = _command(session)
    flags = session_flags(adapter.session_flags)
    flag = resume_flag_in(argv, flags)
    msgs = _messages(frames_of(ws, sid))
    own = _minted(adapter, msgs)
    referred = {v for d, m in msgs if d == "c2a" and "method" in m and "id" in m
                for v in adapter.refers(m["method"], m.get("params")) if v not in own}
    if not referred and flag is None:
        return None
    started = session.get("started_at")
    earlier = [r[0] for r in ws.con.execute(
        "SELECT session_id FROM sessions WHERE session_id <> ? AND protocol IS NOT DISTINCT FROM ? "
        "AND (? IS NULL OR started_at < ?) ORDER BY started_at DESC",
        [sid, session.get("protocol"), started, started]).fetchall()]
    for cand in earlier:
        row = session_row(ws, cand)
        frames = frames_of(ws, cand)
        if referred and referred & _minted(adapter, _messages(frames)):
            return cand
        if flag is None:
            continue
        cargv = _command(row)
        if _workdir(row, cargv) != _workdir(session, argv):
            continue  # kimi finds sessions by their work dir
        if flag[1] is None or resume_flag_in(cargv, flags) == flag:
            return cand
        named = names_id(flag[1])
        if any(f.raw and named.search(f.raw) for f in frames):
            return cand  # kimi made the id up and said it (stderr: "kimi -r ID")
    return None
