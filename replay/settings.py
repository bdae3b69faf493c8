"""The options of one replay run (ReplayOptions) and the progress it reports while it runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from wire_recorder.recorder.env_seconds import env_seconds
from wire_recorder.recorder.errors import UsageError

from .matchers import parse_match_on
from .normalize import IgnoreRule, default_rules
from .options import OnUnmatched, values

ON_UNMATCHED = values(OnUnmatched)
PROGRESS_EVERY_S = 0.2  # how often ReplayOptions.progress is called while a replay runs
# Start-up is not a frame timeout: an agent process that is alive and has not said anything yet
# (kimi's first frame answers initialize) is waited for this long (kimi takes up to a minute on a busy 2-core runner, and
# a transcript has no recorded times to stretch a budget from); frame timeouts apply once it speaks.
STARTUP_TIMEOUT_S = 300.0
STARTUP_ENV = "WIRE_REPLAY_STARTUP_TIMEOUT"


def startup_default() -> float:
    """The start-up wait when none is given: $WIRE_REPLAY_STARTUP_TIMEOUT, else 300 s."""
    return env_seconds(STARTUP_ENV, STARTUP_TIMEOUT_S)


@dataclass(frozen=True)
class ReplayProgress:
    """Where a running replay is, for a progress line (ReplayOptions.progress)."""

    turn: int  # turns the agent has begun (Wire) or finished (ACP); 0 for MCP
    turns: int  # turns in the recording
    sent: int  # client frames (and the closing EOF) sent so far
    to_send: int  # of these in all
    received: int  # agent frames received so far


@dataclass
class ReplayOptions:
    match_on: Sequence[str] | None = None  # None: the protocol adapter's defaults
    ignore: Sequence[IgnoreRule] = ()  # in addition to the defaults
    default_ignores: bool = True
    on_unmatched: str = "fail"  # fail | reject | error
    speed: float = 0.0  # 0: as fast as possible; 1: recorded gaps; N: gaps / N
    frame_timeout: float = 30.0  # silence while something is expected
    # silence of an agent that has said nothing yet (None: startup_default())
    startup_timeout: float | None = None
    timeout: float = 600.0  # whole run
    # run the command stored in the recording when no agent command is given: a recording is
    # untrusted input, so only on explicit request (wire-replay --recorded-command)
    recorded_command: bool = False
    live_llm: bool = False  # keep the agent's own model instead of pinning it to the recording
    write_llm_script: str | None = None  # write the pinned LLM's scripts there
    journal: str | None = None  # the agent's own journal the pinned LLM answers from
    # called from the replay loop every PROGRESS_EVERY_S or so (a CLI draws a progress line from
    # it); also for each origin session replayed first. It must be quick and must not raise.
    progress: Callable[[ReplayProgress], None] | None = None

    def validate(self) -> ReplayOptions:
        if self.match_on is not None:
            self.match_on = parse_match_on(self.match_on)
        if self.on_unmatched not in ON_UNMATCHED:
            raise UsageError(f"--on-unmatched {self.on_unmatched!r} is not one of "
                             f"{', '.join(ON_UNMATCHED)}")
        if self.speed < 0:
            raise UsageError("--speed must be 0 (as fast as possible) or positive")
        if self.startup_timeout is None:
            self.startup_timeout = startup_default()
        if self.frame_timeout <= 0 or self.timeout <= 0 or self.startup_timeout <= 0:
            raise UsageError("timeouts must be positive numbers of seconds")
        if self.live_llm and self.write_llm_script:
            raise UsageError("--write-llm-script writes the scripts of the pinned LLM: not with "
                             "--live-llm")
        if self.live_llm and self.journal:
            raise UsageError("--journal gives the pinned LLM its answers: not with --live-llm")
        return self

    def rules(self, adapter) -> tuple[IgnoreRule, ...]:
        return (default_rules(adapter) if self.default_ignores else ()) + tuple(self.ignore)
