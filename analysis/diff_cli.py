"""`wire-diff A B`: a thin command line over analysis.diff."""

from __future__ import annotations

import sys

import typer

from wire_recorder.recorder.edge import entry
from wire_recorder.recorder.errors import UsageError
from wire_recorder.recorder.helpstyle import help_text, make_app

DIFF = "wire-diff"
app = make_app()

SIDE_HELP = ("a recording (.db) or transcript (.jsonl) holding one session, FILE#SESSION "
             "(name, id, or a unique prefix), a session name or id in the --db files, or a "
             "wire-replay --report .json of the other side")


def parse_time(text: str) -> tuple[float, float]:
    """--time-tolerance: `500ms`, `2s`, `50%`, or both (`1s,50%`): (ms, ratio)."""
    ms, ratio = 0.0, 0.0
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            if part.endswith("%"):
                ratio = float(part[:-1]) / 100
            elif part.endswith("ms"):
                ms = float(part[:-2])
            elif part.endswith("s"):
                ms = float(part[:-1]) * 1000
            else:
                ms = float(part)
        except ValueError:
            raise UsageError(f"--time-tolerance {text!r}: not a duration or percentage",
                             "e.g. 500ms, 2s, 50%, or 1s,50%") from None
        if not (ms >= 0 and ratio >= 0):
            raise UsageError(f"--time-tolerance {text!r}: must not be negative")
    return ms, ratio


@app.command(help=help_text(
    "What changed between two sessions (any protocol): model text, tool calls, arguments and "
    "results, answers to requests, errors, tokens, and timings beyond a tolerance, aligned by "
    "turn, step and tool call; ids, times and scratch paths are masked. Exit 0: the same; 1: "
    "different; 2: bad input.",
    ["wire-diff before.db after.db",
     "wire-diff runs.db#approve-1 runs.db#approve-2 --json",
     "wire-diff --db runs.db approve-1 approve-2 --time-tolerance 2s,50%",
     "wire-diff rec.db replay-report.json"]))
def diff_cmd(
    a: str = typer.Argument(..., metavar="A", help=SIDE_HELP),
    b: str = typer.Argument(..., metavar="B", help="the other side, as A"),
    db: list[str] = typer.Option([], "--db", "-d", metavar="FILE",
                                 help="recordings where A and B are looked "
                                 "up by session name or id (repeatable; globs, folders)"),
    as_json: bool = typer.Option(False, "--json", help="print the differences as JSON"),
    time_tolerance: str | None = typer.Option(
        None, "--time-tolerance", metavar="T",
        help="compare timings (turn, step, tool and wait durations): a difference counts when "
             "beyond T, e.g. 500ms, 2s, 50%, or 1s,50% (both must be exceeded); without it "
             "timings are not compared"),
    token_tolerance: float = typer.Option(
        0.0, "--token-tolerance", metavar="PCT",
        help="token counts may differ by this many percent (default 0: exactly equal)"),
    width: int = typer.Option(110, "--width", help="text: line width"),
) -> int:
    from .diff import diff
    from .diff_compare import Tolerance
    from .diff_report import render_json, render_text

    if not token_tolerance >= 0:
        raise UsageError(f"--token-tolerance {token_tolerance}: must not be negative")
    ms, ratio = parse_time(time_tolerance) if time_tolerance is not None else (None, 0.0)
    result = diff(a, b, db, Tolerance(ms, ratio, token_tolerance / 100))
    if as_json:
        sys.stdout.buffer.write(render_json(result))
    else:
        sys.stdout.write(render_text(result, color=sys.stdout.isatty(), width=width))
    return result.exit_code


main = entry(app, DIFF)
