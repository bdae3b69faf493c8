"""What a replay run gives back: its divergences, the frames it saw, and the agent's stderr."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .compare import Divergence
from .recording import Recording

STDERR_TAIL_LINES = 8
# divergence kinds that are differences in behaviour, as opposed to their symptoms (a timeout,
# a recorded request left unused, frames not reached after a stop); "model": the agent's own
# model failed (compare.lead_with_model_failure), which comes first whatever it caused
CAUSES = frozenset({"model", "changed", "missing", "extra", "unmatched_request", "client"})

_BOX = "│┃║╭╮╰╯─━═┌┐└┘"


def stderr_tail(data: bytes, n: int = STDERR_TAIL_LINES, width: int = 300) -> list[str]:
    """The last `n` non-empty lines of an agent's stderr, printable (control characters shown
    escaped: the text is the agent's, not ours)."""
    out = []
    for line in data.decode("utf-8", "replace").splitlines()[::-1]:
        line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line.rstrip())
        line = line.strip().strip(_BOX).strip()  # a rich error panel's frame is no news
        if line.strip():
            out.append(line if len(line) <= width else line[:width] + "…")
            if len(out) >= n:
                break
    return out[::-1]


@dataclass
class LiveFrame:
    """A frame as the replay saw it, for `--update` (re-recording)."""

    direction: str  # c2a | a2c | stderr | proxy
    mono_ns: int
    wall_ns: int
    raw: bytes
    newline: bool = True
    event: str | None = None  # proxy lifecycle event
    data: dict | None = None


@dataclass
class ReplayResult:
    recording: Recording
    mode: str  # agent | serve
    argv: list[str]
    divergences: list[Divergence] = field(default_factory=list)
    stopped: str | None = None  # why the replay ended early
    agent_exit_code: int | None = None
    duration_s: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    frames: list[LiveFrame] = field(default_factory=list)
    stderr: bytes = b""
    # sessions replayed first because this one refers to what they created (ACP session/load)
    origins: list[ReplayResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # how the work dir differs from the one recorded (a likely cause of a divergence)
    workdir_differences: list[str] = field(default_factory=list)
    # why the first divergence may be timing (a background task's notice, a recorded wait)
    timing_hint: str | None = None
    # the agent command as given (with the resume flag replay added), before the set-up around
    # it (a pinned LLM's argv is `argv`)
    command: list[str] = field(default_factory=list)

    def stderr_tail(self, n: int = STDERR_TAIL_LINES) -> list[str]:
        return stderr_tail(self.stderr, n)

    @property
    def ok(self) -> bool:
        return not self.divergences and all(o.ok for o in self.origins)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    @property
    def first(self) -> Divergence | None:
        """The first divergence in conversation order (stream differences before the symptoms
        they cause, like a timeout or an unused recorded request)."""
        for d in self.divergences:
            if d.kind in CAUSES:
                return d
        return self.divergences[0] if self.divergences else None

    def of_kind(self, *kinds: str) -> list[Divergence]:
        return [d for d in self.divergences if d.kind in kinds]
