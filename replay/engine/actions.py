"""What the replay engine asks of its runner (the IO side), in order. Some ask for an outcome:
the runner executes them and hands the outcome back as an event (engine.events) right away,
before the next action; the engine then goes on where it was (SendSignal, ReapAgent end the
list they are in, as what follows depends on their outcome). --serve's walk (engine.serve_walk)
asks for the same with its peer, the client: SendFrame, Sleep and AwaitClient end its list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..compare import Divergence


@dataclass(frozen=True)
class Action:
    pass


@dataclass(frozen=True)
class SendFrame(Action):
    """Write a frame to the peer (outcome: Written): one of the recorded client's frames to the
    agent's stdin, or (--serve) one of the recorded agent's to the client, on our stdout."""

    raw: bytes
    newline: bool = True


@dataclass(frozen=True)
class Answer(Action):
    """Write an answer to one of the agent's requests (outcome: Written)."""

    raw: bytes
    newline: bool = True


@dataclass(frozen=True)
class CloseInput(Action):
    """Close the agent's stdin (the recorded client's EOF, or a stop)."""


@dataclass(frozen=True)
class SendSignal(Action):
    """Send the agent's process group a signal, by name (outcome: SignalResult)."""

    name: str


@dataclass(frozen=True)
class ClientEffects(Action):
    """Do what the recorded client did besides answering a request (ACP: write a file), within
    the work dir. `msg` is the live request."""

    msg: Any


@dataclass(frozen=True)
class Kill(Action):
    """The whole-run timeout: kill the agent if it is alive (outcome: Killed)."""


@dataclass(frozen=True)
class ReapAgent(Action):
    """Wait up to `timeout` seconds for the agent's exit code (outcome: AgentExited)."""

    timeout: float


@dataclass(frozen=True)
class Diverge(Action):
    """A divergence found while running (the runner may show it; the engine keeps it)."""

    divergence: Divergence


@dataclass(frozen=True)
class Stop(Action):
    """The replay stops early: nothing more goes to the agent (a CloseInput follows)."""

    why: str


@dataclass(frozen=True)
class Done(Action):
    """The run is over: the runner leaves its loop."""


@dataclass(frozen=True)
class Sleep(Action):
    """--serve: keep the recorded gap before the next agent frame (--speed; outcome: Tick)."""

    seconds: float


@dataclass(frozen=True)
class AwaitClient(Action):
    """--serve: wait for the client's next frame, EOF or signal, until `deadline` (then a
    Tick)."""

    deadline: float
