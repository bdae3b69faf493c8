"""`wire-replay` command line: a thin layer over replay.driver / replay.serve / replay.update.

    wire-replay SESSION [OPTIONS] [-- AGENT_CMD ...]     replay against an agent (exit 0/1/2)
    wire-replay SESSION --serve [OPTIONS]                be the recorded agent for a client
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import typer

from wire_recorder.recorder.cli_edge import run_app

from .driver import ReplayOptions, replay_session
from .errors import ReplayInputError
from .normalize import IgnoreRule

HELP = """Replay a recorded session (Wire, ACP or MCP), deterministically, for regression tests.

  wire-replay SESSION [OPTIONS] [-- AGENT_CMD ...]   (agent under test)

  wire-replay SESSION --serve [OPTIONS]              (client under test)

Agent under test (default): spawn AGENT_CMD (after --; default: the recorded command), send
the recorded client frames in causal order, answer the agent's requests with the recorded
answers, and compare what the agent sends with the recording.

Client under test (--serve): act as the recorded agent (MCP: server) on stdin/stdout.

For MCP, "agent" is the server. See docs/protocols.md for what changes per protocol.

Exit codes: 0 the run matches the recording, 1 it diverged, 2 bad input or usage.
"""

_agent_cmd: list[str] = []


def _env_pairs(items: list[str]) -> dict[str, str]:
    env = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise ReplayInputError(f"--env {it!r} is not KEY=VALUE")
        env[k] = v
    return env


def _err(msg: str) -> None:
    try:
        os.write(2, f"wire-replay: {msg}\n".encode(errors="replace"))
    except OSError:
        pass


def command(
    session_file: str = typer.Argument(..., metavar="SESSION", help="a .db written by wire-proxy, or a .jsonl transcript"),
    session: Optional[str] = typer.Option(None, "--session", "-s", help="session id (or unique prefix) in a file holding several"),
    serve: bool = typer.Option(False, "--serve", help="act as the recorded agent on stdin/stdout (client under test)"),
    update: bool = typer.Option(False, "--update", help="re-record the session against the current agent and summarise what changed"),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="with --update: write here instead of over SESSION"),
    match_on: Optional[str] = typer.Option(None, "--match-on", help="matchers, comma separated (default: the protocol's; Wire: method,type,approval,tool_call,question,hook,other; ACP and MCP: method,payload; '+,NAME' adds to it)"),
    ignore: List[str] = typer.Option([], "--ignore", help="[TYPE:]dotted.path to ignore when comparing (repeatable; * and ** wildcards)"),
    no_default_ignores: bool = typer.Option(False, "--no-default-ignores", help="compare the volatile fields too"),
    on_unmatched: str = typer.Option("fail", "--on-unmatched", help="an agent request with no recorded match: fail | reject | error"),
    speed: float = typer.Option(0.0, "--speed", help="0: as fast as possible; 1: recorded gaps; N: gaps / N"),
    frame_timeout: float = typer.Option(30.0, "--frame-timeout", help="seconds of silence allowed while a frame is expected"),
    timeout: float = typer.Option(600.0, "--timeout", help="seconds for the whole run"),
    cwd: Optional[str] = typer.Option(None, "--cwd", help="work dir for the agent (default: current dir; recorded cwd with the recorded command)"),
    env: List[str] = typer.Option([], "--env", help="KEY=VALUE for the agent's environment (repeatable)"),
    origin: List[str] = typer.Option([], "--origin", help="a recording (.db or .jsonl) holding the session that created what SESSION reopens (ACP session/load); replayed first. SESSION's own .db (for NAME.jsonl: NAME.origin.jsonl beside it) is always searched (repeatable)"),
    report: Optional[str] = typer.Option(None, "--report", help="also write a report: .xml JUnit, .json JSON, else text"),
    as_json: bool = typer.Option(False, "--json", help="print the JSON report instead of text (stderr with --serve)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="only the verdict line"),
) -> int:
    # user errors and Ctrl-C become one line at the shared CLI edge (recorder.cli_edge)
    return _run(session_file, session, serve, update, output, match_on, ignore,
                no_default_ignores, on_unmatched, speed, frame_timeout, timeout, cwd, env,
                report, as_json, quiet, origin)


def _run(session_file, session, serve, update, output, match_on, ignore, no_default_ignores,
         on_unmatched, speed, frame_timeout, timeout, cwd, env, report, as_json, quiet,
         origin=()) -> int:
    from . import report as rp
    from .recording import load

    opts = ReplayOptions(match_on=match_on.split(",") if match_on else None,
                         ignore=[IgnoreRule.parse(i) for i in ignore],
                         default_ignores=not no_default_ignores, on_unmatched=on_unmatched,
                         speed=speed, frame_timeout=frame_timeout, timeout=timeout).validate()
    if serve and (update or _agent_cmd):
        raise ReplayInputError("--serve plays the agent itself: no agent command or --update with it")
    if output and not update:
        raise ReplayInputError("--output only goes with --update")
    if origin and serve:
        raise ReplayInputError("--origin only goes with an agent under test, not --serve")
    for path in origin:
        if not os.path.isfile(path):
            raise ReplayInputError(f"--origin {path}: no such file",
                                   "give a .db or .jsonl recording")
    rec = load(session_file, session)
    if serve:
        from .serve import serve_session

        result = serve_session(rec, options=opts)
        out = sys.stderr
    else:
        run_env = None
        if env:
            run_env = dict(os.environ)
            run_env.update(_env_pairs(env))
        result = replay_session(rec, _agent_cmd or None, env=run_env, cwd=cwd, options=opts,
                                origin_files=origin)
        out = sys.stdout
    if report:
        rp.write_report(report, result)
    if update:
        from .update import change_summary, write_update

        if result.stopped:
            sys.stdout.write(rp.render_text(result, color=sys.stdout.isatty()))
            _err(f"not updated: the replay stopped early ({result.stopped})")
            return 1
        path = write_update(result, output)
        sys.stdout.write(change_summary(result, path))
        return 0
    if as_json:
        out.write(rp.render_json(result).decode() + "\n")
    elif quiet:
        out.write(rp.title(result) + "\n")
    elif serve:
        if not result.ok:  # stdout is the protocol: the report goes to stderr
            sys.stderr.write(rp.render_text(result))
    else:
        out.write(rp.render_text(result, color=out.isatty()))
    out.flush()
    return result.exit_code


def _app() -> typer.Typer:
    app = typer.Typer(add_completion=False, help=HELP, rich_markup_mode=None,
                      context_settings={"help_option_names": ["-h", "--help"]})
    app.command(help=HELP)(command)
    return app


def main(argv: list[str] | None = None) -> int:
    global _agent_cmd
    argv = list(sys.argv[1:] if argv is None else argv)
    # the agent command may carry its own options (--wire, -w …): cut it off before parsing
    if "--" in argv:
        i = argv.index("--")
        argv, _agent_cmd = argv[:i], argv[i + 1:]
        if not _agent_cmd:
            _err("nothing after --: give the agent command, e.g. -- kimi --wire")
            return 2
    else:
        _agent_cmd = []
    try:
        run_app(_app(), "wire-replay", argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
