"""wire-replay against the real `kimi --wire` (scripted echo LLM), through the command line:
record then replay, a changed agent caught with the first divergence named, --update, and
agents that exit or hang."""

from __future__ import annotations

import json
import shutil

import pytest

from sample_sessions.scenarios import SCENARIOS
from tests.harness.kimi_peer import msg_id, script, text, tool_call, usage
from tests.harness.replay import (
    SAMPLES,
    Agent,
    assert_one_line_error,
    cli_json,
    parallel,
    run_cli,
    sample_names,
    scripts_with,
)
from wire_recorder.recorder.transcript import import_transcript

NAMES = sample_names()


# the samples are all replayed in test_replay_samples.py; these are recorded afresh here:
# approve / reject (with and without feedback) / approve_for_session, an external tool, a cancel
FRESH = ["approve_shell", "reject_shell", "approve_for_session", "external_tool", "cancel_turn"]


@pytest.fixture(scope="module")
def recorded(kimi_recordings, tmp_path_factory):
    """Scenarios recorded through wire-proxy (once per test run, shared with other modules:
    tests/harness/kimi_recordings.py), a copy of each here as NAME.db."""
    d = tmp_path_factory.mktemp("recorded")
    recs = kimi_recordings.get(FRESH)
    problems = {n: r.problems for n, r in recs.items() if r.problems}
    assert not problems, problems
    for rec in recs.values():
        rec.copy_to(d)
    return d


def test_record_then_replay(recorded, kimi_exe, tmp_path):
    """Fresh recordings replay green with only `wire-replay DB -- kimi --wire`: an empty HOME, no
    scripts, no config (the model pinned to the recording), in an empty work dir."""
    def replay(name):
        home, work = tmp_path / name / "home", tmp_path / name / "work"
        home.mkdir(parents=True)
        work.mkdir()
        p = run_cli([recorded / f"{name}.db", "--json", "--frame-timeout", "60", "--cwd", work,
                     "--", str(kimi_exe), "--wire"], env={"HOME": str(home)})
        return name, (p.returncode, json.loads(p.stdout or b"{}"), home)

    results = dict(parallel(replay, FRESH))
    for name, (code, report, home) in results.items():
        assert code == 0 and report["ok"], (name, report.get("divergences"))
        assert report["stats"]["live_agent_frames"] == report["stats"]["recorded_agent_frames"]
        assert list(home.iterdir()) == []  # kimi's files went to the replay's scratch HOME
    # every recorded request was asked again and answered as recorded
    matched = {n: r["stats"].get("requests_matched", 0) for n, (_, r, _) in results.items()}
    assert matched == {"approve_shell": 1, "reject_shell": 2, "approve_for_session": 1,
                       "external_tool": 1, "cancel_turn": 1}


def first(report) -> str:
    d = report["first_divergence"]
    return f"{d['where']}: {d['message']}"


def test_a_different_tool_argument_is_the_first_divergence(tmp_path):
    with Agent("approve_shell", scripts_with("approve_shell", "echo hello", "echo bye"),
               tmp_root=tmp_path) as agent:
        code, report = cli_json([SAMPLES / "approve_shell.jsonl", "--frame-timeout", "30",
                                 "--live-llm", *agent.cli_args()])
    assert code == 1 and not report["ok"]
    assert first(report) == ('turn 1, step 1: expected ToolCall Shell{"command": "echo hello"}, '
                             'got ToolCall Shell{"command": "echo bye"}')
    unmatched = [d for d in report["divergences"] if d["kind"] == "unmatched_request"]
    assert unmatched and "ApprovalRequest Shell: Run command `echo bye`" in unmatched[0]["message"]
    near = unmatched[0]["details"][1]
    assert "Run command `echo hello`" in near and "differs in approval" in near
    assert report["stopped"]


def test_an_extra_step_is_reported(tmp_path):
    sc = SCENARIOS["multi_step"]
    extra = script(msg_id("msg-x"), usage(50, 5), text("Let me look around first."),
                   tool_call("call-x", "Glob", {"pattern": "*.md"}))
    with Agent("multi_step", [sc.scripts[0], extra, *sc.scripts[1:]], tmp_root=tmp_path) as agent:
        code, report = cli_json([SAMPLES / "multi_step.jsonl", "--frame-timeout", "30",
                                 "--live-llm", *agent.cli_args()])
    assert code == 1
    assert first(report) == ('turn 1, step 2: got ContentPart text "Let me look around first.", '
                             'which was never recorded')
    extra_frames = [d["message"] for d in report["unrecorded_frames"]]
    assert any('ToolCall Glob{"pattern": "*.md"}' in m for m in extra_frames)


