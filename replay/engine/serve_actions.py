"""What the serve engine (engine.serve_walk) asks of its runner. Emit, Sleep and AwaitClient
end their list: the walk goes on with the outcome (an Emitted, a Tick, or the client's next
frame, EOF or signal, or a Tick at the deadline)."""

from __future__ import annotations

from dataclasses import dataclass

from .actions import Action, Diverge, Done

__all__ = ["Action", "AwaitClient", "Diverge", "Done", "Emit", "Sleep"]


@dataclass(frozen=True)
class Emit(Action):
    """Write a frame to the client (our stdout)."""

    raw: bytes
    newline: bool = True


@dataclass(frozen=True)
class Sleep(Action):
    """Keep the recorded gap before the next agent frame (--speed)."""

    seconds: float


@dataclass(frozen=True)
class AwaitClient(Action):
    """Wait for the client's next frame, EOF or signal, until `deadline` (then a Tick)."""

    deadline: float
