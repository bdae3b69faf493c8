"""`wire-replay --fork-at REQUEST --answer CHANGE`: the recorded approve session forked at its
ApprovalRequest with the answer `reject`, run against the real kimi (model pinned), and stored
as a new session linked to its parent in the same .db."""

from __future__ import annotations

import shutil

import orjson
import pytest

from tests.harness.replay import SAMPLES, assert_one_line_error, run_cli
from wire_recorder.recorder.store import open_store
from wire_recorder.recorder.transcript import import_transcript


@pytest.fixture(scope="module")
def forked(kimi_exe, tmp_path_factory):
    root = tmp_path_factory.mktemp("fork")
    db = root / "approve.db"
    parent = import_transcript(str(SAMPLES / "approve_shell.jsonl"), str(db))
    home, work = root / "home", root / "work"
    home.mkdir()
    work.mkdir()
    p = run_cli([db, "--fork-at", "ApprovalRequest", "--answer", "reject", "--frame-timeout",
                 "60", "--cwd", work, "--", str(kimi_exe), "--wire"], timeout=600,
                env={"HOME": str(home)})
    with open_store(str(db), read_only=True) as store:
        sessions = {s["session_id"]: s for s in store.sessions()}
        frames = {sid: store.frames(sid) for sid in sessions}
    return p, parent, sessions, frames, db


def _frames(frames, direction):
    out = []
    for f in frames:
        if f.direction == direction:
            try:
                out.append(orjson.loads(bytes(f.raw)))
            except orjson.JSONDecodeError:
                pass
    return out


def test_the_branch_is_stored_beside_its_parent_and_linked_to_it(forked):
    p, parent, sessions, frames, db = forked
    out = p.stdout.decode()
    assert p.returncode == 0, (out, p.stderr.decode())
    assert set(sessions) == {parent, f"{parent}-fork-1"}
    branch = sessions[f"{parent}-fork-1"]
    tags = branch["tags"] if isinstance(branch["tags"], dict) else orjson.loads(branch["tags"])
    assert tags["fork_of"] == parent
    assert "ApprovalRequest" in tags["fork_at"] and "'approve' → 'reject'" in tags["fork_change"]
    assert branch["source"] == "wire-replay"
    assert f"branch stored as session {parent}-fork-1 in {db}" in out
    # the parent is untouched
    assert [m["result"]["response"] for m in _frames(frames[parent], "c2a")
            if "request_id" in (m.get("result") or {})] == ["approve"]


def test_the_branch_took_the_changed_answer_and_the_agent_acted_on_it(forked):
    _, parent, _, frames, _ = forked
    branch = frames[f"{parent}-fork-1"]
    answers = [m for m in _frames(branch, "c2a") if "result" in m and "request_id" in
               (m["result"] or {})]
    assert [a["result"]["response"] for a in answers] == ["reject"]
    events = [m["params"] for m in _frames(branch, "a2c") if m.get("method") == "event"]
    approval = [e["payload"] for e in events if e["type"] == "ApprovalResponse"]
    assert [a["response"] for a in approval] == ["reject"]
    # the rejected command never ran: no tool result says it printed hello
    results = [e["payload"]["return_value"] for e in events if e["type"] == "ToolResult"]
    assert results and all("hello" not in (r.get("output") or "") for r in results)
    # the parent's own run approved and ran it
    parent_events = [m["params"] for m in _frames(frames[parent], "a2c")
                     if m.get("method") == "event"]
    assert any(e["type"] == "ToolResult" and "hello" in e["payload"]["return_value"]["output"]
               for e in parent_events)


