"""`wire-proxy` command line.

Parsed by hand on purpose: typer and rich cost 100-200 ms to import, and the agent must be
spawned within 100 ms of the proxy's start. Every other command uses typer.
"""

from __future__ import annotations

import os
import sys

from . import __version__
from .errors import UserError

USAGE = """\
usage: wire-proxy [OPTIONS] -- CMD [ARGS...]
       wire-proxy recover PATH...

Relay stdin/stdout/stderr between a client and CMD byte for byte, recording every frame
into a DuckDB file.

options:
  --db PATH          record into PATH (default: $WIRE_PROXY_DB, else one new file per
                     session under $WIRE_RECORDER_HOME or ~/.local/share/wire-recorder/sessions)
  --name NAME        name the session
  --tag KEY=VALUE    tag the session (repeatable)
  --protocol NAME    wire, acp or mcp (default: detected from the first frames that tell)
  --no-record        relay only
  --wait SECONDS     at exit, wait this long for the recording to be saved (default 30)
  -q, --quiet        no notes on stderr (problems are still reported)
  --version          print the version
  -h, --help         this help

recover PATH...      bring spools left by a killed proxy into their DB (PATH: a .db or .spool)
"""

VALUE_OPTIONS = {"--db", "--name", "--tag", "--protocol", "--wait"}


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
                    raise UserError(f"option {name} needs a value", "see wire-proxy --help")
                i += 1
                value = argv[i]
            if name == "--db":
                opts.db = value
            elif name == "--name":
                opts.name = value
            elif name == "--tag":
                key, sep, val = value.partition("=")
                if not sep or not key:
                    raise UserError(f"--tag {value!r} is not KEY=VALUE", "e.g. --tag team=ide")
                opts.tags[key] = val
            elif name == "--protocol":
                from . import protocols  # name sets only: cheap for the relay process

                if value not in protocols.names():
                    raise UserError(f"unknown protocol {value!r}",
                                    f"use one of {', '.join(protocols.names())}")
                opts.protocol = value
            elif name == "--wait":
                try:
                    opts.loader_wait_s = float(value)
                except ValueError:
                    raise UserError(f"--wait {value!r} is not a number of seconds") from None
        elif arg in ("-q", "--quiet"):
            opts.quiet = True
        elif arg == "--no-record":
            opts.record = False
        elif arg in ("-h", "--help"):
            return "help"
        elif arg == "--version":
            return "version"
        else:
            raise UserError(f"unknown option {arg}", "see wire-proxy --help")
        i += 1
    if not opts.command:
        raise UserError("no agent command given", "usage: wire-proxy [OPTIONS] -- CMD [ARGS...]")
    return opts


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] == "recover":
            from .recover import recover_paths

            if len(argv) < 2:
                raise UserError("recover needs a .db or .spool path", "wire-proxy recover PATH")
            return recover_paths(argv[1:])
        parsed = parse_args(argv)
        if parsed == "help":
            sys.stdout.write(USAGE)
            return 0
        if parsed == "version":
            sys.stdout.write(f"wire-proxy {__version__}\n")
            return 0
        from .proxy import run_proxy

        return run_proxy(parsed)
    except UserError as e:
        os.write(2, f"wire-proxy: {e.one_line()}\n".encode(errors="replace"))
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
