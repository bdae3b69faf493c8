"""`wire-proxy` command line.

Parsed by hand on purpose: typer and rich cost 100-200 ms to import, and the agent must be
spawned within 100 ms of the proxy's start. Every other command uses typer.
"""

from __future__ import annotations

import os
import sys

from .edge import PROXY, entry, version_line
from .errors import UsageError

USAGE = """\
usage: wire-proxy [OPTIONS] -- CMD [ARGS...]
       wire-proxy recover PATH...

Relay stdin/stdout/stderr between a client and CMD byte for byte, recording every frame
into a DuckDB file.

Examples
  wire-proxy -- kimi --wire
  wire-proxy --db session.db --name demo --tag team=ide -- kimi --wire
  wire-proxy --protocol acp --snapshot-workdir -- kimi acp
  wire-proxy --no-record -- kimi --wire
  wire-proxy --llm -- kimi --wire
  wire-proxy recover session.db

options:
  --db PATH          record into PATH (default: $WIRE_PROXY_DB, else one new file per
                     session under $WIRE_RECORDER_HOME or ~/.local/share/wire-recorder/sessions)
  --name NAME        name the session
  --tag KEY=VALUE    tag the session (repeatable)
  --protocol NAME    {protocols} (default: detected from the first frames that tell)
  --no-record        relay only
  --no-redact        store frames as they are: no secrets replaced by placeholders
                     (redaction of the stored copy is on by default; relayed bytes never change)
  --snapshot-workdir store the agent's work dir files too (bounded, redacted), not only
                     their manifest: wire-replay then runs the agent in a copy of them
  --wait SECONDS     at exit, wait up to this long for the recording to be stored, so the
                     file is complete when wire-proxy returns (default 0: exit at once; the
                     loader finishes in the background and readers wait for it; a DB held by
                     another process is left to the background after 1 s)
  --llm              also stand between the agent and its model: point the agent at a
                     loopback endpoint, forward each request to the model of the agent's
                     config, and record every exchange (request, streamed answer) in the
                     session; API keys are never stored (kimi-cli, Kimi Code)
  --no-loss          when the disk falls behind, slow the relay down instead of dropping
                     frames from the recording (by default the relay never waits)
  -q, --quiet        no notes on stderr (problems are still reported)
  --version          print the version
  --show-completion [SHELL]
                     print the completion script for SHELL ({shells};
                     default: the current one): eval "$(wire-proxy --show-completion bash)"
  --install-completion [SHELL]
                     add that script to the shell's start-up files
  -h, --help         this help

recover PATH...      bring spools left by a killed proxy into their DB (PATH: a .db or .spool)
"""

VALUE_OPTIONS = {"--db", "--name", "--tag", "--protocol", "--wait"}
COMPLETION_OPTIONS = {"--show-completion", "--install-completion"}
SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
# set by the completion script when the shell asks for candidates (typer's convention)
COMPLETE_VAR = "_WIRE_PROXY_COMPLETE"


def parse_args(argv: list[str]):
    from .proxy import ProxyOptions

    opts = ProxyOptions(command=[])
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            opts.command = argv[i + 1:]
            break
        if not arg.startswith("-") or arg == "-":
            opts.command = argv[i:]  # the command may follow the options without `--`
            break
        name, eq, inline = arg.partition("=")
        if name in VALUE_OPTIONS:
            if eq:
                value = inline
            else:
                if i + 1 >= len(argv):
                    raise UsageError(f"option {name} needs a value", f"see {PROXY} --help")
                i += 1
                value = argv[i]
            if name == "--db":
                opts.db = value
            elif name == "--name":
                opts.name = value
            elif name == "--tag":
                key, sep, val = value.partition("=")
                if not sep or not key:
                    raise UsageError(f"--tag {value!r} is not KEY=VALUE", "e.g. --tag team=ide")
                opts.tags[key] = val
            elif name == "--protocol":
                from . import protocols  # name sets only: cheap for the relay process

                if value not in protocols.names():
                    raise UsageError(f"unknown protocol {value!r}",
                                    f"use one of {', '.join(protocols.names())}")
                opts.protocol = value
            elif name == "--wait":
                try:
                    opts.loader_wait_s = float(value)
                except ValueError:
                    raise UsageError(f"--wait {value!r} is not a number of seconds") from None
                if not opts.loader_wait_s >= 0:  # (also NaN)
                    raise UsageError(f"--wait {value!r} is not a number of seconds",
                                     "give 0 or more")
        elif arg in ("-q", "--quiet"):
            opts.quiet = True
        elif arg == "--no-record":
            opts.record = False
        elif arg == "--no-redact":
            opts.redact = False
        elif arg == "--snapshot-workdir":
            opts.snapshot_workdir = True
        elif arg == "--no-loss":
            opts.no_loss = True
        elif arg == "--llm":
            opts.llm = True
        elif name in COMPLETION_OPTIONS:
            shell = inline if eq else None
            if not eq and i + 1 < len(argv) and argv[i + 1] in SHELLS:
                shell = argv[i + 1]
            if shell is not None and shell not in SHELLS:
                raise UsageError(f"{name} {shell!r}: not a shell this knows",
                                 f"use one of {', '.join(SHELLS)}")
            return (name, shell)
        elif arg in ("-h", "--help"):
            return "help"
        elif arg == "--version":
            return "version"
        else:
            raise UsageError(f"unknown option {arg}", f"see {PROXY} --help")
        i += 1
    if not opts.command:
        raise UsageError("no agent command given", f"usage: {PROXY} [OPTIONS] -- CMD [ARGS...]")
    return opts


