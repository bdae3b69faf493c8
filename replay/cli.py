"""`wire-replay` command line: a thin layer over replay.driver / replay.serve / replay.update.

    wire-replay SESSION [OPTIONS] [-- AGENT_CMD ...]     replay against an agent (exit 0/1)
    wire-replay SESSION --serve [OPTIONS]                be the recorded agent for a client

Errors and their exit codes are the shared ones (recorder.errors, through recorder.edge).

typer (with click) is the parser of record: its app is built on first need, for help,
completion, --version and every argument it takes that `fast_args` does not (each error
message is typer's). `fast_args` reads the plain forms a test run uses (`SESSION [-q] [--opt
VALUE | --opt=VALUE ...] -- AGENT`) to what typer would pass, and leaves everything else to
typer: importing typer and parsing costs ~50 ms a run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from wire_recorder.recorder.edge import entry, say
from wire_recorder.recorder.errors import UsageError
from wire_recorder.recorder.handoff import exists_after_loaders
from wire_recorder.recorder.visible import visible

from .driver import ReplayOptions, ReplayProgress, gc_paused, replay_session
from .normalize import IgnoreRule
from .options import Mode, OnUnmatched

PROG = "wire-replay"


def _help() -> str:
    from wire_recorder.recorder.helpstyle import help_text

    return help_text(
        "Replay a recorded session (Wire, ACP or MCP), deterministically, for regression tests. "
        "Agent under test (default): spawn AGENT_CMD (after --; the command stored in the "
        "recording runs only with --recorded-command), send the recorded client frames in causal "
        "order, answer the agent's requests with the recorded answers, and compare what the agent "
        "sends with the recording. For kimi, its model is pinned to what the recording says it "
        "answered (a scratch HOME and config made and removed here) unless --live-llm. "
        "Client under test (--serve): act as the recorded agent (MCP: server) on stdin/stdout.",
        ["wire-replay session.db -- kimi --wire",
         "wire-replay session.db --session NAME --json -- kimi --wire",
         "wire-replay acp.jsonl --cwd WORK -- kimi acp",
         "wire-replay session.db --serve",
         "wire-replay session.db --update -- kimi --wire",
         "wire-replay session.db --fork-at 1 --answer reject -- kimi --wire"],
        "For MCP, \"agent\" is the server (docs/protocols.md). Exit codes: 0 the run matches the "
        "recording, 1 it diverged, 2 bad input, usage, or an agent that cannot start or dies "
        "before answering (--fork-at: 0 the branch is stored, 1 the fork point was never reached). On a terminal, a replay running over 2 seconds shows a progress line on "
        "stderr (turn, client frames sent, agent frames received), wiped before the report.")


def _env_pairs(items: list[str]) -> dict[str, str]:
    env = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise UsageError(f"--env {it!r} is not KEY=VALUE")
        env[k] = v
    return env


# seconds a replay runs before its progress line shows (quick replays print nothing)
PROGRESS_AFTER_ENV = "WIRE_REPLAY_PROGRESS_AFTER"


class ProgressLine:
    """A live line on stderr while a replay runs, `turn 2/5 · sent 14/30 · received 212 frames`:
    on a terminal only, once the replay has run PROGRESS_AFTER_ENV seconds (default 2), and
    wiped before the report is printed."""

    def __init__(self, prog: str = PROG) -> None:
        import time

        self.prog, self._clock = prog, time.monotonic
        self.start = self._clock()
        try:
            self.after = float(os.environ.get(PROGRESS_AFTER_ENV, "2"))
        except ValueError:
            self.after = 2.0
        self.shown = False
        self._last = ""

    def __call__(self, p: ReplayProgress) -> None:
        if self._clock() - self.start < self.after:
            return
        turn = f"turn {p.turn}/{p.turns} · " if p.turns else ""
        line = (f"{self.prog}: {turn}sent {p.sent}/{p.to_send} · "
                f"received {p.received} frame{'s' if p.received != 1 else ''}")
        if line != self._last:  # the terminal is written to when something moved only
            self._write(f"\r\x1b[K{line}")
            self._last, self.shown = line, True

    def clear(self) -> None:
        if self.shown:
            self._write("\r\x1b[K")
            self.shown, self._last = False, ""

    @staticmethod
    def _write(text: str) -> None:
        try:
            os.write(2, text.encode(errors="replace"))
        except OSError:
            pass


# What a run without an option gets: typer's defaults are these too (typer_app).
DEFAULTS: dict[str, Any] = {
    "agent": None, "session": None, "serve": False, "update": False, "output": None,
    "match_on": None, "ignore": [], "no_default_ignores": False,
    "on_unmatched": OnUnmatched.FAIL, "speed": 0.0, "frame_timeout": 30.0, "startup_timeout": None, "timeout": 600.0,
    "recorded_command": False, "live_llm": False, "write_llm_script": None, "journal": None, "cwd": None,
    "env": [], "origin": [], "report": None, "as_json": False, "quiet": False,
    "fork_at": None, "answer": None}


def typer_app(body: Callable[..., int] | None = None) -> Any:
    """The typer app of wire-replay; `body` gets the parsed parameters (default:
    `replay_command`)."""
    import typer

    from wire_recorder.recorder.helpstyle import make_app

    call = replay_command if body is None else body
    d = DEFAULTS
    app = make_app()

    @app.command(help=_help())
    def command(
        session_file: str = typer.Argument(..., metavar="SESSION", help="a .db written by wire-proxy, or a .jsonl transcript"),
        agent: list[str] | None = typer.Argument(d["agent"], metavar="AGENT_CMD", help="after --: the agent to run", show_default=False),
        session: str | None = typer.Option(d["session"], "--session", "-s", help="session name or id (or a unique prefix) in a file holding several"),
        serve: bool = typer.Option(d["serve"], "--serve", help="act as the recorded agent on stdin/stdout (client under test)"),
        update: bool = typer.Option(d["update"], "--update", help="re-record the session against the current agent and summarise what changed"),
        output: str | None = typer.Option(d["output"], "--output", "-o", help="with --update: write here instead of over SESSION"),
        match_on: str | None = typer.Option(d["match_on"], "--match-on", help="matchers, comma separated (default: the protocol's; Wire: method,type,approval,tool_call,question,hook,other; ACP and MCP: method,payload; '+,NAME' adds to it)"),
        ignore: list[str] = typer.Option(d["ignore"], "--ignore", help="[TYPE:]dotted.path to ignore when comparing (repeatable; * and ** wildcards)"),
        no_default_ignores: bool = typer.Option(d["no_default_ignores"], "--no-default-ignores", help="compare the volatile fields too"),
        on_unmatched: OnUnmatched = typer.Option(d["on_unmatched"], "--on-unmatched", help="an agent request with no recorded match: stop the replay (fail), or answer it with a rejection (reject) or a JSON-RPC error (error) and go on"),
        speed: float = typer.Option(d["speed"], "--speed", help="0: as fast as possible; 1: recorded gaps; N: gaps / N"),
        frame_timeout: float = typer.Option(d["frame_timeout"], "--frame-timeout", help="seconds of silence allowed while a frame is expected"),
        startup_timeout: float | None = typer.Option(d["startup_timeout"], "--startup-timeout", help="seconds an agent that has said nothing yet (kimi: not answered initialize) may stay silent (default: $WIRE_REPLAY_STARTUP_TIMEOUT, else 300); frame timeouts apply once it speaks", show_default=False),
        timeout: float = typer.Option(d["timeout"], "--timeout", help="seconds for the whole run"),
        recorded_command: bool = typer.Option(d["recorded_command"], "--recorded-command", help="run the agent command stored in the recording, in the recorded cwd (it comes from the file: only for recordings you trust)"),
        live_llm: bool = typer.Option(d["live_llm"], "--live-llm", help="keep the agent's own configured model instead of pinning it to the recorded answers"),
        write_llm_script: str | None = typer.Option(d["write_llm_script"], "--write-llm-script", help="write the pinned LLM's scripts (derived from the recording) to PATH", metavar="PATH"),
        journal: str | None = typer.Option(d["journal"], "--journal", help="Kimi Code: the pinned LLM answers from the session's own journal (its wire.jsonl, session folder, or ~/.kimi-code/sessions) instead of what the recording shows", metavar="PATH"),
        cwd: str | None = typer.Option(d["cwd"], "--cwd", help="work dir for the agent (default: a fresh copy of the recorded snapshot if there is one, else the current dir; recorded cwd with --recorded-command)"),
        env: list[str] = typer.Option(d["env"], "--env", help="KEY=VALUE for the agent's environment (repeatable)"),
        origin: list[str] = typer.Option(d["origin"], "--origin", help="a recording (.db or .jsonl) holding the session that created what SESSION reopens (ACP session/load); replayed first. SESSION's own .db (for NAME.jsonl: NAME.origin.jsonl beside it) is always searched (repeatable)"),
        report: str | None = typer.Option(d["report"], "--report", help="also write a report: .xml JUnit, .json JSON, else text"),
        as_json: bool = typer.Option(d["as_json"], "--json", help="print the JSON report instead of text (stderr with --serve)"),
        quiet: bool = typer.Option(d["quiet"], "--quiet", "-q", help="only the verdict line"),
        fork_at: str | None = typer.Option(d["fork_at"], "--fork-at", help="fork the session at this agent request: N (the Nth), TYPE or TYPE#N (its type or method, as wire-show names it), or its JSON-RPC id; with --answer. The branch is stored as a new session linked to this one, in the same .db (or -o)", metavar="REQUEST"),
        answer: str | None = typer.Option(d["answer"], "--answer", help="with --fork-at: the changed answer, a word for its response field (approve, reject, ...) or a JSON object whose fields replace the result's", metavar="CHANGE"),
    ) -> int:
        given = locals()  # the parameters (and `call`, a free variable)
        return call(**{k: given[k] for k in ("session_file", *DEFAULTS)})

    return app


# the options `fast_args` reads, by how they are written: flag, one value, repeatable value
_FLAGS = {"--serve": "serve", "--update": "update", "--no-default-ignores": "no_default_ignores",
          "--recorded-command": "recorded_command", "--live-llm": "live_llm", "--json": "as_json",
          "--quiet": "quiet", "-q": "quiet"}
_VALUES = {"--session": "session", "-s": "session", "--output": "output", "-o": "output",
           "--match-on": "match_on", "--on-unmatched": "on_unmatched", "--speed": "speed",
           "--frame-timeout": "frame_timeout", "--startup-timeout": "startup_timeout",
           "--timeout": "timeout",
           "--write-llm-script": "write_llm_script", "--journal": "journal", "--cwd": "cwd", "--report": "report",
           "--fork-at": "fork_at", "--answer": "answer"}
_LISTS = {"--ignore": "ignore", "--env": "env", "--origin": "origin"}
_FLOATS = ("speed", "frame_timeout", "startup_timeout", "timeout")


def fast_args(args: Sequence[str]) -> dict[str, Any] | None:
    """The parameters typer would give `replay_command` for `args`, when written in the plain
    forms; None for anything else (help, completion, --version, a short option glued to its
    value, an option twice, a value starting with `-`, a number not written as digits[.digits],
    an unknown choice, a second positional before `--`, ...): typer then parses them."""
    if any(k.startswith(("_WIRE_REPLAY", "_TYPER")) for k in os.environ):
        return None  # a shell's completion request
    kw: dict[str, Any] = {}
    lists: dict[str, list[str]] = {k: [] for k in _LISTS.values()}
    session_file: str | None = None
    agent: list[str] | None = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            agent = list(args[i + 1:])
            break
        if a.startswith("-") and a != "-":
            name, eq, val = a.partition("=") if a.startswith("--") else (a, "", "")
            if name in _FLAGS and not eq:
                if _FLAGS[name] in kw:
                    return None
                kw[_FLAGS[name]] = True
            elif name in _VALUES or name in _LISTS:
                if not eq:
                    i += 1
                    if i >= len(args) or args[i].startswith("-"):
                        return None
                    val = args[i]
                if name in _LISTS:
                    lists[_LISTS[name]].append(val)
                else:
                    key = _VALUES[name]
                    if key in kw:
                        return None
                    if key in _FLOATS:
                        if not _decimal(val):
                            return None
                        kw[key] = float(val)
                    elif key == "on_unmatched":
                        if val not in {m.value for m in OnUnmatched}:
                            return None
                        kw[key] = OnUnmatched(val)
                    else:
                        kw[key] = val
            else:
                return None
        elif session_file is None:
            session_file = a
        else:
            return None
        i += 1
    if session_file is None:
        return None
    return {**DEFAULTS, **kw, **lists, "session_file": session_file, "agent": agent}


def _decimal(text: str) -> bool:
    head, dot, tail = text.partition(".")
    return head.isascii() and head.isdigit() and (not dot or (tail.isascii() and tail.isdigit()))


def replay_command(session_file: str, agent: list[str] | None, session: str | None,
                   serve: bool, update: bool, output: str | None, match_on: str | None,
                   ignore: list[str], no_default_ignores: bool, on_unmatched: OnUnmatched,
                   speed: float, frame_timeout: float, startup_timeout: float | None,
                   timeout: float, recorded_command: bool,
                   live_llm: bool, write_llm_script: str | None, cwd: str | None,
                   env: list[str], origin: list[str], report: str | None, as_json: bool,
                   quiet: bool, fork_at: str | None = None, answer: str | None = None,
                   journal: str | None = None) -> int:
    """wire-replay with its arguments parsed (by typer or `fast_args`)."""
    agent = list(agent or [])
    if (fork_at is None) != (answer is None):
        raise UsageError("--fork-at and --answer go together: the request to fork at, and the "
                         "answer to give it instead of the recorded one")
    if fork_at is not None and (serve or update):
        raise UsageError("--fork-at runs the agent: not with --serve or --update")
    if serve and journal:
        raise UsageError("--journal answers the pinned LLM of an agent replay: not with --serve")
    if serve and (update or agent or recorded_command):
        raise UsageError("--serve plays the agent itself: no agent command, --recorded-command "
                         "or --update with it")
    if agent and recorded_command:
        raise UsageError("--recorded-command runs the recorded agent command: give no command "
                         "after -- with it")
    mode = Mode.SERVE if serve else Mode.UPDATE if update else Mode.AGENT
    opts = ReplayOptions(match_on=match_on.split(",") if match_on else None,
                         ignore=[IgnoreRule.parse(i) for i in ignore],
                         default_ignores=not no_default_ignores, on_unmatched=on_unmatched.value,
                         speed=speed, frame_timeout=frame_timeout,
                         startup_timeout=startup_timeout, timeout=timeout,
                         recorded_command=recorded_command, live_llm=live_llm,
                         write_llm_script=write_llm_script, journal=journal).validate()
    if fork_at is not None and answer is not None:
        from .fork_cli import run_fork

        return run_fork(session_file, opts, fork_at=fork_at, answer=answer, agent=agent,
                        session=session, output=output, cwd=cwd, env=_env_pairs(env),
                        origin=origin, report=report, as_json=as_json, quiet=quiet)
    return run(session_file, mode, opts, agent=agent, session=session, output=output, cwd=cwd,
               env=_env_pairs(env), origin=origin, report=report, as_json=as_json, quiet=quiet)


def run(session_file: str, mode: Mode, opts: ReplayOptions, *, agent: Sequence[str] = (),
        session: str | None = None, output: str | None = None, cwd: str | None = None,
        env: dict[str, str] | None = None, origin: Sequence[str] = (),
        report: str | None = None, as_json: bool = False, quiet: bool = False) -> int:
    """wire-replay with its options parsed: replay, serve or update; print; the exit code."""
    with gc_paused():  # over the load and the report too
        return _run(session_file, mode, opts, agent=agent, session=session, output=output,
                    cwd=cwd, env=env, origin=origin, report=report, as_json=as_json,
                    quiet=quiet)


def _run(session_file: str, mode: Mode, opts: ReplayOptions, *, agent: Sequence[str],
         session: str | None, output: str | None, cwd: str | None,
         env: dict[str, str] | None, origin: Sequence[str], report: str | None,
         as_json: bool, quiet: bool) -> int:
    from . import report as rp
    from .recording import load

    if output and mode is not Mode.UPDATE:
        raise UsageError("--output only goes with --update")
    if mode is Mode.SERVE:  # a client's SIGTERM from now on ends the session with a report
        from .serve import hold_ending_signals

        hold_ending_signals()
    if origin and mode is Mode.SERVE:
        raise UsageError("--origin only goes with an agent under test, not --serve")
    for path in origin:
        if not exists_after_loaders(path) or not os.path.isfile(path):
            raise UsageError(f"--origin {path}: no such file", "give a .db or .jsonl recording")
    rec = load(session_file, session)
    if mode is not Mode.SERVE and not agent and not opts.recorded_command:
        from .driver import no_agent_command

        raise no_agent_command(rec, "--update" if mode is Mode.UPDATE else PROG)
    if mode is Mode.SERVE:
        from .serve import serve_session

        result = serve_session(rec, options=opts, hold_signals=True)  # until the report is out
        out = sys.stderr
    else:
        run_env = None
        if env:
            run_env = dict(os.environ)
            run_env.update(env)
        line = None
        if not quiet and opts.progress is None and sys.stderr.isatty():
            line = opts.progress = ProgressLine()
        try:
            result = replay_session(rec, list(agent) or None, env=run_env, cwd=cwd, options=opts,
                                    origin_files=origin)
        finally:
            if line is not None:
                line.clear()
        out = sys.stdout
    if report:
        rp.write_report(report, result)
    if mode is Mode.UPDATE:
        from .update import change_summary, update_recording

        if result.stopped:
            sys.stdout.write(rp.render_text(result, color=sys.stdout.isatty()))
            sys.stdout.flush()
            say(PROG, f"not updated: the replay stopped early ({result.stopped})")
            return 1
        path, written = update_recording(result, output)
        sys.stdout.write(visible(change_summary(result, path, written=written), lines=True))
        return 0
    if as_json:
        out.write(rp.render_json(result).decode() + "\n")
    elif quiet:
        out.write(rp.title(result) + "\n")
    elif mode is Mode.SERVE:
        if not result.ok:  # stdout is the protocol: the report goes to stderr
            sys.stderr.write(rp.render_text(result))
    else:
        out.write(rp.render_text(result, color=out.isatty()))
    out.flush()
    return result.exit_code


def _check_argv(argv: list[str]) -> None:
    """click cannot tell `S.db --` from `S.db`: an empty agent command is caught here."""
    if argv and argv[-1] == "--" and argv.count("--") == 1:
        raise UsageError("nothing after --", "give the agent command, e.g. -- kimi --wire")


def _main(args: list[str]) -> int:
    kw = fast_args(args)
    if kw is None:  # typer's parser, help and messages
        return entry(typer_app(), PROG)(args)
    return replay_command(**kw)


main = entry(_main, PROG, check_argv=_check_argv)

if __name__ == "__main__":
    sys.exit(main())
