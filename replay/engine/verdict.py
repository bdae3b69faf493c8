"""The end of an agent replay: the live stream compared with the recording (replay.compare), plus
the requests left unused, the frames not reached and the exit status; and why the first
divergence may be a matter of timing."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import orjson

from ..compare import Divergence, cut_short, diff_streams, lead_with_model_failure, make_items
from ..labels import describe
from ..result import CAUSES, ReplayResult

if TYPE_CHECKING:
    from .core import AgentEngine

TIMING_GAP_S = 1.0  # a recorded client that waited this long on a silent agent waited on time


def finish(engine: AgentEngine, code: int | None) -> list[Divergence]:
    """All divergences of the run, in conversation order; `code`: the agent's exit status (None:
    unknown). Sets engine.stopped for a whole-run timeout and fills in engine.stats."""
    e, rec = engine, engine.rec
    if e.timed_out:
        e.divs.append(Divergence("timeout", e.pos.where(), f"the whole replay took longer than "
                                                          f"{e.opts.timeout:g}s; agent killed"))
        e.stopped = e.stopped or "whole-run timeout"
    if e.step_i < len(e.steps):
        cut = e.steps[e.step_i].pos  # nothing after the first frame we did not send
    else:
        cut = len(rec.msgs)
    rec_msgs = [m for m in rec.msgs[:cut] if m.direction == "a2c"]
    anchors = rec.anchor_ids()
    shared: dict = {}
    lits = tuple(lit for lit, _ in e.live_norm.values)
    turns = rec.turn_ids()
    rec_items = make_items(rec_msgs, e.rec_norm, anchors, shared, lits, turns,
                           cut_short(rec.msgs[:cut], e.adapter, turns))
    live_items = make_items(e.live, e.live_norm, anchors, shared, lits, turns, e.live_optional)
    tolerated: list = []
    stream = diff_streams(rec_items, live_items, tolerated)
    if tolerated:
        e.stats["cut_short_frames_tolerated"] = len(tolerated)
    not_reached = sum(1 for m in rec.msgs[cut:] if m.direction == "a2c")
    if e.stopped:
        # the live stream was cut short: the recorded frames it never reached are no news
        reached = live_items[-1].seg if live_items else 0
        kept = [d for d in stream if d.kind != "missing" or d.seg < reached]
        not_reached += len(stream) - len(kept)
        stream = kept
    divs = stream + e.divs
    if e.own_model and e.adapter.model_errors:
        advice = "check the model it is configured with" + (
            ", or drop --live-llm to pin the recorded model" if e.opts.live_llm else "")
        divs = lead_with_model_failure(divs, live_items, e.adapter.model_errors, advice)
    where_of = {it.msg.index: it.where for it in rec_items}
    for entry in e.book.unused():
        if entry.msg.index < cut and not e.stopped:
            divs.append(Divergence("unused_request", where_of.get(entry.msg.index, ""),
                                   f"recorded {describe(entry.msg, e.rec_payloads[entry.msg.index])} "
                                   f"was never asked by the agent"))
    if e.stopped and not_reached:
        divs.append(Divergence("not_reached", "", f"{not_reached} recorded agent frames were "
                                                  f"not reached before the replay stopped"))
    if not e.stopped and code is not None:
        bad = exit_differs(engine, code)
        if bad:
            divs.append(Divergence("exit_code", "", bad))
    e.stats.update(recorded_agent_frames=len(rec_msgs), live_agent_frames=len(e.live),
                   recorded_requests=len(e.book.entries))
    return divs


def _signum(name: str) -> int:
    return int(getattr(signal, name, 0))


def _sig_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def exit_differs(engine: AgentEngine, code: int) -> str | None:
    """Why the live exit status is not the recorded one, or None. The status is compared as
    wire-proxy records it (128 + N for signal N).

    A session the recorded client ended with a signal (an IDE closing the agent with
    SIGTERM) is compared by its ending, not its number: an agent that handles the signal
    exits 0, one that does not is ended by it (143), and which of the two happens depends on
    what the agent was doing when it came. So where the recorded agent ended either way,
    the live one matches when it ended either way too (or had exited cleanly before the
    signal was due); any other status (a crash on the signal) is compared as is."""
    rec = engine.rec
    status = 128 - code if code < 0 else code
    got = f"was ended by {_sig_name(-code)}" if code < 0 else f"exited with code {code}"
    sent = [name for _, _, name in rec.signals]
    if sent:
        endings = {0} | {128 + _signum(n) for n in sent}
        if rec.exit_signal in sent or rec.exit_code in endings:
            if status in endings:
                return None
            after = (f" after the replayed {', '.join(engine.signals_sent)}"
                     if engine.signals_sent else "")
            if rec.exit_signal:
                how, other = f"ended by {rec.exit_signal}", "an exit 0"
            else:
                how = f"exited with code {rec.exit_code} on the client's {sent[-1]}"
                other = f"ended by {sent[-1]}"
            return f"the agent {got}{after}, recorded: {how} ({other} would match too)"
    if rec.exit_code is None or status == rec.exit_code:
        return None
    if rec.exit_signal:
        return f"the agent {got}, recorded: ended by {rec.exit_signal} (status {rec.exit_code})"
    return f"the agent {got}, recorded {rec.exit_code}"


def timing_hint(engine: AgentEngine, result: ReplayResult) -> str | None:
    """Why the first divergence may be a matter of timing, with what to try."""
    first = result.first
    if first is None or first.kind == "model" or engine.opts.speed == 1:
        return None
    near = [d for d in result.divergences if d.kind in CAUSES][:5] or [first]
    if any(b"<task>" in orjson.dumps(v, default=str) for d in near
           for v in (d.expected, d.got) if v is not None):
        why = "it involves a background task, whose completion the recorded client waited for"
    else:
        # the client frame just before the diverging one, if the recorded client sent it
        # only after waiting on a silent agent (what it waited for may come later live)
        before = [s for s in engine.steps if s.msg is not None and s.pos <= first.index]
        last = before[-1] if before and first.index >= 0 else None
        if last is None or last.gap_agent < TIMING_GAP_S or \
                last.msg is None or last.msg.method in engine.adapter.racy_methods:
            return None
        why = (f"the recorded client waited {last.gap_agent:.1f}s on a silent agent before "
               f"it {last.label()}")
    return f"this may be timing: {why}; try --speed 1 (keep the recorded gaps)"
