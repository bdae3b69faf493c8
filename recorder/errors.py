"""Typed errors for users. The CLI edge turns each into one line on stderr and an exit code."""


class UserError(Exception):
    """Something the user can fix: bad option, missing file, wrong file kind."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class NotARecording(UserError):
    pass


class SchemaTooNew(UserError):
    pass


class SessionNotFound(UserError):
    pass


class AgentStartError(UserError):
    """The agent command could not be started (as a shell would say: 127)."""

    exit_code = 127
