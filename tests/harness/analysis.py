"""Helpers for the analysis tests: record real kimi sessions through wire-proxy (keeping kimi's own
wire.jsonl of the same run), and recompute facts straight from the recorded frames in Python so
the SQL views are checked against something independent of them."""

from __future__ import annotations

import glob
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from sample_sessions.scenarios import SCENARIOS
from tests.harness.kimi_peer import msg_id, script, shell, text, tool_call, usage
from tests.harness.scripted_client import Approval, ClientPlan, Prompt
from tests.harness.wire import Scenario, check_scenario, run_scenario

BIN = Path(sys.executable).parent
SUBAGENT_SUMMARY = "The subagent listed the work folder and found nothing unusual there. " * 4

# Not a sample session (the analysis tests alone need it): a subagent with its own approved
# Shell call, a provider error retried once, and a turn that fails with -32003.
SUBAGENT_ERRORS = Scenario(
    name="analysis_subagent_errors",
    description="Turn 1 delegates to a subagent (which runs an approved Shell call); turn 2 "
                "survives a 503 with one retry; turn 3 finds the script list empty (-32003).",
    session_id="wr-analysis-subagent",
    scripts=[
        script(msg_id("msg-1"), usage(500, 20, 100), text("Delegating."),
               tool_call("call-a", "Agent", {"description": "List the folder",
                                             "prompt": "Run ls and summarise", "subagent_type": "coder"})),
        script(msg_id("sub-1"), usage(50, 5, 10, 7), shell("sub-call-1", "echo from-sub")),
        script(msg_id("sub-2"), usage(70, 40), text(SUBAGENT_SUMMARY.strip())),
        script(msg_id("msg-2"), usage(700, 12, 600), text("The subagent is done.")),
        "error: 503 overloaded",
        script(msg_id("msg-3"), usage(800, 9), text("Recovered after a retry.")),
    ],
    plan=ClientPlan(prompts=[Prompt("Delegate a listing"), Prompt("Say something"), Prompt("One more")],
                    approval_default=Approval.approve()),
)

RECORDED = ["multi_step", "reject_shell", "external_tool", "cancel_turn", "question", "hook",
            "approve_for_session"]


@dataclass
class Recorded:
    name: str
    db: str
    kimi_log: str | None  # kimi's own wire.jsonl of the same run (copied out)
    problems: list[str]


def scenario(name: str) -> Scenario:
    return SUBAGENT_ERRORS if name == SUBAGENT_ERRORS.name else SCENARIOS[name]


def record(name: str, folder: str, kimi: Path | None = None) -> Recorded:
    """Run one scenario through wire-proxy into folder/<name>.db and keep kimi's wire.jsonl."""
    sc = scenario(name)
    db = os.path.join(folder, f"{name}.db")
    result = run_scenario(sc, [str(BIN / "wire-proxy"), "--db", db, "--"], kimi=kimi, keep=True)
    problems = check_scenario(sc, result)
    if name == SUBAGENT_ERRORS.name:  # the -32003 of turn 3 is intended
        problems = [p for p in problems if "-32003" not in p]
    home = result.context["home"]
    logs = glob.glob(os.path.join(home, ".kimi", "sessions", "*", "*", "wire.jsonl"))
    kimi_log = None
    if logs:  # keep kimi's folder name: it is the session id
        dest = os.path.join(folder, "kimi-logs", name, os.path.basename(os.path.dirname(logs[0])))
        os.makedirs(dest)
        kimi_log = os.path.join(dest, "wire.jsonl")
        shutil.copyfile(logs[0], kimi_log)
    shutil.rmtree(os.path.dirname(home), ignore_errors=True)
    return Recorded(name, db, kimi_log, problems)


# -- facts recomputed from frames, without SQL ------------------------------------------------------
def frames_of(db: str) -> tuple[dict, list]:
    from wire_recorder.recorder.store import open_store

    with open_store(db, read_only=True) as store:
        s = store.session()
        return s, store.frames(s["session_id"])


