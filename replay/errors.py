"""wire-replay raises the shared kinds of recorder.errors (one hierarchy, one exit code per
kind); this module only keeps the names replay's callers imported from here."""

from wire_recorder.recorder.errors import AgentStartError, InputError, UsageError, UserError

# Any problem with the input of a replay: a usage error, a file or session it cannot use.
ReplayInputError = UserError

__all__ = ["AgentStartError", "InputError", "ReplayInputError", "UsageError", "UserError"]
