"""Every error a user can fix, and the one exit code of each kind.

The CLI edge (recorder.edge) turns any of them into one line on stderr, `PROG: message (hint)`,
and the kind's exit code; never a traceback. Library callers catch `UserError` (or a kind).

Exit codes of every command (wire-proxy, wire-replay, wire-show, wire-stats, wire-query,
wire-import, wire-export, wire-check, wire-redact):

| code | kind | when |
|---|---|---|
| 0 | | done; also when the reader of the output goes away (`... \\| head`) |
| 1 | (a verdict, no error) | wire-replay: the run diverged, or `--update` stopped early; wire-check: violations found |
| 2 | `UsageError` | the command line is wrong: unknown option, bad value, options that do not go together |
| 2 | `InputError` | a file, folder, session or SQL the command cannot use (kinds below) |
| 2 | `OutputError` | a file the command cannot write (report, export, `--html`, `--update`) |
| 127 | `AgentStartError` | the agent command cannot be started (not found, not executable), as a shell says |
| 130 | | interrupted (Ctrl-C) |

Kinds of `InputError`: `NotARecording` (missing, unreadable, not DuckDB, not ours, cut short),
`SchemaTooNew`, `SessionNotFound`, `NoRecordings`, `DBLocked`, `TranscriptError`, `SpoolError`,
`QueryError`. Kinds of `OutputError`: `DiskFull` (no room to create or write a recording).

Besides these, wire-proxy exits with its agent's own exit code (128+N when the agent was killed
by signal N).
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix. `exit_code` is the kind's; `hint` says what to do."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(UserError):
    """The command line is wrong: an unknown option, a bad value, options that do not go
    together, a missing argument."""


class InputError(UserError):
    """A file, folder, session or SQL text the command cannot use."""


class OutputError(UserError):
    """A file the command cannot write."""


class NotARecording(InputError):
    """No such file, a folder, unreadable, not a DuckDB file, not a recording, or cut short."""


class SchemaTooNew(InputError):
    """Written by a newer wire-recorder than this one."""


class SessionNotFound(InputError):
    """No session, several sessions and none chosen, or none matching the id given."""


class NoRecordings(InputError):
    """A glob, folder or argument list that names no recording."""


class DBLocked(InputError):
    """Another process (a recording loader, a writer) holds the DuckDB file."""


class DiskFull(OutputError):
    """No room on the disk (or in the quota) to create or write a recording."""


class TranscriptError(InputError):
    """A text transcript or log that cannot be read: bad line, wrong header, empty."""


class SpoolError(InputError):
    """A file given as a spool that is not one, or whose header is cut short; or a spool that
    could not be loaded (kept beside the DB as `*.spool.failed`, never deleted)."""


class QueryError(InputError):
    """SQL that DuckDB refuses."""


class AgentStartError(UserError):
    """The agent command cannot be started: not found, not executable (a shell says 127)."""

    exit_code = 127

