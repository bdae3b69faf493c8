"""`wire-proxy` command line.

Parsed by hand on purpose: typer and rich cost 100-200 ms to import, and the agent must be
spawned within 100 ms of the proxy's start. Every other command uses typer.
"""

from __future__ import annotations

import sys

from .edge import PROXY, entry, version_line
from .errors import UsageError

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
  --protocol NAME    {protocols} (default: detected from the first frames that tell)
  --no-record        relay only
  --no-redact        store frames as they are: no secrets replaced by placeholders
                     (redaction of the stored copy is on by default; relayed bytes never change)
  --snapshot-workdir store the agent's work dir files too (bounded, redacted), not only
                     their manifest: wire-replay then runs the agent in a copy of them
  --wait SECONDS     at exit, wait this long for the recording to be saved (default 30;
                     a DB held by another process is left to finish in the background
                     after 1 s, 0 = never wait)
  --no-loss          when the disk falls behind, slow the relay down instead of dropping
                     frames from the recording (by default the relay never waits)
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
    if argv and argv[0] == "recover":
        from .recover import recover_paths

        if len(argv) < 2:
            raise UsageError("recover needs a .db or .spool path", f"{PROXY} recover PATH")
        return recover_paths(argv[1:])
    parsed = parse_args(argv)
    if parsed == "help":
        from . import protocols  # the registry: in-tree adapters and installed ones

        sys.stdout.write(USAGE.format(protocols=", ".join(protocols.names())))
        return 0
    if parsed == "version":
        sys.stdout.write(version_line(PROXY))
        return 0
    from .proxy import run_proxy

    return run_proxy(parsed)


main = entry(run, PROXY)

if __name__ == "__main__":
    sys.exit(main())
