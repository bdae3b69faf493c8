"""Origin sessions: the recorded sessions that created what a session refers to.

Two ways a session reopens an earlier one:

* a request names a value an earlier agent process minted (ACP session/load, below);
* the agent command resumes one (kimi `-S ID`, `-C`): the recorded command says so. The session
  it resumes is the latest earlier session of the same file and work dir whose command or
  stderr names that id (`-S ID`), or any such session (`-C`). Only these flags, with a plain id, are
  carried over to the live command (`resume_args`), never the rest of the recorded argv.

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
from typing import Any

from wire_recorder.recorder.errors import UserError
from wire_recorder.recorder.resume_rules import names_id, resume_flag_in, session_flags, workdir_in
from wire_recorder.recorder.store import Store, open_store
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
        flag = resume_flag(r)
        if flag is not None:
            origin = resumed_origin(r, files, seen)
            if origin is not None and depth < MAX_DEPTH:
                seen.add(origin.session_id)
                resolve(origin, depth + 1)
                result.chain.append(origin)
            elif origin is None and flag[1] is None:
                result.notes.append(f"session {r.session_id} continues the work dir's last "
                                    f"session (-C), which no session recorded before it in this "
                                    f"file ran: the agent starts a new one")
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


AUTO_PICK_MAX = 8  # sessions in a file beyond which replay does not look for the final one


def final_session(path: str, store: Store) -> str | None:
    """The id of the one session of the .db at `path` (open as `store`) that no other session
    there reopens (the others are its origins, replayed first anyway), so that replaying a
    resumed session's file needs no --session; None when the file has one session, too many,
    or no single such one."""
    sessions = store.sessions()
    if not 1 < len(sessions) <= AUTO_PICK_MAX:
        return None
    recs = [build_recording(path, s, store.frames(s["session_id"])) for s in sessions]
    origins = {o.session_id for r in recs for o in find_origins(r).chain}
    finals = [r.session_id for r in recs if r.session_id not in origins]
    return finals[0] if len(finals) == 1 and origins else None


def resume_hint(r: Any) -> list[str]:
    """For a red replay (a ReplayResult `r`) of a session whose recorded command resumed one by
    id with no recording of it replayed first: the likely cause, and what to give (a session
    started fresh with -S ID looks the same in its recording, so it is a hint, not a note)."""
    flag = resume_flag(r.recording) if r.mode != "serve" and not r.origins else None
    if flag is None or flag[1] is None:  # (-C without an origin has its note)
        return []
    return [f"the recorded command resumes session {flag[1]} ({flag[0]}) and no recording of "
            f"it was replayed first: if the agent had that session before, give the recording "
            f"that made it with --origin (wire-export writes it beside a transcript as "
            f"NAME.origin.jsonl), or record both into one .db"]


def resume_flag(rec: Recording) -> tuple[str, str | None] | None:
    """("-S", ID) or ("-C", None) when the recorded command resumes a session; None otherwise
    (also for an id that is not plain: it is never put on a live command line)."""
    return resume_flag_in(rec.command, _session_flags(rec), strict=True)


def _session_flags(rec: Recording) -> tuple[str, ...]:
    return session_flags(rec.adapter.session_flags)


def resume_args(chain: Sequence[Recording], argv: Sequence[str]) -> list[list[str]]:
    """The flags to add to the live `argv` for each session of `chain` (origins first), so that
    each resumes what its recorded command resumed: `-S ID` / `-C`, nothing else, and only to
    the program that was recorded (same name). Nothing is added when the live command already
    names a session itself. A session that is resumed by
    `-S ID` without having named the id itself (kimi made it up) gets `-S ID` too, so that the
    live agent creates it under the id its successor resumes."""
    out: list[list[str]] = [[] for _ in chain]
    if not chain or not argv or resume_flag_in(argv, _session_flags(chain[-1])) is not None:
        return out
    # the flags are the recorded program's: never given to another program
    flags = [resume_flag(r) if r.command and
             os.path.basename(r.command[0]) == os.path.basename(argv[0]) else None
             for r in chain]
    for i, f in enumerate(flags):
        if f is None or (f[1] is None and i == 0):  # -C with nothing recorded to continue
            continue
        out[i] = [f[0]] if f[1] is None else [f[0], f[1]]
        if f[1] is not None and i > 0 and flags[i - 1] is None:
            out[i - 1] = [f[0], f[1]]
    return out


def _sessions_before(path: str, rec: Recording, exclude: set[str]) -> list[Recording]:
    """The sessions of `path` (same protocol) recorded before `rec`, latest first."""
    if path.endswith(".jsonl"):
        session, frames = load_recording(path)
        if session["session_id"] in exclude:
            return []
        return [build_recording(path, session, frames)]
    started = rec.session.get("started_at")
    with open_store(path, read_only=True) as store:
        out = []
        for s in reversed(store.sessions()):
            if s["session_id"] in exclude or s.get("protocol") != rec.protocol:
                continue
            if started is not None and s.get("started_at") is not None and \
                    s["started_at"] >= started:
                continue
            out.append(build_recording(path, s, store.frames(s["session_id"])))
        return out


def _workdir(rec: Recording) -> str | None:
    return workdir_in(rec.command, rec.cwd)


def _resumes(cand: Recording, flag: tuple[str, str | None], rec: Recording) -> bool:
    """Could `rec` (with its resume `flag`) have reopened `cand`? Only a session of the same
    work dir: kimi finds sessions by it (two runs of one scenario elsewhere are not a chain)."""
    if _workdir(cand) != _workdir(rec):
        return False
    if flag[1] is None:  # -C: the work dir's last session
        return True
    if resume_flag(cand) == flag:
        return True
    # kimi made the id up: it says it on stderr at exit ("kimi -r ID")
    sid = names_id(flag[1])
    return sid.search(cand.stderr) is not None or any(sid.search(m.raw) for m in cand.msgs)


def resumed_origin(rec: Recording, files: Sequence[str], exclude: set[str]) -> Recording | None:
    flag = resume_flag(rec)
    if flag is None:
        return None
    for path in files:
        try:
            cands = _sessions_before(path, rec, exclude)
        except UserError as e:
            e.message = f"looking for the session {rec.session_id} resumes: {e.message}"
            raise
        for cand in cands:
            if _resumes(cand, flag, rec):
                return cand
    return None
