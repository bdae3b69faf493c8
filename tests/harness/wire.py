"""Wire scenarios against the real kimi: the scenario type, its runner and the generic checks.

A scenario is echo-LLM scripts + a client plan + a check (the named ones are in
sample_sessions/scenarios.py). `run_scenario` starts kimi in a fresh scratch run, optionally
behind a command prefix such as `wire-proxy --db X --`, and drives it with the scripted client:

    result = run_scenario(SCENARIOS["approve_shell"])                       # kimi directly
    result = run_scenario(sc, ["wire-proxy", "--db", db, "--"])            # through the proxy
    assert check_scenario(sc, result) == []
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness.kimi_peer import KimiRun
from tests.harness.scripted_client import ClientPlan, ClientResult, WireFrame, run_client

# ---------------------------------------------------------------------------------------------
# Scenario


Check = Callable[[ClientResult], list[str]]


@dataclass
class Scenario:
    name: str
    description: str
    scripts: list[str]
    plan: ClientPlan
    session_id: str | None = None
    check: Check | None = None  # scenario-specific; check_scenario adds the generic checks
    timeout: float = 60.0
    tags: dict[str, Any] = field(default_factory=dict)


def run_scenario(
    scenario: Scenario,
    command_prefix: Sequence[str] = (),
    timeout: float | None = None,
    *,
    kimi: Path | str | None = None,
    keep: bool = False,
    env: dict[str, str] | None = None,
) -> ClientResult:
    """Run one scenario: fresh scratch HOME/work dir, `command_prefix + kimi argv`, drive it.

    `result.context` gets scenario, session_id, home, workdir, argv (the dirs are deleted
    afterwards unless keep=True). `env` adds variables on top of the run's environment.
    Raises tests.harness.peers.PeerMissing when kimi cannot be found.
    """
    run = KimiRun.create(scenario.scripts, session_id=scenario.session_id, kimi=kimi, keep=keep)
    try:
        run_env = run.env()
        if env:
            run_env.update(env)
        argv = [*map(str, command_prefix), *run.argv()]
        result = run_client(
            argv,
            scenario.plan,
            env=run_env,
            cwd=run.workdir,
            timeout=timeout if timeout is not None else scenario.timeout,
        )
        if argv and os.path.basename(argv[0]) == "wire-proxy":
            # it exits before its loader has stored the session: wait as a reader does
            from tests.harness.proxy import settle

            settle(argv[1:], run_env)
        result.context.update(
            scenario=scenario.name,
            session_id=scenario.session_id,
            home=str(run.home),
            workdir=str(run.workdir),
            argv=argv,
        )
        return result
    finally:
        run.cleanup()


# ---------------------------------------------------------------------------------------------
# checks


class Problems(list):
    """What a scenario check found wrong: `p.expect(cond, msg)` keeps msg when cond fails."""

    def expect(self, cond: Any, msg: str) -> bool:
        if not cond:
            self.append(msg)
        return bool(cond)


def turn_frames(result: ClientResult, prompt_id: str) -> list[WireFrame]:
    """Frames (both directions) from sending `prompt_id` up to and including its response."""
    out: list[WireFrame] = []
    inside = False
    for f in result.frames:
        if f.dir == "c2a" and f.method == "prompt" and f.id == prompt_id:
            inside = True
        if inside:
            out.append(f)
            if f.dir == "a2c" and f.is_response and f.id == prompt_id:
                break
    return out


def of_type(frames: list[WireFrame], type: str, method: str | None = None) -> list[WireFrame]:
    return [f for f in frames if f.dir == "a2c" and f.type == type and (method is None or f.method == method)]


def tool_result(frames: list[WireFrame], call_id: str) -> dict[str, Any] | None:
    for f in of_type(frames, "ToolResult"):
        if f.payload.get("tool_call_id") == call_id:
            return f.payload.get("return_value")
    return None


def index_of(frames: list[WireFrame], pred: Callable[[WireFrame], bool]) -> int:
    for i, f in enumerate(frames):
        if pred(f):
            return i
    return -1


def turn_status(result: ClientResult, prompt_id: str) -> Any:
    r = result.result_of(prompt_id)
    return r.get("status") if isinstance(r, dict) else None


def generic_problems(scenario: Scenario, result: ClientResult) -> list[str]:
    """Checks that hold for every scenario."""
    p = Problems()
    p.expect(not result.timed_out, "hard timeout")
    p.expect(result.exit_code == 0, f"exit code {result.exit_code}")
    p.extend(f"client: {x}" for x in result.problems)
    p.expect(not result.invalid(), f"{len(result.invalid())} non-JSON frames")
    if scenario.plan.initialize:
        init = result.response("init-1")
        p.expect(init is not None and "result" in init, f"initialize response: {init}")
    for i, _ in enumerate(scenario.plan.prompts, 1):
        r = result.response(f"p-{i}")
        p.expect(r is not None and "result" in r, f"p-{i} response: {r}")
    # every agent request is answered by the client, or resolved by the agent (ApprovalResponse)
    resolved = {f.payload.get("request_id") for f in result.events("ApprovalResponse")}
    for req in result.requests():
        if result.answer_to(req.id) is None:
            p.expect(
                req.type == "ApprovalRequest" and req.id in resolved,
                f"{req.type} {req.id} neither answered nor resolved",
            )
    for req in result.requests("ApprovalRequest"):
        p.expect(req.id in resolved, f"ApprovalRequest {req.id} without ApprovalResponse")
    return list(p)


def check_scenario(scenario: Scenario, result: ClientResult) -> list[str]:
    """Generic + scenario-specific problems; [] when the run produced the intended frames."""
    problems = generic_problems(scenario, result)
    if scenario.check is not None:
        try:
            problems += scenario.check(result)
        except Exception as e:  # a check tripping over a missing frame is a failed check
            problems.append(f"check raised {type(e).__name__}: {e}")
    return problems


def approval_roundtrip(p: Problems, frames: list[WireFrame], call_id: str, response: str,
                        feedback: str | None = None) -> None:
    """One ApprovalRequest for call_id, answered `response`, followed by ApprovalResponse."""
    reqs = [f for f in of_type(frames, "ApprovalRequest") if f.payload.get("tool_call_id") == call_id]
    if not p.expect(len(reqs) == 1, f"{call_id}: {len(reqs)} ApprovalRequests"):
        return
    req = reqs[0]
    p.expect(req.id == req.payload.get("id"), "ApprovalRequest id != payload.id")
    ai = index_of(frames, lambda f: f.dir == "c2a" and f.is_response and f.id == req.id)
    if not p.expect(ai >= 0, f"{call_id}: no client answer"):
        return
    ans = frames[ai].msg["result"]
    p.expect(ans.get("response") == response and ans.get("request_id") == req.id, f"{call_id}: answer {ans}")
    if feedback is not None:
        p.expect(ans.get("feedback") == feedback, f"{call_id}: feedback {ans.get('feedback')!r}")
    ri = index_of(frames, lambda f: f.type == "ApprovalResponse" and f.payload.get("request_id") == req.id)
    p.expect(ri > ai, f"{call_id}: ApprovalResponse missing or before the answer")
    if ri >= 0:
        p.expect(frames[ri].payload.get("response") == response, f"{call_id}: ApprovalResponse {frames[ri].payload}")
    ti = index_of(frames, lambda f: f.type == "ToolResult" and f.payload.get("tool_call_id") == call_id)
    p.expect(ti > ai, f"{call_id}: ToolResult missing or before the answer")