def test_a_different_text_in_a_later_turn_is_reported_with_a_diff(tmp_path):
    with Agent("reject_shell", scripts_with("reject_shell", "I will use ls next time",
                                            "I will use find anyway"), tmp_root=tmp_path) as agent:
        p = run_cli([SAMPLES / "reject_shell.jsonl", "--report", tmp_path / "junit.xml",
                     "--live-llm", *agent.cli_args()])
    out = p.stdout.decode()
    assert p.returncode == 1, out + p.stderr.decode()
    assert ('first divergence: turn 2, step 2: expected ContentPart text "Understood, I will use '
            'ls next time.", got ContentPart text "Understood, I will use find anyway."') in out
    assert "params.payload.text: Understood, I will use ls next time. → Understood, I will use " \
           "find anyway." in out
    xml = (tmp_path / "junit.xml").read_text()
    assert 'failures="1"' in xml and "turn 2, step 2" in xml


def test_on_unmatched_reject_answers_and_goes_on(tmp_path):
    with Agent("approve_shell", scripts_with("approve_shell", "echo hello", "echo bye"),
               tmp_root=tmp_path) as agent:
        code, report = cli_json([SAMPLES / "approve_shell.jsonl", "--on-unmatched", "reject",
                                 "--live-llm", *agent.cli_args()])
    assert code == 1 and not report["stopped"]
    kinds = [d["kind"] for d in report["divergences"]]
    assert "unmatched_request" in kinds and "unused_request" in kinds
    assert "answered with a rejection" in \
        next(d["message"] for d in report["divergences"] if d["kind"] == "unmatched_request")
    assert report["unused_requests"][0]["message"] == (
        "recorded ApprovalRequest Shell: Run command `echo hello` was never asked by the agent")
    # the agent went on to the end of the turn with the rejection
    assert any("got ApprovalResponse reject" in d["message"] for d in report["divergences"])
    assert report["agent_exit_code"] == 0


def test_update_rerecords_and_the_new_recording_replays(tmp_path):
    path = tmp_path / "approve_shell.jsonl"
    shutil.copy(SAMPLES / "approve_shell.jsonl", path)
    changed = scripts_with("approve_shell", "The command printed hello.", "It printed hello.")
    with Agent("approve_shell", changed, tmp_root=tmp_path) as agent:
        p = run_cli([path, "--update", "--live-llm", *agent.cli_args()])
    summary = p.stdout.decode()
    assert p.returncode == 0, summary + p.stderr.decode()
    assert summary.startswith(f"updated {path} [approve_shell]")
    assert 'expected ContentPart text "The command printed hello.", got ContentPart text ' \
           '"It printed hello."' in summary
    new = path.read_text()
    assert '"text":"It printed hello."' in new and "The command printed hello." not in new

    def again(scripts):
        with Agent("approve_shell", scripts, tmp_root=tmp_path) as agent:
            return run_cli([path, "-q", "--live-llm", *agent.cli_args()])

    # the new recording against the changed agent and against the unchanged one, side by side
    same, unchanged = parallel(again, [changed, None])
    assert same.returncode == 0, same.stdout.decode()
    assert unchanged.returncode == 1 and "DIVERGED" in unchanged.stdout.decode()


def test_session_option_picks_one_session_of_several(tmp_path):
    db = tmp_path / "two.db"
    import_transcript(str(SAMPLES / "approve_shell.jsonl"), str(db))
    import_transcript(str(SAMPLES / "question.jsonl"), str(db))
    with Agent("question", tmp_root=tmp_path) as agent:
        p = run_cli([db, *agent.cli_args()])
        assert_one_line_error(p, 2, "holds 2 sessions", "--session")
        from wire_recorder.recorder.store import open_store

        with open_store(str(db), read_only=True) as s:
            sid = [x["session_id"] for x in s.sessions() if x["name"] == "question"][0]
        p = run_cli([db, "--session", sid[:16], "-q", *agent.cli_args()])
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    assert "[question]: the agent MATCHES the recording" in p.stdout.decode()


def test_a_real_agent_that_exits_at_start(tmp_path):
    with Agent("approve_shell", tmp_root=tmp_path) as agent:
        argv = agent.argv
        i = argv.index("--config-file")
        argv[i + 1] = str(tmp_path / "no-such-config.toml")
        p = run_cli([SAMPLES / "approve_shell.jsonl", "--live-llm", "--cwd", agent.cwd, "--",
                     *argv])
    # it never answered initialize: a set-up error, with what kimi said on stderr
    line = assert_one_line_error(p, 2, "the agent exited (code ", "before answering initialize",
                                 "its stderr ends: ")
    assert "does not exist" in line and "│" not in line, line


def test_another_kimi_session_id_and_work_dir_still_replay_green(tmp_path):
    # the hook's input_data carries kimi's session id and work dir; both differ here
    with Agent("hook", tmp_root=tmp_path) as agent:
        argv = agent.argv
        argv[argv.index("-S") + 1] = "another-session-id"
        p = run_cli([SAMPLES / "hook.jsonl", "-q", "--cwd", agent.cwd,
                     *[f"--env={k}={v}" for k, v in agent.env.items() if k in ("HOME", "KIMI_SCRIPTED_ECHO_SCRIPTS")],
                     "--", *argv])
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
