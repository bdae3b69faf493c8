"""Agents replay knows how to run with their LLM pinned to what a recording says the model
answered (kimi-cli, through its offline `_scripted_echo` provider; Kimi Code 2.x, through a
model on loopback).

    pin = pin_llm(rec, argv, env)        # None: not an agent replay can pin
    pin.use(origin, ...); run origin with pin.argv, pin.env
    pin.use(rec, rec.cwd, live_cwd); run rec with pin.argv, pin.env
    pin.cleanup()

What the model answered comes from the recording's protocol adapter (its `llm_calls` part:
recorder/protocols/wire/llm_calls.py, acp/llm_calls.py), as a neutral list of calls; how an
agent is made to answer that way (its offline model, config, HOME and command line) is the
agent's module here (kimi.py, kimi_code.py). Each agent module has `recognises(rec) -> bool` and
`pin(rec, argv, env) -> LlmPin`; they are asked in the order of `AGENTS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from wire_recorder.recorder.errors import InputError

if TYPE_CHECKING:
    from ..compare import Divergence
    from ..recording import Recording

# Kimi Code 2.x calls itself what kimi-cli does: asked first, it tells them apart by version
AGENTS = ("kimi_code", "kimi")
JOURNALS = ("kimi_code",)  # the agents whose pin takes its answers from a journal (--journal)


class LlmPin:
    """One scratch set-up (HOME, config, scripts file) for a chain of sessions: the origins a
    session reopens, then the session, run one after the other with `argv` and `env`."""

    argv: list[str]  # the user's agent command with the model swapped
    env: dict[str, str]  # the full environment of the agent (scratch HOME, scripts)
    home: str  # the scratch HOME, shared by the chain
    notes: list[str]  # for the report

    def use(self, rec: Recording, rec_workdir: str | None, live_workdir: str | None) -> None:
        """Write the model's answers for `rec` before its run. Raises an InputError that names
        the call the recording does not say enough about."""
        raise NotImplementedError

    def scripts(self) -> list[str]:
        """The scripts last written, one per LLM call ([] when the run's answers are served
        otherwise, e.g. from loopback: see the agent's module)."""
        raise NotImplementedError

    def write_scripts(self, path: str) -> None:
        """Write what answers the run (the scripts last written, or the answers served) to
        `path` (`--write-llm-script`), for inspection."""
        raise NotImplementedError

    def agent_mode(self) -> tuple[str, str] | None:
        """(mode, where it comes from) the agent is started in by this set-up (the user's
        config it keeps), for a divergence to name (replay/mode_note.py); None: not known."""
        return None

    def divergences(self) -> list[Divergence]:
        """What the agent asked its model that differs from the recording, per call, for the
        result (after the run; [] where the pin does not compare the requests, as when the
        answers come from the agent's own offline provider)."""
        return []

    def cleanup(self) -> None:
        raise NotImplementedError


def pin_llm(rec: Recording, argv: Sequence[str], env: Mapping[str, str] | None,
            journal: str | None = None) -> LlmPin | None:
    """A pinned LLM for the agent that made `rec`, with its scratch folder made; None when the
    recording was not made by an agent replay can pin, or its protocol says nothing of the
    model's answers. Raises an InputError when the recording cannot yield the answers."""
    from .llm_leg_pin import exchanges_of

    recorded_leg = exchanges_of(rec)  # recorded with `wire-proxy --llm`: served as recorded
    if recorded_leg is not None:
        from .llm_leg_pin import pin as leg_pin

        if journal is not None:
            raise InputError(f"--journal {journal}: this recording has the model's own "
                             f"exchanges (wire-proxy --llm), which answer the replay",
                             "replay without --journal")
        return leg_pin(rec, argv, env, recorded_leg)
    if rec.adapter.part("llm_calls") is None and journal is None:
        return None
    for name in AGENTS:
        agent = importlib.import_module(f"{__name__}.{name}")
        if agent.recognises(rec):
            if journal is not None and name not in JOURNALS:
                break
            pin: LlmPin = agent.pin(rec, argv, env, journal) if journal is not None \
                else agent.pin(rec, argv, env)
            return pin
    if journal is not None:
        raise InputError(f"--journal {journal}: answers from a journal are for a recording of "
                         f"Kimi Code 2.x; session {rec.session_id} was not made by it",
                         "replay without --journal")
    return None
