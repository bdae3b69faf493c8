"""wire-replay reads plain command lines itself (replay.cli.fast_args) and leaves the rest to
typer: what it reads must be what typer would pass, and what it leaves must reach typer."""

from __future__ import annotations

import pytest

from wire_recorder.replay import cli
from wire_recorder.replay.options import OnUnmatched

A = ["--", "python", "agent.py", "--flag", "-q"]
PLAIN = [
    ["s.db", *A],
    ["s.db", "-q", *A],
    ["s.jsonl", "--quiet", "--json", "--session", "NAME", "--speed", "1.5", *A],
    ["s.db", "-s", "x", "--frame-timeout=60", "--timeout", "10", "--on-unmatched", "reject", *A],
    ["s.db", "--startup-timeout", "900", "--journal", "sessions/session_x", *A],
    ["s.db", "--ignore", "a.b", "--ignore=ApprovalRequest:payload.id", "--env", "K=V",
     "--env", "L=", "--origin", "o.db", "--cwd", "/w", "--report", "r.xml", *A],
    ["s.db", "--update", "-o", "out.db", "--match-on", "+,tool_call_id", "--live-llm",
     "--write-llm-script", "p.json", "--no-default-ignores", *A],
    ["s.db", "--serve"],
    ["--recorded-command", "s.db"],
    ["s.db", "--cwd=", "--", "--"],
]
LEFT_TO_TYPER = [
    ["--help"], ["-h"], ["--version"], ["s.db", "--show-completion"], [],
    ["s.db", "-qs", "x", *A],  # short options glued
    ["s.db", "-sx", *A],
    ["s.db", "-q", "-q", *A],  # twice
    ["s.db", "--speed", "-1", *A],  # a value like an option
    ["s.db", "--speed", "1e3", *A], ["s.db", "--speed", "fast", *A],
    ["s.db", "--on-unmatched", "REJECT", *A],
    ["s.db", "kimi", "--", "--wire"],  # a second positional before --
    ["s.db", "--bogus", *A], ["s.db", "--serve=1"], ["s.db", "--session"],
]


def typer_parse(args: list[str]) -> dict:
    got: dict = {}

    def body(**kw) -> int:
        got.update(kw)
        return 0

    code = cli.entry(cli.typer_app(body), cli.PROG)(args)
    assert code == 0
    return got


@pytest.mark.parametrize("args", PLAIN, ids=" ".join)
def test_plain_command_lines_parse_as_typer_parses_them(args):
    fast = cli.fast_args(args)
    assert fast is not None
    slow = typer_parse(args)
    slow["agent"] = slow["agent"] or None  # typer gives () or None for no agent
    if fast["agent"] is not None:
        slow["agent"] = list(slow["agent"])
    assert fast == slow
    assert set(fast) == {"session_file", *cli.DEFAULTS}


def test_the_rest_is_left_to_typer(monkeypatch):
    for args in LEFT_TO_TYPER:
        assert cli.fast_args(args) is None, args
    assert cli.fast_args(["s.db", "--on-unmatched", "error", *A])["on_unmatched"] is OnUnmatched.ERROR
    monkeypatch.setenv("_WIRE_REPLAY_COMPLETE", "complete_bash")
    assert cli.fast_args(PLAIN[0]) is None
