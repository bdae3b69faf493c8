"""What the runner tells the replay engine: something happened at `now` (its monotonic clock,
in seconds). The engine answers each with a list of actions (engine.actions).

One vocabulary for both directions: the peer is the agent when replaying against it
(engine.core), the client when standing in for the agent (--serve, engine.serve_walk)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    now: float


@dataclass(frozen=True)
class Started(Event):
    """The agent process is running (--serve: the walk begins); `t_ns` is the clock frames are
    timed against."""

    t_ns: int


@dataclass(frozen=True)
class PeerFrame(Event):
    """A line from the peer: the agent's stdout, or (--serve) the client's frames on our stdin
    (newline: it ended in one; the last may not)."""

    t_ns: int
    raw: bytes
    newline: bool = True


@dataclass(frozen=True)
class PeerClosed(Event):
    """EOF on the peer's output: the agent's stdout (it exited, or closed it), or (--serve) the
    client closed its output, our stdin."""


@dataclass(frozen=True)
class Tick(Event):
    """Time has passed: due frames go out, timeouts are checked."""


@dataclass(frozen=True)
class Written(Event):
    """The outcome of a SendFrame or Answer: ok False when the peer's input is broken (nobody
    reads it any more); left (--serve): the client's ending signal came while writing, so nothing
    more goes to it."""

    ok: bool
    left: bool = False


@dataclass(frozen=True)
class SignalResult(Event):
    """The outcome of a SendSignal: sent, or not (the agent had exited, no such signal)."""

    name: str
    sent: bool


@dataclass(frozen=True)
class Killed(Event):
    """The outcome of a Kill: alive says whether there was a live agent to kill."""

    alive: bool


@dataclass(frozen=True)
class AgentExited(Event):
    """The outcome of a ReapAgent: the agent's exit code (None: still running)."""

    code: int | None


@dataclass(frozen=True)
class RunEnding(Event):
    """The runner leaves its loop: the agent's input is closed now if it is not yet."""


@dataclass(frozen=True)
class ExitOverdue(Event):
    """The agent did not exit within `waited` seconds of its input closing; it was killed."""

    waited: float


@dataclass(frozen=True)
class ClientSignal(Event):
    """--serve: the client ended the session with a signal (SIGTERM, SIGINT, SIGHUP), as EOF
    does."""

    name: str
