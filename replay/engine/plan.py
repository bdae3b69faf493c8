"""The recorded client's own frames (not answers), its signals and its EOF, in causal order, each
with what must have come from the agent before it may go out.

A client frame is sent once every agent frame recorded before it has a live counterpart of the
same kind (counted by kind/type, not content, so a changed text still lets the replay go on), or
once the response that closed the previous exchange (e.g. the previous turn's prompt response)
has arrived and everything recorded after it has too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ..labels import describe
from ..recording import Msg, Recording


@dataclass
class Step:
    """A client frame the recorded client sent on its own (not an answer), or its stdin EOF."""

    msg: Msg | None  # None: close stdin (or send `signal`)
    pos: int  # number of recorded messages before it
    need: Counter
    last_resp: bytes | None
    need_after: Counter
    gap_prev: float
    gap_agent: float
    max_silence: float = 0.0  # longest recorded agent silence since the previous client frame
    signal: str | None = None  # a signal the recorded client sent the agent

    def label(self) -> str:
        if self.signal is not None:
            return f"sent the agent {self.signal}"
        return "closed its input (EOF)" if self.msg is None else f"sent {describe(self.msg)}"


def plan_steps(rec: Recording) -> list[Step]:
    answer_idx = set(rec.answers.values())
    steps: list[Step] = []
    need: Counter = Counter()
    after: Counter = Counter()
    last_resp: bytes | None = None
    t_prev = 0.0
    t_agent = 0.0
    silence = 0.0
    eof_pos = rec.eof_at if rec.eof_at is not None else len(rec.msgs)
    signals = list(rec.signals)

    def signals_until(pos: int) -> None:
        nonlocal t_prev, silence
        while signals and signals[0][0] <= pos:
            at, t, name = signals.pop(0)
            steps.append(Step(None, at, Counter(need), last_resp, Counter(after),
                              max(0.0, t - t_prev), max(0.0, t - t_agent),
                              max(silence, t - t_prev), signal=name))
            silence = 0.0
            t_prev = max(t_prev, t)

    for m in rec.msgs[:eof_pos]:
        signals_until(m.index)
        silence = max(silence, m.t - t_prev)
        if m.direction == "a2c":
            need[m.coarse] += 1
            if m.kind in ("response", "error") and m.id_key in rec.client_requests:
                last_resp, after = m.id_key, Counter()
            else:
                after[m.coarse] += 1
            t_agent = m.t
        elif m.index not in answer_idx:
            steps.append(Step(m, m.index, Counter(need), last_resp, Counter(after),
                              max(0.0, m.t - t_prev), max(0.0, m.t - t_agent), silence))
            silence = 0.0
        t_prev = m.t
    signals_until(eof_pos)
    t_eof = rec.eof_t if rec.eof_t is not None else t_prev
    steps.append(Step(None, eof_pos, Counter(need), last_resp, Counter(after),
                      max(0.0, t_eof - t_prev), max(0.0, t_eof - t_agent),
                      max(silence, t_eof - t_prev)))
    # a signal after the client's EOF: the agent frames recorded before it are awaited too
    for m in rec.msgs[eof_pos:]:
        signals_until(m.index)
        if m.direction == "a2c":
            need[m.coarse] += 1
            t_agent = m.t
        t_prev = m.t
    signals_until(len(rec.msgs))
    return steps


def ready(s: Step, counts: Counter, snapshots: Mapping[bytes, Counter]) -> bool:
    """May `s` go out, given the live agent frames counted so far by kind (`counts`) and the
    counts as they were when each response arrived (`snapshots`, by id)?"""
    if all(counts[k] >= v for k, v in s.need.items()):
        return True
    snap = snapshots.get(s.last_resp) if s.last_resp is not None else None
    if snap is not None:
        # the responses recorded before this step must be in too: a server that handles
        # requests concurrently may answer them in another order (MCP), and the client's
        # next frame (its EOF above all) would cut the late ones off
        return all(counts[k] - snap[k] >= v for k, v in s.need_after.items()) and \
            all(counts[k] >= v for k, v in s.need.items() if k[0] == "response")
    return False


def first_missing(rec: Recording, s: Step, counts: Counter) -> Msg | None:
    """The first recorded agent frame before `s` that has no live counterpart yet."""
    seen: Counter = Counter()
    for m in rec.msgs[:s.pos]:
        if m.direction == "a2c":
            seen[m.coarse] += 1
            if seen[m.coarse] > counts[m.coarse]:
                return m
    return None
