"""Every sample scenario, driven directly against the real kimi (no proxy).

The scenarios run once per test session, two at a time (the machine has 2 cores; kimi start-up
dominates, ~2-3 s a run), in a module fixture; each test then checks one result.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sample_sessions.scenarios import SCENARIOS
from tests.harness.kimi_peer import KimiRun, clean_env
from tests.harness.peers import PeerMissing, find_kimi
from tests.harness.scripted_client import ClientPlan, Prompt, run_client
from tests.harness.wire import check_scenario, run_scenario

# scenario -> (agent request types in order, client answers in order, prompt statuses)
EXPECTED = {
    "approve_shell": (["ApprovalRequest"], ["approve"], ["finished"]),
    "reject_shell": (["ApprovalRequest", "ApprovalRequest"], ["reject", "reject"], ["finished", "finished"]),
    "approve_for_session": (["ApprovalRequest"], ["approve_for_session"], ["finished"]),
    "external_tool": (["ToolCallRequest"], ["tool_result"], ["finished"]),
    "cancel_turn": (["ApprovalRequest"], [], ["cancelled"]),
    "multi_step": (["ApprovalRequest", "ApprovalRequest"], ["approve", "approve"], ["finished"]),
    "question": (["QuestionRequest"], ["answers"], ["finished"]),
    "hook": (["HookRequest", "ApprovalRequest", "HookRequest"], ["allow", "approve", "block"], ["finished"]),
    "steer": (["ApprovalRequest"], ["approve"], ["finished"]),
}
WORKERS = 2


@pytest.fixture(scope="module")
def direct_results(kimi_exe):
    def one(name):
        return name, run_scenario(SCENARIOS[name], kimi=kimi_exe, timeout=90)

    with ThreadPoolExecutor(WORKERS) as pool:
        return dict(pool.map(one, SCENARIOS))


def _answer_word(frame) -> str:
    res = frame.msg.get("result") or {}
    for key in ("response", "action"):
        if key in res:
            return res[key]
    if "return_value" in res:
        return "tool_result"
    if "answers" in res:
        return "answers"
    return "?"


def test_every_scenario_has_expectations():
    assert set(EXPECTED) == set(SCENARIOS)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_direct(name, direct_results):
    sc, r = SCENARIOS[name], direct_results[name]
    problems = check_scenario(sc, r)
    assert problems == [], f"{name}: {problems}\n{r.summary()}\nstderr: {r.stderr!r}"
    want_requests, want_answers, want_statuses = EXPECTED[name]
    assert [f.type for f in r.requests()] == want_requests
    assert [_answer_word(f) for f in r.answers()] == want_answers
    statuses = [r.result_of(f"p-{i}")["status"] for i in range(1, len(sc.plan.prompts) + 1)]
    assert statuses == want_statuses
    # client ids are deterministic strings
    ids = [f.id for f in r.sent() if f.method]
    assert ids[0] == "init-1" and all(isinstance(i, str) for i in ids)
    assert sc.session_id is not None  # every named scenario pins kimi's session id
    assert b"To resume this session: kimi -r " + sc.session_id.encode() in r.stderr


# -- the harness itself (no kimi needed) ---------------------------------------------------------


def test_client_hard_timeout_never_hangs():
    t = time.monotonic()
    r = run_client([sys.executable, "-c", "import time; time.sleep(60)"], ClientPlan(prompts=[Prompt("x")]), timeout=2)
    assert time.monotonic() - t < 10
    assert r.timed_out and r.exit_code is not None
    assert [f.id for f in r.sent()] == ["init-1"]


def test_client_reads_huge_lines_and_non_json():
    fake = (
        "import sys\n"
        "sys.stdin.readline()\n"
        "sys.stdout.write('not json\\n' + '{\"jsonrpc\":\"2.0\",\"id\":\"init-1\",\"result\":{\"x\":\"' + 'a'*3000000 + '\"}}\\n')\n"
        "sys.stdout.flush()\n"
        "sys.stdin.read()\n"
    )
    r = run_client([sys.executable, "-c", fake], ClientPlan(), timeout=20)
    assert not r.timed_out and r.exit_code == 0
    assert [f.raw for f in r.invalid()] == [b"not json"]
    assert len(r.result_of("init-1")["x"]) == 3000000


def test_find_kimi_reports_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("WIRE_KIMI", str(tmp_path / "nope"))
    with pytest.raises(PeerMissing) as ei:
        find_kimi()
    assert "WIRE_KIMI" in ei.value.one_line() and "setup-peers" in ei.value.one_line()


def test_kimi_run_env_and_argv(tmp_path, monkeypatch):
    monkeypatch.setenv("KIMI_SCRIPTED_ECHO_TRACE", "1")
    monkeypatch.setenv("KIMI_MODEL_MAX_CONTEXT_SIZE", "5")
    with KimiRun.create(["text: hi"], session_id="sid-1", kimi="/x/kimi", tmp_root=tmp_path) as run:
        env = run.env()
        assert "KIMI_SCRIPTED_ECHO_TRACE" not in env and "KIMI_MODEL_MAX_CONTEXT_SIZE" not in env
        assert env["HOME"] == str(run.home) and env["KIMI_SCRIPTED_ECHO_SCRIPTS"] == str(run.scripts_path)
        assert run.argv() == ["/x/kimi", "--config-file", str(run.config_path), "--wire", "-w", str(run.workdir), "-S", "sid-1"]
        assert 'type = "_scripted_echo"' in run.config_path.read_text()
    assert not run.root.exists()
    assert "PATH" in clean_env()
