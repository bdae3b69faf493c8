"""`wire-replay SESSION --fork-at REQUEST --answer CHANGE -- AGENT`: what would the agent have done
had the client answered one request differently?

The session is replayed up to that request with the model pinned (or the agent's own with
--live-llm), the changed answer is given instead of the recorded one, and the run goes on as a
replay does: the recorded client's later frames in causal order, the pinned model answering as
long as the agent asks what it was asked (an agent that asks something else gets the pinned
model's "exhausted" error, as in any replay; --live-llm goes on with the agent's own model).
The live run is stored as a new session in the same .db (or the one -o names), linked to its
parent by its tags: fork_of (the parent's session id), fork_at (the request) and fork_change.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from wire_recorder.recorder.errors import OutputError, UsageError
from wire_recorder.recorder.store import open_store
from wire_recorder.recorder.transcript import store_session

from .driver import ReplayOptions, ReplayResult, _replay_session, gc_paused
from .engine.fork import ForkEngine, changed_answer, fork_point
from .labels import describe
from .recording import Recording, load
from .update import live_session


@dataclass
class Fork:
    """A fork's run and where its branch was stored."""

    result: ReplayResult
    parent_id: str
    at: str  # the request forked at, described
    change: str  # the change, in words
    applied: str | None  # where in the live run it was applied (None: never reached)
    path: str | None = None  # the .db the branch is in
    session_id: str | None = None  # the branch's id
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0: the branch ran and is stored; 1: the fork point was never reached."""
        return 0 if self.session_id is not None else 1

    def summary(self) -> str:
        if self.session_id is None:
            why = self.result.first
            said = f": {why.headline()}" if why is not None else ""
            return (f"not forked: the replay never reached {self.at} (it stopped: "
                    f"{self.result.stopped or 'the agent never asked it'}){said}\n")
        n = len(self.result.divergences)
        first = self.result.first
        diff = (f"; it differs from the parent in {n} place{'s' if n != 1 else ''}, first: "
                f"{first.headline()}" if first is not None else "; it did as the parent did")
        return (f"forked {self.parent_id} at {self.at} ({self.applied}): {self.change}; "
                f"branch stored as session {self.session_id} in {self.path}{diff}\n")


def fork_session(recording: Recording | str | os.PathLike, agent: Sequence[str] | None, *,
                 fork_at: str, answer: str, env: Mapping[str, str] | None = None,
                 cwd: str | None = None, session_id: str | None = None,
                 options: ReplayOptions | None = None, origin_files: Sequence[str] = (),
                 output: str | None = None) -> Fork:
    """Fork `recording` at the agent request `fork_at` names (engine.fork.fork_point) with the
    answer changed by `answer` (engine.fork.changed_answer), run it against `agent`, and store
    the branch in `output` (a .db; default: the recording's own .db)."""
    rec = recording if isinstance(recording, Recording) else load(recording, session_id)
    path = output or rec.path
    if not path.endswith(".db"):
        raise UsageError(f"a fork is stored as a session in a .db, and {path} is not one",
                         "give -o BRANCHES.db (new or existing)")
    req = fork_point(rec, fork_at)
    new_answer, change = changed_answer(rec, req, answer)

    made: list[ForkEngine] = []

    def engine(*args: Any, **kw: Any) -> ForkEngine:
        made.append(ForkEngine(*args, fork_index=req.index, answer=new_answer, **kw))
        return made[-1]

    with gc_paused():
        result = _replay_session(rec, agent, env=env, cwd=cwd, session_id=None,
                                 options=options, origin_files=origin_files, engine=engine)
    fork = Fork(result, rec.session_id, describe(req), change, None)
    fork.applied = made[-1].forked_at if made else None
    if fork.applied is None:
        return fork
    fork.path, fork.session_id = path, _store(result, path, rec, fork)
    return fork


def _store(result: ReplayResult, path: str, rec: Recording, fork: Fork) -> str:
    session, frames = live_session(result)
    tags = session.get("tags")
    if isinstance(tags, str):
        try:
            tags = orjson.loads(tags)
        except orjson.JSONDecodeError:
            tags = {}
    tags = dict(tags) if isinstance(tags, dict) else {}
    try:
        with open_store(path) as store:
            taken = {s["session_id"] for s in store.sessions()}
            n = 1
            while f"{rec.session_id}-fork-{n}" in taken:
                n += 1
            sid = f"{rec.session_id}-fork-{n}"
            tags.update(fork_of=rec.session_id, fork_at=fork.at, fork_change=fork.change)
            session.update(session_id=sid, name=f"{rec.name}-fork-{n}", tags=tags)
            frames = [dataclasses.replace(f, session_id=sid) for f in frames]  # (the parent's)
            # one transaction: a fork stopped while storing (wire-ui closing) leaves no branch
            # without its frames; a connection closed before the commit rolls it back
            store.con.begin()
            store_session(store, session, frames, "wire-replay")
            store.con.commit()
    except OSError as e:
        raise OutputError(f"cannot store the branch in {path}: {e.strerror}") from None
    return sid
