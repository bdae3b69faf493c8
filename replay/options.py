"""The option sets of replay, one Enum each: the CLI offers their values as choices, the library
accepts the members or their string values (they are `StrEnum`s)."""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """What wire-replay is run for."""

    AGENT = "agent"  # agent under test: spawn it, play the client, compare (the default)
    SERVE = "serve"  # client under test: play the recorded agent on stdin/stdout
    UPDATE = "update"  # re-record: replay against the current agent and keep what it did


class OnUnmatched(StrEnum):
    """What to do with an agent request that no recorded request matches."""

    FAIL = "fail"  # stop the replay
    REJECT = "reject"  # answer it with a rejection and go on
    ERROR = "error"  # answer it with a JSON-RPC error and go on


class RecordMode(StrEnum):
    """The pytest plugin's `--wire-record-mode`: when the wire_replay fixture records."""

    NONE = "none"  # replay only; a missing recording fails the test
    ONCE = "once"  # replay when the recording exists, else record it first
    ALL = "all"  # re-record: keep what the current agent did (as wire-replay --update)
    REWRITE = "rewrite"  # delete the cassette first and record it from scratch, unconditionally


def values(enum: type[StrEnum]) -> tuple[str, ...]:
    return tuple(m.value for m in enum)
