"""The pytest plugin (`wire_replay` fixture and marker, record modes) in a pytest run of its own.

The agent under test here is `wire-replay SAMPLE --serve`, the recorded kimi played back over
real pipes: both replay directions meet, and no LLM is needed."""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness.replay import SAMPLES, WIRE_REPLAY

DATA = Path(__file__).parent / "data"

pytest_plugins = ("pytester",)


def _module(recording, serve_of, mode_line="", extra=""):
    return f"""
import shutil, pytest

AGENT = [{WIRE_REPLAY!r}, {str(SAMPLES / serve_of)!r}, "--serve"]

@pytest.mark.wire_replay({str(recording)!r}, agent=AGENT, frame_timeout=10)
def test_replay(wire_replay):
    result = wire_replay({extra})
    assert result.ok
"""


def test_marker_and_fixture_replay_a_session(pytester):
    pytester.makepyfile(_module(SAMPLES / "approve_shell.jsonl", "approve_shell.jsonl"))
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_a_divergence_fails_the_test_with_the_report(pytester):
    pytester.makepyfile(_module(SAMPLES / "approve_shell.jsonl", "reject_shell.jsonl"))
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "the agent DIVERGED" in out
    assert "first divergence: before the first turn" in out or "first divergence: turn 1" in out
    assert "Traceback" not in out


def test_record_mode_none_needs_the_recording(pytester, tmp_path):
    pytester.makepyfile(_module(tmp_path / "missing.jsonl", "approve_shell.jsonl"))
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--wire-record-mode=none")
    res.assert_outcomes(failed=1)
    assert "does not exist (record mode is none" in res.stdout.str()


def test_record_mode_once_records_a_missing_recording_then_replays(pytester, tmp_path):
    target = tmp_path / "new.jsonl"
    record = f"record=lambda p: shutil.copy({str(SAMPLES / 'approve_shell.jsonl')!r}, p)"
    pytester.makepyfile(_module(target, "approve_shell.jsonl", extra=record))
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--wire-record-mode=once").assert_outcomes(passed=1)
    assert target.exists()


def test_record_mode_all_rerecords_against_the_current_agent(pytester, tmp_path):
    # a format-1 transcript (as recorded before format 2) of the same session: the re-recording
    # is accepted and brings the file to format 2
    target = tmp_path / "old.jsonl"
    target.write_bytes((DATA / "approve_shell.format1.jsonl").read_bytes())
    pytester.makepyfile(_module(target, "approve_shell.jsonl"))
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "--wire-record-mode=all")
    res.assert_outcomes(passed=1)
    assert f"updated {target}" in res.stdout.str()
    header = json.loads(target.read_text().splitlines()[0])
    assert header["wire_transcript"] == 2  # format 2: no source, times or pids to churn
    assert header["session"]["command"][1:] == [str(SAMPLES / "approve_shell.jsonl"), "--serve"]
    # accepted again: a format-2 file is left alone (its agent command differs, and that is no
    # change of behaviour)
    before = target.read_bytes()
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "--wire-record-mode=all")
    res.assert_outcomes(passed=1)
    assert f"unchanged {target}" in res.stdout.str()
    assert target.read_bytes() == before


def test_unknown_record_mode_is_a_usage_error(pytester):
    pytester.makepyfile("def test_x(): pass\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--wire-record-mode=sometimes")
    assert res.ret != 0
    assert "invalid choice" in res.stderr.str()
