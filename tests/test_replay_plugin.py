"""The pytest plugin (the `wire_agent` and `wire_replay` fixtures, markers, cassettes, record
modes) in pytest runs of their own.

The agent here is `wire-replay SAMPLE --serve`, the recorded kimi played back over real pipes:
both replay directions meet, and no LLM is needed. tests/test_plugin_project.py does the same
with the real kimi from the installed wheel."""

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
    # the change summary is in pytest's terminal summary, without -s
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--wire-record-mode=all")
    res.assert_outcomes(passed=1)
    assert "wire-replay cassettes" in res.stdout.str()
    assert f"updated {target}" in res.stdout.str()
    header = json.loads(target.read_text().splitlines()[0])
    assert header["wire_transcript"] == 2  # format 2: no source, times or pids to churn
    assert header["session"]["command"][1:] == [str(SAMPLES / "approve_shell.jsonl"), "--serve"]
    # accepted again: a format-2 file is left alone (its agent command differs, and that is no
    # change of behaviour)
    before = target.read_bytes()
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--wire-record-mode=all")
    res.assert_outcomes(passed=1)
    assert f"unchanged {target}" in res.stdout.str()
    assert target.read_bytes() == before
    # rewrite: the live run is written whatever the comparison says
    target.write_bytes((DATA / "approve_shell.format1.jsonl").read_bytes())
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--wire-record-mode=rewrite")
    res.assert_outcomes(passed=1)
    assert f"rewritten {target}" in res.stdout.str()
    assert target.read_bytes() == before


def test_unknown_record_mode_is_a_usage_error(pytester):
    pytester.makepyfile("def test_x(): pass\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--wire-record-mode=sometimes")
    assert res.ret != 0
    assert "invalid choice" in res.stderr.str()


CLIENT = DATA / "tiny_wire_client.py"


def _tiny_sample(where: Path) -> Path:
    """approve_shell as recorded from tests/data/tiny_wire_client.py (its client's name)."""
    text = (SAMPLES / "approve_shell.jsonl").read_text()
    path = where / "approve_shell.tiny.jsonl"
    path.write_text(text.replace('"name":"wire-recorder-scripted-client"', '"name":"tiny-client"'))
    return path


CLIENT_TEST = """
import os, tiny_wire_client

def test_hello(wire_agent):
    said = tiny_wire_client.run(wire_agent, os.environ.get("TINY_ANSWER", "approve"))
    assert "hello" in said
"""


def test_client_under_test_records_its_cassette_and_rerecords_it(pytester, tmp_path):
    stand_in = f"{WIRE_REPLAY} {_tiny_sample(tmp_path)} --serve"
    pytester.makepyfile(tiny_wire_client=CLIENT.read_text(), test_client=CLIENT_TEST)
    run = ("-p", "no:cacheprovider", "-o", "pythonpath=.")
    cassette = pytester.path / "cassettes" / "test_client" / "test_hello.jsonl"

    # none (the default): no cassette, no recording
    res = pytester.runpytest_subprocess(*run, "-o", f"wire_agent_command={stand_in}")
    res.assert_outcomes(errors=1)  # at set-up: the client never runs
    assert "cassette" in res.stdout.str() and "does not exist (record mode none" in res.stdout.str()
    assert not cassette.exists()

    # once: recorded through wire-proxy in front of the agent; the summary says so without -s
    res = pytester.runpytest_subprocess(*run, "--wire-record-mode=once",
                                        "-o", f"wire_agent_command={stand_in}")
    res.assert_outcomes(passed=1)
    out = res.stdout.str()
    assert "wire-replay cassettes" in out and "recorded cassettes/test_client/test_hello.jsonl" in out
    header = json.loads(cassette.read_text().splitlines()[0])
    assert header["wire_transcript"] == 2 and header["session"]["name"] == "test_hello"

    # replayed with --serve (no agent command needed), a client answering differently failing
    # the test: tests/test_plugin_project.py, with the real kimi and the installed wheel

    # all: re-recorded; the same session leaves the file alone; rewrite writes it anew
    before = cassette.read_bytes()
    res = pytester.runpytest_subprocess(*run, "--wire-record-mode=all",
                                        "-o", f"wire_agent_command={stand_in}")
    res.assert_outcomes(passed=1)
    assert "unchanged cassettes/test_client/test_hello.jsonl" in res.stdout.str()
    assert cassette.read_bytes() == before
    res = pytester.runpytest_subprocess(*run, "--wire-record-mode=rewrite",
                                        "-o", f"wire_agent_command={stand_in}")
    res.assert_outcomes(passed=1)
    assert "rewritten cassettes/test_client/test_hello.jsonl" in res.stdout.str()
    # the frames are the same; the header's work dir manifest no longer lists the cassette
    assert cassette.read_bytes().split(b"\n")[1:] == before.split(b"\n")[1:]


def test_a_recordings_own_command_never_runs_through_the_plugin(pytester, tmp_path):
    """A cassette whose stored command is `sh -c "touch PWNED"`, in the test's own folder: the
    client under test gets --serve, the agent under test needs a command of the test's own."""
    lines = _tiny_sample(tmp_path).read_text().splitlines()
    hostile = ["sh", "-c", "touch PWNED"]
    for i in (0, 1):
        obj = json.loads(lines[i])
        (obj["session"] if i == 0 else obj["data"])["argv" if i else "command"] = hostile
        (obj["session"] if i == 0 else obj["data"])["cwd"] = str(pytester.path)
        lines[i] = json.dumps(obj)
    cassettes = pytester.path / "cassettes" / "test_pwn"
    cassettes.mkdir(parents=True)
    for name in ("test_client", "test_agent"):
        (cassettes / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    pytester.makepyfile(tiny_wire_client=CLIENT.read_text(), test_pwn="""
import tiny_wire_client

def test_client(wire_agent):
    assert "hello" in tiny_wire_client.run(wire_agent)

def test_agent(wire_replay):
    wire_replay()
""")
    for mode in ("none", "all"):
        res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-o", "pythonpath=.",
                                            f"--wire-record-mode={mode}")
        out = res.stdout.str()
        if mode == "none":
            res.assert_outcomes(passed=1, failed=1)
        else:  # re-recording needs an agent command of the test's own too
            res.assert_outcomes(errors=1, failed=1)
            assert "no agent command to record it from" in out
        assert "wire_replay: no agent command" in out
        assert list(pytester.path.rglob("PWNED")) == [] and list(tmp_path.rglob("PWNED")) == []
