"""Errors a wire-replay user can fix. The CLI edge prints `one_line()` and exits with exit_code."""

from wire_recorder.recorder.errors import UserError


class ReplayInputError(UserError):
    """The recording cannot be replayed: empty session, unusable transcript, bad option."""


class AgentStartError(UserError):
    """The agent command could not be started (not found, not executable, missing cwd)."""
