"""wire-diff over real recordings: kimi --wire sessions of one scenario recorded twice compare
the same (exit 0), the scenario with a changed tool result, approval answer and model text
names each difference (exit 1); an ACP pair (kimi acp, a file the client serves changed) and an
MCP pair (mcp-server-time twice; against mcp-server-git). Few agent runs: each recording is
made once per module and read by every test."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from sample_sessions.acp_scenarios import ACP_SCENARIOS
from sample_sessions.mcp_scenarios import MCP_SCENARIOS
from tests.harness.acp import run_acp_scenario
from tests.harness.analysis import BIN, run_cli
from tests.harness.kimi_peer import msg_id, script, shell, text, usage
from tests.harness.mcp import run_mcp_scenario
from tests.harness.proxy import WIRE_PROXY
from tests.harness.recording import proxy_prefix
from tests.harness.scripted_client import Approval, ClientPlan, Prompt
from tests.harness.wire import Scenario, run_scenario
from wire_recorder.analysis.diff import diff
from wire_recorder.analysis.diff_compare import Tolerance


def wire_scenario(first_text: str, second_answer: str) -> Scenario:
    """Turn 1: a Shell call printing $WR_DIFF_VALUE (approved), then text; turn 2: a Shell call
    answered with `second_answer` (a reject ends the turn without another model call)."""
    return Scenario(
        name="diff", description="wire-diff's scenario", session_id="wr-diff",
        scripts=[
            script(msg_id("msg-1"), usage(120, 15, 30), text(first_text),
                   shell("call-1", "echo $WR_DIFF_VALUE")),
            script(msg_id("msg-2"), usage(160, 6, 150), text("The command printed it.")),
            script(msg_id("msg-3"), usage(200, 8), shell("call-2", "echo two")),
            script(msg_id("msg-4"), usage(240, 5), text("Done.")),
        ],
        plan=ClientPlan(prompts=[Prompt("Print the value"), Prompt("Print two")],
                        approvals=[Approval.approve(), Approval(second_answer)],
                        exit_timeout=300.0),  # (a loaded machine: kimi's exit can take a while)
        timeout=900.0)


@pytest.fixture(scope="module")
def wire_runs(kimi_exe, tmp_path_factory):
    """base-1 and base-2 (the same scenario) in runs.db; the changed one in changed.db."""
    tmp = tmp_path_factory.mktemp("diff")
    runs, changed = str(tmp / "runs.db"), str(tmp / "changed.db")
    base = wire_scenario("I'll print it.", "approve")
    jobs = [
        (base, [WIRE_PROXY, "-q", "--db", runs, "--name", "base-1", "--"], "one"),
        (base, [WIRE_PROXY, "-q", "--db", runs, "--name", "base-2", "--"], "one"),
        (wire_scenario("I will print it now.", "reject"),
         [WIRE_PROXY, "-q", "--db", changed, "--name", "changed", "--"], "two"),
    ]
    with ThreadPoolExecutor(3) as ex:
        results = list(ex.map(lambda j: run_scenario(j[0], j[1], kimi=kimi_exe,
                                                     env={"WR_DIFF_VALUE": j[2]}), jobs))
    for r in results:
        assert r.exit_code == 0 and not r.timed_out, r.stderr[-2000:]
    return runs, changed


def test_two_recordings_of_one_scenario_are_the_same(wire_runs):
    runs, _ = wire_runs
    r = diff(f"{runs}#base-1", f"{runs}#base-2")
    assert [c.to_dict() for c in r.changes] == []
    assert r.same and r.exit_code == 0
    # the sides really are two sessions, with different ids, paths and times masked
    assert r.a["session_id"] != r.b["session_id"]
    # by name in --db files, too
    assert diff("base-1", "base-2", [runs]).same


def test_a_changed_tool_result_answer_and_model_text_are_each_named(wire_runs):
    runs, changed = wire_runs
    r = diff(f"{runs}#base-1", changed)
    assert r.exit_code == 1
    found = {(c.where, c.what, c.field): (c.a, c.b) for c in r.changes}
    assert found[("turn 1 step 1", "model text", "text")] == ("I'll print it.",
                                                               "I will print it now.")
    assert found[("turn 1 step 1 tool call 1 (Shell)", "tool result", "output")] == \
        ("one\n", "two\n")
    answers = {k: v for k, v in found.items()
               if k[0].startswith("turn 2 step 1 request 1") and k[1] == "answer"}
    assert answers[("turn 2 step 1 request 1 (ApprovalRequest)", "answer", "outcome")] == \
        ("approve", "reject")
    # the rejected call fails and the turn ends: its second step is only in A
    assert ("turn 2 step 2", "step", "step") in found
    # nothing else: the tool arguments, the first turn's answer, the prompts are unchanged
    wheres = {c.where for c in r.changes}
    assert not any(w.startswith("turn 1 step 1 request") for w in wheres)
    assert not any(c.what in ("tool arguments", "prompt") for c in r.changes)


def test_timings_count_only_beyond_the_tolerance(wire_runs):
    runs, _ = wire_runs
    assert diff(f"{runs}#base-1", f"{runs}#base-2", tolerance=Tolerance(time_ms=10_000.0)).same
    strict = diff(f"{runs}#base-1", f"{runs}#base-2", tolerance=Tolerance(time_ms=0.0))
    assert strict.changes and {c.what for c in strict.changes} == {"timing"}


def test_cli_text_json_and_exit_codes(wire_runs, tmp_path):
    runs, changed = wire_runs
    same = run_cli("wire-diff", f"{runs}#base-1", f"{runs}#base-2")
    assert same.returncode == 0, same.stderr
    assert "same: no differences" in same.stdout
    out = run_cli("wire-diff", f"{runs}#base-1", changed)
    assert out.returncode == 1, out.stderr
    assert 'model text: "I\'ll print it." → "I will print it now."' in out.stdout
    assert 'tool result: "one\\n" → "two\\n"' in out.stdout
    js = run_cli("wire-diff", "--db", runs, "--db", changed, "base-1", "changed", "--json")
    assert js.returncode == 1, js.stderr
    data = json.loads(js.stdout)
    assert data["same"] is False and data["count"] == len(data["differences"])
    assert {"model text", "tool result", "answer"} <= {d["what"] for d in data["differences"]}
    # bad input: one line, exit 2, no traceback
    for args in ([str(tmp_path / "nope.db"), changed], [runs, changed],
                 [f"{runs}#base-1", changed, "--time-tolerance", "soon"]):
        bad = run_cli("wire-diff", *args)
        assert bad.returncode == 2, (args, bad.stdout, bad.stderr)
        assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr, bad.stderr
    assert "holds 2 sessions" in run_cli("wire-diff", runs, changed).stderr


def test_a_recording_against_its_replay_report(wire_runs, kimi_exe, tmp_path):
    """The replay of base-1 with another value in the agent's environment: its report's
    divergences (read as data) are the differences, and the verdict is the exit code."""
    runs, changed = wire_runs
    report = str(tmp_path / "replay.json")
    p = subprocess.run([str(BIN / "wire-replay"), runs, "--session", "base-1", "-q",
                        "--env", "WR_DIFF_VALUE=two", "--report", report,
                        "--", str(kimi_exe), "--wire"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    r = diff(f"{runs}#base-1", report)
    assert r.source == "replay-report" and r.exit_code == 1
    assert "two" in json.dumps([c.to_dict() for c in r.changes])
    out = run_cli("wire-diff", f"{runs}#base-1", report)
    assert out.returncode == 1 and "replay of" in out.stdout, out.stdout + out.stderr
    # a report is about one session: another is bad input
    bad = run_cli("wire-diff", changed, report)
    assert bad.returncode == 2 and "reports on session" in bad.stderr, bad.stderr


@pytest.fixture(scope="module")
def acp_runs(kimi_exe, acp_python, acp_recordings, tmp_path_factory):
    """acp_tools as recorded (once per test run: tests/harness/acp_recordings.py), and again
    with notes.txt (which the client serves) changed."""
    tmp = tmp_path_factory.mktemp("diff-acp")
    sc = ACP_SCENARIOS["acp_tools"]
    changed = dataclasses.replace(sc, files={"notes.txt": "Notes: delta.\n"})
    dbs = [acp_recordings.get("acp_tools").copy_to(tmp, "base"), str(tmp / "changed.db")]
    run_acp_scenario(changed, [WIRE_PROXY, "-q", "--db", dbs[1], "--"], kimi=kimi_exe,
                     acp_python=acp_python, tmp_root=tmp)
    return dbs


def test_acp_pair(acp_runs):
    base, changed = acp_runs
    r = diff(base, changed)
    assert r.exit_code == 1
    whats = {(c.what, c.field) for c in r.changes}
    # the client answered fs/read_text_file with other content: the read's result and the
    # request's answer differ; the model (pinned scripts) said the same
    assert ("tool result", "output") in whats, r.changes
    assert ("answer", "answer") in whats, r.changes
    # and nothing else: the work dirs, session ids and times of the two runs differ, masked
    assert whats <= {("tool result", "output"), ("answer", "answer")}, r.changes
    assert diff(base, base).same


@pytest.fixture(scope="module")
def mcp_runs(mcp_peers, tmp_path_factory):
    db = str(tmp_path_factory.mktemp("diff-mcp") / "mcp.db")
    for name, sc in (("time-1", "mcp_time"), ("time-2", "mcp_time"), ("git", "mcp_git")):
        run_mcp_scenario(MCP_SCENARIOS[sc], proxy_prefix(name, db))
    return db


def test_mcp_pair(mcp_runs):
    db = mcp_runs
    assert [c.to_dict() for c in diff(f"{db}#time-1", f"{db}#time-2").changes] == []
    r = diff(f"{db}#time-1", f"{db}#git")
    assert r.exit_code == 1
    tools = [(c.a, c.b) for c in r.changes if c.what == "tool"]
    assert ("convert_time", "git_status") in tools
