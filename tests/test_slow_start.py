"""Start-up is not a frame timeout: on a busy runner the real kimi may take a minute to answer
`initialize`, and a transcript has no recorded times to stretch a budget from. With two CPU
burners running (started and ended here), every exported Wire sample replays green against the
real `kimi --wire` with only the agent command and the default timeouts, and `--update`
re-records one; an agent that never answers says, in the report, that it gave up at start-up
and how to raise the wait. No test here asserts a time: what changes is the budget."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.replay import SAMPLES, cli_json, parallel, run_cli, sample_names

WIRE = sample_names()


@contextlib.contextmanager
def cpu_burners(n: int = 2) -> Iterator[None]:
    """`n` processes spinning on the CPU (`yes > /dev/null`), ended by their pids afterwards."""
    procs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "WIRE_REPLAY_STARTUP_TIMEOUT"}
    env["HOME"] = str(home)
    return env


@pytest.fixture(scope="module")
def busy_replays(kimi_exe, tmp_path_factory) -> dict[str, tuple[int, dict]]:
    def one(name: str) -> tuple[str, tuple[int, dict]]:
        root = tmp_path_factory.mktemp(f"busy-{name}")
        (root / "home").mkdir()
        (root / "work").mkdir()
        proc = subprocess.run([str(Path(sys.executable).parent / "wire-replay"),
                               str(SAMPLES / f"{name}.jsonl"), "--json", "--cwd",
                               str(root / "work"), "--", str(kimi_exe), "--wire"],
                              env=_env(root / "home"), capture_output=True, timeout=1800)
        assert b"Traceback" not in proc.stderr, proc.stderr.decode()
        import json

        return name, (proc.returncode, json.loads(proc.stdout))

    with cpu_burners():
        return dict(parallel(one, WIRE))


@pytest.mark.parametrize("name", WIRE)
def test_every_wire_sample_replays_green_on_a_busy_machine(busy_replays, name):
    code, report = busy_replays[name]
    assert code == 0 and report["ok"], (report["divergences"], report.get("stopped"))


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
