"""What the --serve runner tells the serve engine (engine.serve_walk), with the time `now`."""

from __future__ import annotations

from dataclasses import dataclass

from .events import Event, Tick
from .events import Started as Begin

__all__ = ["Begin", "ClientEOF", "ClientFrame", "ClientSignal", "Emitted", "Event", "Tick"]


@dataclass(frozen=True)
class ClientFrame(Event):
    """A line from the client (newline: it ended in one; the last may not)."""

    t_ns: int
    raw: bytes
    newline: bool = True


@dataclass(frozen=True)
class ClientEOF(Event):
    """The client closed its output (our stdin)."""


@dataclass(frozen=True)
class ClientSignal(Event):
    """The client ended the session with a signal (SIGTERM, SIGINT, SIGHUP), as EOF does."""

    name: str


@dataclass(frozen=True)
class Emitted(Event):
    """The outcome of an Emit: ok; left (the client's ending signal came while writing, so
    nothing more goes to it); broken (nobody reads our stdout any more)."""

    how: str
