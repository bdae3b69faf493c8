"""Origin sessions: the recorded sessions that created what a session refers to.

An ACP client that reopens a session (session/load) names a sessionId an earlier `kimi acp`
process minted and kept on disk. A fresh agent under replay has no such session, so replay first
re-runs the recorded session that minted it (and, in turn, that session's own origins) against
the same agent set-up, and carries the live ids it got over. Where the origin is looked for: the
same .db, or for a transcript NAME.jsonl the NAME.origin.jsonl beside it (what
sample_sessions/record.py writes), plus any files given with `--origin` (.db or .jsonl).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from wire_recorder.recorder.errors import UserError
from wire_recorder.recorder.store import open_store
from wire_recorder.recorder.transcript import load_recording

from .recording import Recording, build_recording

MAX_DEPTH = 8  # a chain of reopenings longer than this is a loop or a mistake


@dataclass
class Origins:
    chain: list[Recording] = field(default_factory=list)  # oldest first, replayed in this order
    notes: list[str] = field(default_factory=list)  # values no file here created


def minted_values(rec: Recording) -> set[str]:
    out: set[str] = set()
    for m in rec.msgs:
        if m.direction == "a2c" and m.kind == "response" and m.id_key in rec.client_requests:
            out.update(rec.adapter.minted(rec.client_requests[m.id_key], m.payload))
    return out


def referred_values(rec: Recording) -> list[str]:
    """Values this session's client requests refer to that the session did not mint itself."""
    own = minted_values(rec)
    out: list[str] = []
    for m in rec.msgs:
        if m.direction == "c2a" and m.kind == "request":
            params = m.obj.get("params") if isinstance(m.obj, dict) else None
            out += [v for v in rec.adapter.refers(m.method, params) if v not in own and v not in out]
    return out


def _candidates(path: str, value: str, protocol: str, exclude: set[str]) -> list[Recording]:
    if path.endswith(".jsonl"):
        session, frames = load_recording(path)
        if session["session_id"] in exclude:
            return []
        return [build_recording(path, session, frames)]
    with open_store(path, read_only=True) as store:
        # only sessions whose responses mention the value at all are loaded
        ids = [r[0] for r in store.con.execute(
            "SELECT DISTINCT f.session_id FROM frames f JOIN sessions s USING (session_id) "
            "WHERE f.direction = 'a2c' AND f.kind = 'response' AND s.protocol = ? "
            "AND position(? IN CAST(f.payload AS VARCHAR)) > 0", [protocol, value]).fetchall()]
        out = []
        for sid in ids:
            if sid in exclude:
                continue
            session = store.session(sid)
            out.append(build_recording(path, session, store.frames(sid)))
        return out


def _readable(path: str, value: str, protocol: str, exclude: set[str]) -> list[Recording]:
    try:
        return _candidates(path, value, protocol, exclude)
    except UserError as e:  # say which file: the user named several
        e.message = f"looking for the session that created {value}: {e.message}"
        raise


def find_origins(rec: Recording, sources: Sequence[str] = ()) -> Origins:
    """The sessions to replay before `rec`, oldest first. `sources` are extra files to search;
    rec's own .db is always searched."""
    files = [os.fspath(s) for s in sources]
    own: str | None
    if not rec.path.endswith(".jsonl"):
        own = rec.path
    else:
        own = rec.path[:-len(".jsonl")] + ".origin.jsonl"
        own = own if os.path.isfile(own) else None
    if own is not None and own not in files:
        files.insert(0, own)
    result = Origins()
    seen = {rec.session_id}

    def resolve(r: Recording, depth: int) -> None:
        for value in referred_values(r):
            origin = None
            for path in files:
                for cand in _readable(path, value, r.protocol, seen):
                    if value in minted_values(cand):
                        origin = cand
                        break
                if origin is not None:
                    break
            if origin is None:
                where = f"no session in {', '.join(files)} created" if files else \
                    "this recording did not create and no --origin was given"
                result.notes.append(
                    f"session {r.session_id} reopens {value}, which {where}: the agent must "
                    f"have it already (give the recording of the session that created it with "
                    f"--origin, or record both into one .db)")
                continue
            if depth >= MAX_DEPTH:
                result.notes.append(f"origin chain longer than {MAX_DEPTH} sessions: stopped "
                                    f"at {origin.session_id}")
                continue
            seen.add(origin.session_id)
            resolve(origin, depth + 1)  # its own origins go first
            result.chain.append(origin)

    resolve(rec, 0)
    return result