def _payload(f):
    return orjson.loads(f.payload) if f.payload else None


def _usage_total(u: dict | None) -> int:
    if not u:
        return 0
    return sum(int(u.get(k) or 0) for k in ("input_other", "output", "input_cache_read", "input_cache_creation"))


def expected_from_frames(frames) -> dict:
    """Per turn: token sums, step count, status; per tool call: duration; per request: wait."""
    turns: list[dict] = []
    calls: dict[tuple, dict] = {}
    requests: dict[str, dict] = {}
    prompts: dict[str, int] = {}
    token_rows = []
    for f in frames:
        p = _payload(f)
        if f.direction == "c2a" and f.kind == "request" and f.method == "prompt":
            prompts[f.rpc_id] = len(turns)  # index the next TurnBegin will get
        if f.direction != "a2c":
            continue
        if f.kind in ("response", "error") and f.rpc_id in prompts:
            idx = prompts.pop(f.rpc_id)
            if idx < len(turns):
                turns[idx]["status"] = "error" if f.kind == "error" else p.get("status")
            continue
        mt = f.msg_type
        scope = ""
        if mt == "SubagentEvent":
            scope = p["agent_id"]
            mt, p = p["event"]["type"], p["event"]["payload"]
        if mt == "TurnBegin" and not scope:
            turns.append({"tokens": 0, "steps": 0, "status": None, "tool_calls": 0})
        elif mt == "StepBegin" and not scope:
            turns[-1]["steps"] += 1
        elif mt == "StatusUpdate" and p.get("token_usage"):
            turns[-1]["tokens"] += _usage_total(p["token_usage"])
            token_rows.append((scope or None, p.get("message_id"), _usage_total(p["token_usage"])))
        elif mt == "ToolCall":
            calls.setdefault((scope, p["id"]), {"start": f.mono_ns, "end": None, "name": p["function"]["name"]})
            if not scope:
                turns[-1]["tool_calls"] += 1
        elif mt == "ToolResult":
            c = calls.get((scope, p["tool_call_id"]))
            if c is not None and c["end"] is None:
                c["end"] = f.mono_ns
        if f.method == "request" and f.msg_type != "SubagentEvent":
            requests[f.rpc_id] = {"type": f.msg_type, "mono": f.mono_ns, "answer_mono": None,
                                  "tool_call_id": p.get("tool_call_id")}
    # answers in a second pass: an instant answer can be recorded before its request
    for f in frames:
        if f.direction == "c2a" and f.kind in ("response", "error") and f.rpc_id in requests:
            r = requests[f.rpc_id]
            if r.get("answer_mono") is None:
                r["answer_mono"] = f.mono_ns
    return {"turns": turns, "calls": calls, "requests": requests, "token_rows": token_rows}


def run_cli(*args: str, env=None, timeout: float = 60):
    import subprocess

    return subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True,
                          timeout=timeout, env=env)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


ALL = RECORDED + [SUBAGENT_ERRORS.name]


@pytest.fixture(scope="session")
def recorded(kimi_recordings, tmp_path_factory):
    """Every scenario of ALL, recorded once per test run (tests/harness/kimi_recordings.py), as
    copies in one folder of their own (the tests glob it), shared by the analysis modules."""
    folder = tmp_path_factory.mktemp("analysis")
    runs = {}
    for name, rec in kimi_recordings.get(ALL).items():
        problems = rec.problems
        if name == SUBAGENT_ERRORS.name:  # the -32003 of turn 3 is intended
            problems = [p for p in problems if "-32003" not in p]
        runs[name] = Recorded(name, rec.copy_to(folder), rec.kimi_log, problems)
    bad = {n: r.problems for n, r in runs.items() if r.problems}
    assert not bad, f"the real agent did not produce the intended sessions: {bad}"
    return folder, runs
