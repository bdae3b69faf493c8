"""`wire-replay SESSION --serve`: the recorded kimi stands in for the agent, and a real client
(the project's scripted client, driven over pipes) is checked against the recorded client."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest

from sample_sessions.scenarios import SCENARIOS
from tests.harness.replay import SAMPLES, WIRE_REPLAY, sample_names
from tests.harness.scripted_client import Approval, HookAnswer, Prompt, run_client
from tests.harness.wire import check_scenario

NAMES = sample_names()


def serve(name: str, *extra: str) -> list[str]:
    return [WIRE_REPLAY, str(SAMPLES / f"{name}.jsonl"), "--serve", *extra]


def client(name: str, plan=None, *extra: str, timeout: float = 60):
    sc = SCENARIOS[name]
    return run_client(serve(name, *extra), plan or sc.plan, timeout=timeout)


@pytest.mark.parametrize("name", NAMES)
def test_the_recorded_client_behaviour_passes(name):
    r = client(name, None, "--frame-timeout", "10")
    assert r.exit_code == 0, r.stderr.decode()
    assert r.stderr == b""
    # the client saw a faithful agent: the scenario's own checks hold against the stand-in
    assert check_scenario(SCENARIOS[name], r) == []


def _plan(name, **changes):
    return dataclasses.replace(SCENARIOS[name].plan, **changes)


@pytest.mark.parametrize("name,plan,needle", [
    ("approve_shell", dict(approvals=[Approval.reject()]),
     "answered ApprovalRequest Shell: Run command `echo hello` with 'reject', recorded 'approve'"),
    ("approve_for_session", dict(approvals=[Approval.approve()]),
     "with 'approve', recorded 'approve_for_session'"),
    ("reject_shell", dict(approvals=[Approval.reject(), Approval.reject("something else")]),
     "result.feedback: Please list the files with ls instead. → something else"),
    ("hook", dict(hook_answers={"PreToolUse": HookAnswer("allow")}),
     "answered HookRequest PreToolUse Shell with 'allow', recorded 'block'"),
    ("question", dict(question_answers=[{"Which database should I use?": "DuckDB (Recommended)"}]),
     "the client answered QuestionRequest"),
    ("external_tool", dict(tool_results={"lookup_weather": {"is_error": True, "output": "",
                                                            "message": "offline", "display": []}}),
     "result.return_value.is_error: false → true"),
    ("approve_shell", dict(prompts=[Prompt("Run echo hi")]),
     'expected the client to send request prompt#p-1 {"user_input":"Run echo hello"}'),
])
def test_a_client_that_answers_differently_is_caught(name, plan, needle):
    r = client(name, _plan(name, **plan), "--frame-timeout", "3")
    err = r.stderr.decode()
    assert r.exit_code == 1, err
    assert needle in err, err
    assert "DIVERGED" in err and "Traceback" not in err


def test_a_client_that_never_answers_is_caught_without_hanging():
    r = client("approve_shell", _plan("approve_shell", approvals=[Approval.pending()],
                                      prompt_timeout=8), "--frame-timeout", "1")
    err = r.stderr.decode()
    assert r.exit_code == 1, err
    assert "waited 1s for the client to answer ApprovalRequest Shell: Run command `echo hello`" in err


def test_answering_a_request_the_recorded_client_left_pending_is_caught():
    # cancel_turn: the recorded client never answered the approval, it cancelled the turn
    r = client("cancel_turn", _plan("cancel_turn", approvals=[Approval.approve()]),
               "--frame-timeout", "3")
    err = r.stderr.decode()
    assert r.exit_code == 1, err
    assert "which the recorded client left unanswered" in err


def test_an_extra_prompt_gets_an_error_and_is_reported():
    plan = _plan("approve_shell", prompts=[Prompt("Run echo hello"), Prompt("And again")])
    r = client("approve_shell", plan, "--frame-timeout", "3")
    err = r.stderr.decode()
    assert r.exit_code == 1, err
    assert 'the client sent request prompt#p-2 {"user_input":"And again"}, which the recorded ' \
           'client did not send' in err
    p2 = r.response("p-2")
    assert p2 is not None and p2["error"]["code"] == -32000  # refused, the client did not hang


def test_serve_writes_a_junit_report(tmp_path):
    report = tmp_path / "serve.xml"
    r = client("approve_shell", _plan("approve_shell", approvals=[Approval.reject()]),
               "--frame-timeout", "3", "--report", str(report))
    assert r.exit_code == 1
    xml = report.read_text()
    assert "<failure" in xml
    assert "recorded 'approve'" in xml or "recorded &apos;approve&apos;" in xml


def test_a_stray_client_response_serves_green(tmp_path):
    """A recorded client that sent a response to an id the agent never used: a client doing the
    same is green under --serve (was: a 30 s wait for a request, then exit 1). The client here is
    the recorded client itself, played byte for byte by wire-replay against the stand-in."""
    lines = (SAMPLES / "approve_shell.jsonl").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if '"response":"approve"' in ln and '"c2a"' in ln)
    stray = '{"dir":"c2a","frame":{"jsonrpc":"2.0","id":"stray-1","result":{"response":"approve"}}}'
    lines.insert(at + 1, stray)
    rec = tmp_path / "stray.jsonl"
    rec.write_text("\n".join(lines) + "\n")
    report = tmp_path / "serve.json"
    p = subprocess.run([WIRE_REPLAY, str(rec), "--json", "--frame-timeout", "10", "--",
                        WIRE_REPLAY, str(rec), "--serve", "--frame-timeout", "10",
                        "--report", str(report)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    served = json.loads(report.read_text())
    assert served["ok"], served
    assert served["stats"]["answers_checked"] == 2  # the approval and the stray response
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-2000:])


def test_an_unexpected_cancel_mid_turn_gets_an_error_and_is_named():
    """The client cancels at the ApprovalRequest where the recorded client (the real kimi's
    approve_shell session) approved: the cancel is refused with -32000 at once (was: no reply, a
    client waiting on it) and the report names it, not only the approval it never got."""
    sc = SCENARIOS["approve_shell"]
    prompt = dataclasses.replace(sc.plan.prompts[0], cancel_after=0.0, cancel_on="ApprovalRequest")
    r = client("approve_shell", _plan("approve_shell", prompts=[prompt],
                                      approvals=[Approval.pending()]), "--frame-timeout", "3")
    err = r.stderr.decode()
    assert r.exit_code == 1, err
    c1 = r.response("c-1")
    assert c1 is not None and c1["error"]["code"] == -32000, (c1, r.summary())
    assert "the client sent request cancel#c-1 {}" in err and "the recording has none here" in err
    # the cancel is the first divergence named, before the approval the client never answered
    assert err.index("request cancel#c-1") < err.index("to answer ApprovalRequest"), err
