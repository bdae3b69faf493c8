"""`wire-ui`: serve the web app over recordings on 127.0.0.1 and print its URL."""

from __future__ import annotations

import sys

import typer

from wire_recorder.recorder.edge import entry
from wire_recorder.recorder.helpstyle import help_text, make_app

UI = "wire-ui"

HELP = help_text(
    "A local web app over recordings: session index and search, conversation, timeline, "
    "frame inspector, live sessions, replay divergences. Read-only; listens on 127.0.0.1 "
    "only; prints the URL (with its token) and opens a browser. With `--agent [REPLAY-OPTIONS] -- AGENT...` "
    "last (wire-replay's options for the forks, e.g. --frame-timeout 60 or --cwd DIR), an agent request's item offers \"answer differently and continue\": a fork "
    "(wire-replay --fork-at) run with that command, its branch stored in --forks and opened.",
    ["wire-ui",
     "wire-ui session.db other.db",
     "wire-ui 'sessions/**/*.db' report.json --no-browser",
     "wire-ui recordings/ --port 8765",
     "wire-ui session.db --agent -- kimi --wire"])

app = make_app()


@app.command(help=HELP)
def ui_cmd(
    paths: list[str] = typer.Argument(None, metavar="PATH",
                                      help="recordings (.db, globs, folders, .jsonl) and "
                                      "wire-replay --json reports (.json); default: the data "
                                      "folder where wire-proxy records"),
    port: int = typer.Option(0, "--port", "-p", help="the port (default: a free one)"),
    no_browser: bool = typer.Option(False, "--no-browser", help="print the URL only"),
    forks: str = typer.Option(None, "--forks", metavar="FILE.db",
                              help="where forks started here store their branches (default: "
                              "forks.db in the data folder); recordings are never written"),
) -> None:
    from wire_recorder.recorder.errors import NoRecordings, UsageError

    from . import closing
    from .data import Catalog
    from .server import serve

    if not paths:
        import os

        from wire_recorder.recorder.paths import data_dir

        folder = os.path.join(data_dir(), "sessions")
        if not os.path.isdir(folder):
            raise NoRecordings(f"no recordings yet in {folder}",
                               "record with wire-proxy, or give files: wire-ui x.db")
        paths = [folder]
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: not a port")
    _check_inputs(paths)
    if _AGENT == []:
        raise UsageError("--agent: no command after it", "wire-ui S.db --agent -- kimi --wire")
    if forks is not None and not forks.endswith(".db"):
        raise UsageError(f"--forks {forks}: not a .db file", "give --forks branches.db")
    catalog = Catalog(paths)
    closing.reset()
    try:
        server = serve(catalog, port)
    except OSError as e:
        raise UsageError(f"cannot listen on 127.0.0.1:{port}: {e.strerror}") from None
    from .forkjob import Forks, branch_key

    server.forks = Forks(_AGENT, forks or _default_forks(),
                         lambda db, sid: branch_key(server, db, sid), options=_FORK_OPTS)
    previous = closing.on_signals()  # SIGTERM and SIGHUP: the clean-up Ctrl-C gets
    try:
        sys.stdout.write(server.url + "\n")
        sys.stdout.flush()
        server.refresh_async()  # the index is built after the URL is out
        if not no_browser:
            import webbrowser

            webbrowser.open(server.url)
        server.serve_forever(poll_interval=0.2)
    finally:
        closing.close_down(server, previous)  # the fork stopped, no thread left in DuckDB


def _check_inputs(paths: list[str]) -> None:
    """Every path names something, before the URL is printed (the recordings themselves are read
    after it). Light on purpose: DuckDB is not imported here."""
    import os

    from wire_recorder.recorder.errors import NotARecording

    from ..inputs import expand, files_below

    for p in paths:
        if p.endswith(".json") and not os.path.isfile(p):
            raise NotARecording(f"{p}: no such file")
    expand([p for p in paths if not p.endswith(".json")],
           lambda d: files_below(d, "*.db") or files_below(d, "*.spool")
           or ([d] if os.path.isdir(os.path.join(d, "frames")) else []),
           "{} is a folder without recordings (*.db)")


def _default_forks() -> str:
    import os

    from wire_recorder.recorder.paths import data_dir

    return os.path.join(data_dir(), "forks.db")


# the agent command to fork with (`--agent -- AGENT...`, the rest of the command line): None
# when not given, [] when given empty
_AGENT: list[str] | None = None
# wire-replay options for the forks, between --agent and -- (--frame-timeout 60, --cwd DIR)
_FORK_OPTS: list[str] = []
_main = entry(app, UI)


def main(argv: list[str] | None = None) -> int:
    """`wire-ui` as a console script; what follows `--agent` (and an optional `--`) is the
    agent command, kept from typer's parsing."""
    global _AGENT
    _FORK_OPTS.clear()
    args = list(sys.argv[1:] if argv is None else argv)
    _AGENT = None
    if "--agent" in args:
        at = args.index("--agent")
        args, rest = args[:at], args[at + 1:]
        cut = rest.index("--") if "--" in rest else -1
        _AGENT, _FORK_OPTS[:] = rest[cut + 1:], rest[:max(cut, 0)]
    code = _main(args)
    from .closing import exit_code

    return exit_code(code)
