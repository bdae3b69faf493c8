"""The one CLI edge of every command.

Every console script is `main = entry(app, PROG)`, where `app` is a typer.Typer holding one
command or, for wire-proxy (which spawns its agent before typer and rich could be imported), a
function `argv -> exit code`. The edge gives every command the same outside:

- `--version` prints `PROG VERSION`;
- a UserError is one line on stderr, `PROG: message (hint)`, and the exit code of its kind (the
  table is in recorder.errors); a usage error found by the parser likewise, with exit 2;
- the reader of stdout going away (`wire-query ... | head`) ends the command quietly, exit 0;
- Ctrl-C ends it quietly, exit 130.

`main(argv)` returns the exit code, so a command also runs in-process (tests, other tools).
Nothing heavy is imported here: typer is imported only when a typer app runs.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence

from . import __version__
from .errors import UsageError, UserError
from .visible import visible

# typing and inspect cost ~6 ms before wire-proxy can spawn its agent: annotations only here,
# inspect only on the typer path
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The name wire-proxy signs its notes with; its loader process and `recover` speak as it too.
PROXY = "wire-proxy"

Main = Callable[..., int]


# Set by wire-proxy for its loader (recorder/handoff.py): where the loader's notes go once the
# proxy, which relays them to the client's stderr, has exited.
NOTES_LOG_ENV = "WIRE_PROXY_LOADER_LOG"


def say(prog: str, message: str) -> None:
    """One line on stderr: `PROG: message`. Written straight to fd 2 (no buffer to flush, safe
    in the relay process and in threads) and never raises. Control and bidi characters (a
    session name, a path from a recording) are shown, not obeyed (recorder/visible.py)."""
    line = f"{prog}: {visible(message)}\n".encode(errors="replace")
    try:
        os.write(2, line)
    except BrokenPipeError:
        _to_notes_log(line)
    except OSError:
        pass


def _to_notes_log(line: bytes) -> None:
    """A loader whose proxy has exited (the reader of its stderr) writes its notes to the log
    the proxy named for it (recorder/handoff.py), stamped with the time, instead of losing
    them."""
    log = os.environ.get(NOTES_LOG_ENV)
    if not log:
        return
    import time

    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z ").encode()
    try:
        os.makedirs(os.path.dirname(log) or ".", mode=0o700, exist_ok=True)
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.write(fd, stamp + f"[pid {os.getpid()}] ".encode() + line)
    except OSError:
        pass
    finally:
        os.close(fd)


def version_line(prog: str) -> str:
    return f"{prog} {__version__}\n"


class _Interrupted(Exception):
    """Ctrl-C inside a typer command, carried past click (which would print and exit itself)."""


class _PipeClosed(Exception):
    """The reader went away inside a typer command, carried past click (which exits 1)."""


def entry(app: Any, prog: str,
          check_argv: Callable[[list[str]], None] | None = None) -> Main:
    """The console-script function for `app`. `check_argv` may look at the raw arguments first
    and raise a UserError (e.g. wire-replay's `--` with nothing after it)."""

    def main(argv: Sequence[str] | None = None) -> int:
        args = list(sys.argv[1:] if argv is None else argv)
        try:
            if check_argv is not None:
                check_argv(args)
            code = _run_typer(app, prog, args) if _is_typer(app) else int(app(args))
            sys.stdout.flush()  # a reader gone by now is met here, not at interpreter exit
            return code
        except UserError as e:
            say(prog, e.one_line())
            return e.exit_code
        except (KeyboardInterrupt, _Interrupted):
            return 130
        except (BrokenPipeError, _PipeClosed):
            _silence_stdout()
            return 0
        except Exception as e:
            # a recording damaged past its header (a flipped byte in a data block) is met
            # only when that block is read, anywhere in a reader: still one line, exit 2
            if not _damaged_file(e):
                raise
            first = (str(e).splitlines() or [type(e).__name__])[0]
            say(prog, f"a recording is damaged or not readable: {first} "
                      "(restore it from a copy, or re-import its transcript)")
            return 2

    main.__doc__ = f"`{prog}` as a console script: main(argv) -> exit code."
    return main


# what DuckDB says when a file's bytes are not what it wrote (checked without importing it)
_DAMAGE_WORDS = ("corrupt database file", "could not read enough bytes", "checksum")


def _damaged_file(e: BaseException) -> bool:
    if not type(e).__module__.lstrip("_").startswith("duckdb"):
        return False
    low = str(e).lower()
    return any(w in low for w in _DAMAGE_WORDS)


def _is_typer(app: Any) -> bool:
    return hasattr(app, "registered_commands")


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so that what is still buffered is not flushed into a closed pipe
    at exit (Python would print an error and exit 120)."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.close(fd)
    except OSError:
        pass


def _click_exceptions() -> Any:
    try:
        from typer._click import exceptions  # typer >= 0.2x carries its own copy of click
    except ImportError:
        from click import exceptions  # type: ignore[no-redef]
    return exceptions


_SLOW = object()
_INT: Any = None  # re.Pattern, compiled on first use


def _fast_value(annotation: Any, info: Any, value: Any, ctx: Any) -> Any:
    """`value` as typer's pydantic adapter for `annotation` returns it, for the plain cases the
    commands here meet (str, int, float, bool, Enum choices, lists of these), or _SLOW when
    not sure (then the adapter itself decides, error messages included)."""
    global _INT
    from enum import Enum
    from typing import get_args, get_origin

    if info.parser is not None or getattr(info, "click_type", None) is not None:
        return _SLOW
    if get_origin(annotation) is list:
        (item,) = get_args(annotation) or (_SLOW,)
        items = value if isinstance(value, (list, tuple)) else [value]
        out = [_fast_value(item, info, v, ctx) for v in items]
        return _SLOW if any(v is _SLOW for v in out) else out
    kind = type(value)
    if annotation is str and kind is str:
        return value
    if annotation is bool and kind is bool:
        return value
    if annotation in (int, float) and info.min is None and info.max is None:
        if kind is annotation:
            return value
        if kind is str:
            if _INT is None:
                import re

                _INT = re.compile(r"0|[1-9][0-9]{0,17}")
            if _INT.fullmatch(value):
                return annotation(value)
        return _SLOW
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        from typer._param_types import coerce_cli_choice

        try:
            return coerce_cli_choice(value, choices=tuple(annotation),
                                     case_sensitive=info.case_sensitive, ctx=ctx)
        except ValueError:
            return _SLOW
    return _SLOW


def _fast_coercion() -> None:
    """typer 0.29 coerces every parsed value through a pydantic TypeAdapter, and importing
    pydantic and building the adapters costs ~60-70 ms a command. The plain values the commands
    here take are coerced directly, to what the adapter returns; anything else (a bad value: its
    error message is the adapter's) goes to typer's own coercion, built when first needed."""
    try:
        import typer.core as core
        from typer._coercion import RuntimeParam
    except ImportError:
        return
    real = getattr(core, "build_runtime_param", None)
    if real is None or getattr(real, "_edge_fast", False):
        return
    typer_build: Callable[[Any], Any] = real

    class _Fast(RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            fast = _fast_value(self.annotation, self.parameter_info, value, ctx)
            if fast is not _SLOW:
                return fast
            return typer_build(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)

    def build(descriptor: Any) -> Any:
        if descriptor.file_annotation is not None:
            return typer_build(descriptor)
        return _Fast(annotation=descriptor.annotation, parameter_info=descriptor.parameter_info)

    build._edge_fast = True  # type: ignore[attr-defined]
    core.build_runtime_param = build


def _run_typer(app: Any, prog: str, args: list[str]) -> int:
    import typer
    from typer.main import get_command

    _fast_coercion()

    info = app.registered_commands[0]  # one command per console script
    if not getattr(info.callback, "_edged", False):
        info.callback = _edged(info.callback, prog)
    exc = _click_exceptions()
    try:
        rv = get_command(app).main(args=args, prog_name=prog, standalone_mode=False)
    except exc.UsageError as e:
        # typer 0.29 words a bad choice "Value error, 'x' is not one of ...": the prefix says nothing
        message = e.format_message().replace("Value error, ", "")
        raise UsageError(message, f"see {prog} --help") from None
    except exc.ClickException as e:
        say(prog, e.format_message())
        return int(e.exit_code)
    except typer.Exit as e:
        return int(e.exit_code)
    except typer.Abort:  # click's name for Ctrl-C or EOF at a prompt
        return 130
    return rv if isinstance(rv, int) else 0


def _edged(fn: Callable[..., Any], prog: str) -> Callable[..., Any]:
    """`fn` with a `--version` option, and Ctrl-C or a closed stdout carried past click."""
    import typer

    def show_version(value: bool) -> None:
        if value:
            sys.stdout.write(version_line(prog))
            raise typer.Exit()

    import inspect

    sig = inspect.signature(fn, eval_str=True)
    version = inspect.Parameter(
        "edge_version", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
        default=typer.Option(False, "--version", is_eager=True, callback=show_version,
                             help="print the version and exit"))

    @functools.wraps(fn)
    def command(*args: Any, edge_version: bool = False, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            raise _Interrupted() from None
        except BrokenPipeError:
            raise _PipeClosed() from None

    command.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[*sig.parameters.values(), version])
    command._edged = True  # type: ignore[attr-defined]
    return command
