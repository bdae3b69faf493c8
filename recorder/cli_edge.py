"""The CLI edge shared by every typer command: usage errors and user errors become one line on
stderr and an exit code, never a box of help text or a traceback."""

from __future__ import annotations

import sys

from .errors import UserError


def _click_exceptions():
    try:
        from click import exceptions
    except ImportError:  # typer >= 0.2x carries its own copy of click
        from typer._click import exceptions
    return exceptions


def run_app(app, prog: str, argv: list[str] | None = None) -> None:
    exc = _click_exceptions()
    try:
        rv = app(prog_name=prog, args=argv, standalone_mode=False)
    except exc.UsageError as e:
        sys.stderr.write(f"{prog}: {e.format_message()} (see {prog} --help)\n")
        sys.exit(2)
    except exc.ClickException as e:
        sys.stderr.write(f"{prog}: {e.format_message()}\n")
        sys.exit(e.exit_code)
    except UserError as e:
        sys.stderr.write(f"{prog}: {e.one_line()}\n")
        sys.exit(e.exit_code)
    except (getattr(exc, "Abort", KeyboardInterrupt), KeyboardInterrupt):
        sys.stderr.write(f"{prog}: interrupted\n")
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)