def test_a_fork_point_that_names_no_request_is_a_usage_error(tmp_path):
    db = tmp_path / "approve.db"
    import_transcript(str(SAMPLES / "approve_shell.jsonl"), str(db))
    p = run_cli([db, "--fork-at", "QuestionRequest", "--answer", "reject", "--", "kimi"])
    assert_one_line_error(p, 2, "--fork-at", "names no agent request")
    p = run_cli([db, "--fork-at", "1", "--answer", "{not json", "--", "kimi"])
    assert_one_line_error(p, 2, "--answer is not valid JSON")
    jsonl = tmp_path / "a.jsonl"
    shutil.copy(SAMPLES / "approve_shell.jsonl", jsonl)
    p = run_cli([jsonl, "--fork-at", "1", "--answer", "reject", "--", "kimi"])
    assert_one_line_error(p, 2, "is not one", "-o BRANCHES.db")


def test_a_fork_with_live_llm_goes_on_with_the_agents_own_model(kimi_exe, tmp_path):
    """--live-llm: kimi asks its own model (a streaming OpenAI-compatible server, as a real
    provider streams) from the start; the fork applies where that model's tool call brings the
    same ApprovalRequest, and the branch is what the live model and the changed answer made."""
    from tests.harness.model_server import StreamingModel, answer, call
    from tests.harness.replay import Agent

    db = tmp_path / "approve.db"
    parent = import_transcript(str(SAMPLES / "approve_shell.jsonl"), str(db))
    model = StreamingModel([
        answer(text=["I'll ", "run it."], calls=[call("call-1", "Shell",
                                                     ['{"command": ', '"echo hello"}'])]),
        answer(text=["Not run, ", "as you asked."])] + [answer(text=["done"])] * 4)
    with model, Agent("approve_shell", tmp_root=tmp_path) as agent:
        agent.run.config_path.write_text(model.config_toml())
        p = run_cli([db, "--fork-at", "ApprovalRequest", "--answer", "reject", "--live-llm",
                     "--frame-timeout", "120", *agent.cli_args()], timeout=600)
        asked = len(model.requests)
    out = p.stdout.decode()
    assert p.returncode == 0, out + p.stderr.decode()
    assert asked >= 1 and f"branch stored as session {parent}-fork-1" in out
    with open_store(str(db), read_only=True) as store:
        branch = store.frames(f"{parent}-fork-1")
    events = [m["params"] for m in _frames(branch, "a2c") if m.get("method") == "event"]
    assert [e["payload"]["response"] for e in events if e["type"] == "ApprovalResponse"] == \
        ["reject"]
    assert any(e["type"] == "ToolResult" and e["payload"]["return_value"]["is_error"]
               for e in events)


FORKS = {  # sample: (fork point, change, what the branch's tool result then says)
    "question": ("QuestionRequest",
                 '{"answers": {"Which database should I use?": "DuckDB (Recommended)"}}',
                 "DuckDB"),
    "external_tool": ("ToolCallRequest",
                      '{"return_value": {"is_error": true, "output": "", '
                      '"message": "no network", "display": []}}',
                      "no network"),
}


def test_a_fork_at_a_question_answer_and_at_an_external_tool_result(kimi_exe, tmp_path):
    from tests.harness.replay import parallel

    def fork(name):
        root = tmp_path / name
        (root / "home").mkdir(parents=True)
        (root / "work").mkdir()
        db = root / f"{name}.db"
        parent = import_transcript(str(SAMPLES / f"{name}.jsonl"), str(db))
        at, change, _ = FORKS[name]
        p = run_cli([db, "--fork-at", at, "--answer", change, "--frame-timeout", "60", "--cwd",
                     root / "work", "--", str(kimi_exe), "--wire"], timeout=600,
                    env={"HOME": str(root / "home")})
        with open_store(str(db), read_only=True) as store:
            frames = store.frames(f"{parent}-fork-1") if p.returncode == 0 else []
        return name, (p, frames)

    for name, (p, frames) in parallel(fork, list(FORKS)):
        assert p.returncode == 0, (name, p.stdout.decode()[-3000:], p.stderr.decode())
        events = [m["params"] for m in _frames(frames, "a2c") if m.get("method") == "event"]
        results = [orjson.dumps(e["payload"]).decode() for e in events
                   if e["type"] == "ToolResult"]
        assert any(FORKS[name][2] in r for r in results), (name, results)