def run(argv: list[str]) -> int:
    if os.environ.get(COMPLETE_VAR):
        return _complete()
    if argv and argv[0] == "recover":
        from .recover import recover_paths

        if len(argv) < 2:
            raise UsageError("recover needs a .db or .spool path", f"{PROXY} recover PATH")
        if argv[1] in ("-h", "--help"):  # its usage is part of the proxy's
            argv = ["--help"]
        else:
            return recover_paths(argv[1:])
    parsed = parse_args(argv)
    if parsed == "help":
        from . import protocols  # the registry: in-tree adapters and installed ones

        sys.stdout.write(USAGE.format(protocols=", ".join(protocols.names()),
                                      shells=", ".join(SHELLS[:-1])))
        return 0
    if isinstance(parsed, tuple):
        return _completion_script(*parsed)
    if parsed == "version":
        sys.stdout.write(version_line(PROXY))
        return 0
    from .proxy import run_proxy

    code = run_proxy(parsed)
    _relayed.append(code)
    return code


# -- shell completion: typer is imported only here, never on the relay's path -----------------

def _completion_script(option: str, shell: str | None) -> int:
    """Print (--show-completion) or install (--install-completion) typer's completion script for
    wire-proxy: the script calls wire-proxy back with COMPLETE_VAR set (see _complete)."""
    # typer's own helpers behind its --show-completion, called here to honour a named shell
    from typer._completion_shared import _get_shell_name, get_completion_script, install

    shell = shell or _get_shell_name()
    if shell not in SHELLS:
        raise UsageError(f"cannot tell which shell this is ({shell or 'none found'})",
                         f"name it: {PROXY} {option} bash")
    if option == "--show-completion":
        sys.stdout.write(get_completion_script(prog_name=PROXY, complete_var=COMPLETE_VAR,
                                               shell=shell) + "\n")
        return 0
    shell, path = install(shell=shell, prog_name=PROXY, complete_var=COMPLETE_VAR)
    sys.stdout.write(f"{shell} completion installed in {path}\n"
                     "it takes effect in a new shell\n")
    return 0


def _complete() -> int:
    """Answer the shell's request for candidates: a typer command with wire-proxy's options
    (names, help, choices) does it; it is never used to run the proxy."""
    import typer
    from typer.main import get_command

    from . import protocols

    names = protocols.names()

    def protocol_names(incomplete: str) -> list[str]:
        return [n for n in names if n.startswith(incomplete)]

    app = typer.Typer(add_completion=True)

    @app.command()
    def proxy(
        command: list[str] | None = typer.Argument(None, metavar="CMD"),
        db: str | None = typer.Option(None, "--db", help="record into PATH"),
        name: str | None = typer.Option(None, "--name", help="name the session"),
        tag: list[str] | None = typer.Option(None, "--tag", help="tag the session"),
        protocol: str | None = typer.Option(None, "--protocol", help="the protocol",
                                            autocompletion=protocol_names),
        no_record: bool = typer.Option(False, "--no-record", help="relay only"),
        no_redact: bool = typer.Option(False, "--no-redact", help="store frames as they are"),
        snapshot_workdir: bool = typer.Option(False, "--snapshot-workdir",
                                              help="store the work dir files too"),
        wait: float | None = typer.Option(None, "--wait", help="seconds to wait at exit"),
        no_loss: bool = typer.Option(False, "--no-loss", help="never drop frames"),
        llm: bool = typer.Option(False, "--llm", help="record the model leg too"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no notes on stderr"),
        version: bool = typer.Option(False, "--version", help="print the version"),
    ) -> int:
        return 0

    try:
        get_command(app).main(args=[], prog_name=PROXY, complete_var=COMPLETE_VAR)
    except SystemExit as e:  # click ends a completion request with sys.exit
        return e.code if isinstance(e.code, int) else 0
    return 0


_relayed: list[int] = []  # the exit code, once a relay has ended
_main = entry(run, PROXY)


def main(argv: list[str] | None = None) -> int:
    """The console script (`main(argv)` returns the exit code, as every command's does). Run
    from the command line (argv None), a relay that has ended ends the process at once: the
    interpreter's teardown after it took ~6 ms more (measured here), and nothing needs it (the
    spool is closed, notes are written unbuffered, the loader is its own process)."""
    code = _main(argv)
    if argv is None and _relayed:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
