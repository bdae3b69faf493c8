"""Bad input and misbehaving agents: one clear line and exit 2 for input errors, a report and
exit 1 for a divergence; never a traceback, never a hang (every run has a subprocess timeout)."""

from __future__ import annotations

import json
import os
import re

import duckdb
import pytest

from tests.harness.replay import SAMPLES, WIRE_REPLAY, assert_one_line_error, cli_json, run_cli
from wire_recorder.recorder.errors import UsageError
from wire_recorder.recorder.store import open_store
from wire_recorder.recorder.transcript import import_transcript
from wire_recorder.replay import replay_session

SAMPLE = SAMPLES / "approve_shell.jsonl"


@pytest.fixture
def sample_db(tmp_path):
    db = tmp_path / "one.db"
    import_transcript(str(SAMPLE), str(db))
    return db


def test_missing_file(tmp_path):
    assert_one_line_error(run_cli([tmp_path / "nope.db", "--", "true"]), 2, "no such file")


def test_a_directory(tmp_path):
    assert_one_line_error(run_cli([tmp_path, "--", "true"]), 2, "is a directory")


def test_corrupt_db(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(os.urandom(4096))
    assert_one_line_error(run_cli([bad, "--", "true"]), 2, "not a DuckDB file")


def test_truncated_db(tmp_path, sample_db):
    data = sample_db.read_bytes()
    cut = tmp_path / "cut.db"
    cut.write_bytes(data[: len(data) // 3])
    assert_one_line_error(run_cli([cut, "--", "true"]), 2, str(cut))


def test_a_duckdb_file_that_is_not_a_recording(tmp_path):
    db = tmp_path / "other.db"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t (x INT)")
    con.close()
    assert_one_line_error(run_cli([db, "--", "true"]), 2, "not a wire-recorder recording")


def test_db_with_no_sessions(tmp_path):
    db = tmp_path / "empty.db"
    open_store(str(db)).close()
    assert_one_line_error(run_cli([db, "--", "true"]), 2, "no sessions recorded")


def test_unknown_session_id(sample_db):
    assert_one_line_error(run_cli([sample_db, "--session", "zzz", "--", "true"]), 2,
                          "no session matching 'zzz'")
    assert_one_line_error(run_cli([SAMPLE, "--session", "zzz", "--", "true"]), 2,
                          "no session matching 'zzz'")
    # a session is picked by its name too (wire-proxy --name; the sample's is its scenario's):
    # the replay gets as far as the agent, which `true` is not
    p = run_cli([sample_db, "--session", "approve_shell", "--", "true"])
    assert b"exits before answering" in p.stderr or b"initialize" in p.stderr, p.stderr
    assert b"no session matching" not in p.stderr


def test_transcript_with_garbage_lines(tmp_path):
    lines = SAMPLE.read_text().splitlines()
    lines.insert(3, "this is not a frame {")
    bad = tmp_path / "garbage.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    assert_one_line_error(run_cli([bad, "--", "true"]), 2, "garbage.jsonl:4:", "not valid JSON")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert_one_line_error(run_cli([empty, "--", "true"]), 2, "is empty")


def test_a_session_without_frames(tmp_path):
    head = SAMPLE.read_text().splitlines()[0]
    only = tmp_path / "header.jsonl"
    only.write_text(head + "\n")
    assert_one_line_error(run_cli([only, "--", "true"]), 2, "no client or agent frames")


@pytest.mark.parametrize("args,needle", [
    (["--speed", "-1"], "--speed"),
    (["--on-unmatched", "maybe"], "'maybe' is not one of 'fail', 'reject', 'error'"),
    (["--match-on", "type,colour"], "unknown matcher colour"),
    (["--ignore", "ApprovalRequest:"], "is not a path"),
    (["--env", "NOVALUE"], "is not KEY=VALUE"),
    (["--frame-timeout", "0"], "timeouts must be positive"),
    (["--output", "x.jsonl"], "--output only goes with --update"),
])
def test_bad_options(args, needle):
    assert_one_line_error(run_cli([SAMPLE, *args, "--", "true"]), 2, needle)


def test_nothing_after_the_double_dash():
    assert_one_line_error(run_cli([SAMPLE, "--"]), 2, "nothing after --")


def test_agent_command_not_found_or_not_executable(tmp_path):
    # a set-up error (2): the replay never ran (wire-proxy says 127 for the same command)
    assert_one_line_error(run_cli([SAMPLE, "--", "no-such-agent-xyz", "--wire"]), 2,
                          "cannot start the agent: no-such-agent-xyz: command not found")
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n")
    assert_one_line_error(run_cli([SAMPLE, "--", script]), 2, "permission denied")
    assert_one_line_error(run_cli([SAMPLE, "--cwd", tmp_path / "gone", "--", "true"]), 2,
                          "the work dir", "does not exist")


def test_a_recorded_command_never_runs_unasked(tmp_path):
    # a shared recording whose stored command is hostile: without an agent command, replay and
    # --update refuse with the command as a hint, --serve runs nothing, nor does the library
    head, *rest = SAMPLE.read_text().splitlines()
    h = json.loads(head)
    h["session"].update(command=["sh", "-c", "touch PWNED"], cwd=str(tmp_path))
    evil = tmp_path / "evil.jsonl"
    evil.write_text("\n".join([json.dumps(h), *rest]) + "\n")
    for extra in ([], ["--update"]):
        assert_one_line_error(run_cli([evil, *extra]), 2, "no agent command",
                              "recorded: sh -c 'touch PWNED'", "--recorded-command")
    p = run_cli([evil, "--serve"])
    assert p.returncode == 1 and "Traceback" not in p.stderr.decode()
    with pytest.raises(UsageError, match="no agent command"):
        replay_session(str(evil))
    assert not (tmp_path / "PWNED").exists()
    # only an explicit opt-in runs it (in the recorded cwd): the check above could fail
    run_cli([evil, "--recorded-command", "-q", "--frame-timeout", "1"])
    assert (tmp_path / "PWNED").exists()
    # a recorded kimi command whose scratch config is gone: said before anything runs
    assert_one_line_error(run_cli([SAMPLE, "--recorded-command"]), 2, "does not exist",
                          "give the agent command after --")


def test_an_agent_that_exits_at_start_or_mid_replay():
    # before answering initialize: a set-up error, its stderr's last lines in the one line
    p = run_cli([SAMPLE, "--", "sh", "-c", "read line; echo 'config: no key' >&2; exit 3"],
                timeout=60)
    assert_one_line_error(p, 2, "the agent exited (code 3) before answering initialize",
                          "its stderr ends: config: no key")
    # after it: a divergence, with the stderr tail in the report
    init = '{"jsonrpc":"2.0","id":"init-1","result":{}}'
    p = run_cli([SAMPLE, "--", "sh", "-c", f"read l; echo '{init}'; read l; echo 'boom at "
                 f"\033[31mturn 1' >&2; exit 3"], timeout=60)
    out = p.stdout.decode()
    assert p.returncode == 1, out + p.stderr.decode()
    assert "the agent exited (code 3) before the client" in out
    assert "the agent's stderr (last 1 lines):\n  | boom at \\x1b[31mturn 1" in out, out
    assert "Traceback" not in out + p.stderr.decode()


def test_an_agent_that_never_answers():
    # silent from the start: given up after the start-up wait, not the frame timeout
    p = run_cli([SAMPLE, "--frame-timeout", "1", "--startup-timeout", "1", "--", "sleep", "60"],
                timeout=60)
    out = p.stdout.decode()
    assert p.returncode == 1, out + p.stderr.decode()
    # 1 s, or longer where the recording itself shows a longer silence (kimi's start-up)
    assert re.search(r"gave up at start-up: the agent did not answer its first request within "
                     r"[\d.]+s of starting \(expected response init-1 .*\); on a slow machine "
                     r"raise the wait with --startup-timeout S", out), out
    assert "stopped early: the agent did not start within" in out


def test_the_whole_run_timeout():
    p = run_cli([SAMPLE, "--timeout", "1", "--frame-timeout", "50", "--", "sleep", "60"],
                timeout=60)
    out = p.stdout.decode()
    assert p.returncode == 1, out + p.stderr.decode()
    assert "the whole replay took longer than 1s; agent killed" in out


def test_an_agent_that_keeps_its_output_open_after_the_session(tmp_path):
    # the stand-in agent plays the whole session, but a child keeps stdout open afterwards; the
    # frame timeout is long enough for a stand-in on a loaded runner to play its frames in time
    agent = ["sh", "-c", f'"{WIRE_REPLAY}" "{SAMPLE}" --serve; sleep 120']
    p = run_cli([SAMPLE, "--frame-timeout", "15", "--", *agent], timeout=120)
    out = p.stdout.decode()
    assert p.returncode == 1, out + p.stderr.decode()
    assert "the agent did not close its output within 15s after its input closed" in out


def test_an_agent_that_prints_garbage():
    p = run_cli([SAMPLE, "--frame-timeout", "1", "--", "sh", "-c",
                 "echo 'hello, I am not JSON'; cat >/dev/null"], timeout=60)
    out = p.stdout.decode()
    assert p.returncode == 1, out
    assert 'non-JSON frame "hello, I am not JSON"' in out


def test_a_divergence_on_a_background_task_suggests_the_recorded_speed(tmp_path):
    head = {"wire_transcript": 2, "session": {"name": "bg", "command": ["agent"],
                                              "protocol": "wire"}}
    init = {"jsonrpc": "2.0", "method": "initialize", "id": "init-1",
            "params": {"protocol_version": "1.10"}}
    done = {"jsonrpc": "2.0", "id": "init-1", "result": {"notice": "task bash-abcdef12 done"}}
    rec = tmp_path / "bg.jsonl"
    rec.write_text("\n".join(json.dumps(x) for x in (
        head, {"dir": "c2a", "frame": init}, {"dir": "a2c", "frame": done},
        {"dir": "proxy", "event": "client_eof", "data": {}})) + "\n")
    live = json.dumps(dict(done, result={"notice": "task bash-12345678 still running"}))
    agent = ["sh", "-c", f"read l; echo '{live}'; cat >/dev/null"]
    p = run_cli([rec, "--", *agent], timeout=60)
    out = p.stdout.decode()
    assert p.returncode == 1, out + p.stderr.decode()
    assert "hint: this may be timing: it involves a background task" in out, out
    assert "try --speed 1" in out
    p = run_cli([rec, "--speed", "1", "--", *agent], timeout=60)
    assert p.returncode == 1 and "hint: this may be timing" not in p.stdout.decode()


def test_a_client_that_closed_and_then_terminated_the_agent_replays_green(tmp_path):
    # an IDE closing the agent: EOF, then SIGTERM to an agent that had not exited yet
    head = {"wire_transcript": 2, "session": {"name": "term", "command": ["agent"],
                                              "protocol": "wire", "exit_code": 143,
                                              "exit_signal": "SIGTERM"}}
    init = {"jsonrpc": "2.0", "method": "initialize", "id": "init-1",
            "params": {"protocol_version": "1.10"}}
    resp = {"jsonrpc": "2.0", "id": "init-1", "result": {}}
    rec = tmp_path / "term.jsonl"
    lines = [head, {"dir": "c2a", "frame": init}, {"dir": "a2c", "frame": resp},
             {"dir": "proxy", "event": "client_eof", "data": {}},
             {"dir": "proxy", "event": "signal", "data": {"signal": "SIGTERM"}},
             {"dir": "proxy", "event": "exit", "data": {"signal": "SIGTERM"}}]
    rec.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    lingers = ["sh", "-c", f"read l; echo '{json.dumps(resp)}'; exec sleep 60"]
    code, report = cli_json([rec, "--frame-timeout", "20", "--", *lingers], timeout=60)
    assert code == 0 and report["ok"], report["divergences"]
    assert report["stats"]["signals_sent"] == 1 and report["agent_exit_code"] == -15
    # an agent that ends otherwise on the signal is compared with the recorded signal in mind
    code, report = cli_json([rec, "--", "sh", "-c", f"trap 'exit 3' TERM; read l; echo "
                             f"'{json.dumps(resp)}'; while :; do sleep 0.1; done"], timeout=60)
    assert code == 1 and report["divergences"][0]["message"] == \
        "the agent exited with code 3 after the replayed SIGTERM, recorded: ended by SIGTERM " \
        "(an exit 0 would match too)"
