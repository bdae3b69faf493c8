"""Start-up is not a frame timeout: on a busy runner the real kimi may take a minute to answer
`initialize`, and a transcript has no recorded times to stretch a budget from. With two CPU
burners running (started and ended here), `--update` re-records a sample against the real
`kimi --wire` with only the agent command and the default timeouts (that every sample replays
green so is tests/test_replay_samples.py's second replay of each); an agent that never answers
says, in the report, that it gave up at start-up and how to raise the wait. No test here
asserts a time: what changes is the budget."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.harness.busy import cpu_burners
from tests.harness.replay import SAMPLES, cli_json, run_cli


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "WIRE_REPLAY_STARTUP_TIMEOUT"}
    env["HOME"] = str(home)
    return env


def test_update_rerecords_a_sample_on_a_busy_machine(kimi_exe, tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    out = tmp_path / "updated.jsonl"
    with cpu_burners():
        p = run_cli([SAMPLES / "approve_shell.jsonl", "--update", "-o", out, "--cwd",
                     tmp_path / "work", "--", kimi_exe, "--wire"],
                    env=_env(tmp_path / "home"), timeout=1800)
    assert p.returncode == 0, (p.stdout.decode()[-2000:], p.stderr.decode()[-2000:])
    assert out.stat().st_size > 0


def test_an_agent_that_never_answers_is_given_up_at_start_up_with_a_hint(tmp_path):
    # alive, reading its input, silent: never answers `initialize`
    silent = [sys.executable, "-c", "import sys; sys.stdin.buffer.read()"]
    # the start-up wait is at least the frame timeout: a short one (1 s) leaves the start-up
    # wait (2 s) in charge, so the report names that wait, not the 30 s default frame timeout
    short = ["--frame-timeout", "1", "--live-llm"]
    code, report = cli_json([str(SAMPLES / "approve_shell.jsonl"), "--startup-timeout", "2",
                             *short, "--", *silent], timeout=300)
    assert code == 1 and not report["ok"]
    (first,) = [d for d in report["divergences"] if d["kind"] == "timeout"]
    assert first["message"].startswith("gave up at start-up: the agent did not answer its first "
                                       "request within 2s of starting"), first
    assert "--startup-timeout S or WIRE_REPLAY_STARTUP_TIMEOUT=S" in first["message"]
    # the wait is the option's, or the variable's when the option is not given
    code, report = cli_json([str(SAMPLES / "approve_shell.jsonl"), *short, "--",
                             *silent], timeout=300, env={"WIRE_REPLAY_STARTUP_TIMEOUT": "3"})
    assert code == 1 and "gave up at start-up" in report["divergences"][0]["message"]
    assert "within 3s of starting" in report["divergences"][0]["message"]
    bad = run_cli([SAMPLES / "approve_shell.jsonl", "--live-llm", "--", *silent],
                  env={"WIRE_REPLAY_STARTUP_TIMEOUT": "soon"})
    assert bad.returncode == 2 and b"WIRE_REPLAY_STARTUP_TIMEOUT='soon'" in bad.stderr
