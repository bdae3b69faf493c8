"""A replay's first divergence names the agent's mode where it is not the recording's: an
agent that starts in another mode (a user's config that defaults to auto-approving, a client
that switches it) differs only in what that mode changes, e.g. a permission request it no
longer sends, and the mode is what to look at. The mode the frames show comes from the
protocol adapter's `modes` part (`mode_of`); the mode an agent was started in without saying
so in its frames comes from its pinned LLM's set-up (`LlmPin.agent_mode`: the kept config)."""

from __future__ import annotations

from typing import Any

import orjson

from .result import ReplayResult


def _live(result: ReplayResult) -> list[tuple[str, Any]]:
    out = []
    for f in result.frames:
        if f.direction in ("a2c", "c2a"):
            try:
                out.append((f.direction, orjson.loads(f.raw)))
            except orjson.JSONDecodeError:
                continue
    return out


def name_the_mode(result: ReplayResult, pin: Any) -> None:
    """Append `(agent mode: M <from where>; recorded: R)` to `result`'s first divergence when
    the live agent's mode M is not the recorded R."""
    first = result.first
    rec = result.recording
    part = rec.adapter.part("modes")
    if first is None or part is None:
        return
    upto = first.index if first.index >= 0 else len(rec.msgs)
    recorded = part.mode_of((m.direction, m.obj) for m in rec.msgs[:upto])
    shown = part.mode_of(_live(result))
    started = pin.agent_mode() if pin is not None else None
    if shown is not None and shown != recorded:
        live, source = shown, "as the agent says"
    elif started is not None and started[0] != recorded:
        live, source = started
    else:
        return
    if recorded is not None:
        first.message += f" (agent mode: {live} {source}; recorded: {recorded})"
