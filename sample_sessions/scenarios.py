"""Named scripted sessions against the real kimi: echo-LLM scripts + a client plan + a check.

    from sample_sessions.scenarios import SCENARIOS
    from tests.harness.wire import check_scenario, run_scenario
    result = run_scenario(SCENARIOS["approve_shell"])                       # kimi directly
    result = run_scenario(sc, ["wire-proxy", "--db", db, "--"])            # through the proxy
    assert check_scenario(sc, result) == []

This module is the table (data and the checks that say what each session must show); the
machinery that runs and checks a scenario is in tests/harness/. Each scenario uses a fixed kimi
session id (`-S`), so the only nondeterministic fields left are the request uuids, source_id,
scratch paths and timing.
"""

from __future__ import annotations

import json

from tests.harness.kimi_peer import (
    msg_id,
    script,
    shell,
    text,
    think,
    tool_call,
    tool_call_part,
    usage,
)
from tests.harness.scripted_client import Approval, ClientPlan, ClientResult, HookAnswer, Prompt
from tests.harness.wire import (
    Problems,
    Scenario,
    approval_roundtrip,
    index_of,
    of_type,
    tool_result,
    turn_frames,
    turn_status,
)

# ---------------------------------------------------------------------------------------------
# the scenarios

SCENARIOS: dict[str, Scenario] = {}


def _add(sc: Scenario) -> Scenario:
    SCENARIOS[sc.name] = sc
    return sc


# approve_shell ----------------------------------------------------------------------------------


def _check_approve_shell(r: ClientResult) -> list[str]:
    p = Problems()
    t = turn_frames(r, "p-1")
    p.expect([f.type for f in r.requests()] == ["ApprovalRequest"], f"requests {[f.type for f in r.requests()]}")
    req = r.requests("ApprovalRequest")[0].payload
    p.expect(
        (req["sender"], req["action"], req["description"]) == ("Shell", "run command", "Run command `echo hello`"),
        f"ApprovalRequest payload {req}",
    )
    approval_roundtrip(p, t, "call-1", "approve")
    rv = tool_result(t, "call-1")
    p.expect(rv and rv["is_error"] is False and rv["output"] == "hello\n", f"ToolResult {rv}")
    p.expect([f.payload["n"] for f in of_type(t, "StepBegin")] == [1, 2], "steps")
    p.expect(turn_status(r, "p-1") == "finished", f"status {turn_status(r, 'p-1')}")
    return list(p)


_add(
    Scenario(
        name="approve_shell",
        description="A Shell call `echo hello` is approved; the model then answers with text.",
        session_id="wr-approve-shell",
        scripts=[
            script(msg_id("msg-1"), usage(120, 15, 30), text("I'll run it."), shell("call-1", "echo hello")),
            script(msg_id("msg-2"), usage(160, 6, 150), text("The command printed hello.")),
        ],
        plan=ClientPlan(prompts=[Prompt("Run echo hello")], approvals=[Approval.approve()]),
        check=_check_approve_shell,
    )
)


# reject_shell -----------------------------------------------------------------------------------

REJECT_FEEDBACK = "Please list the files with ls instead."


def _check_reject_shell(r: ClientResult) -> list[str]:
    p = Problems()
    t1, t2 = turn_frames(r, "p-1"), turn_frames(r, "p-2")
    # turn 1: rejected without feedback -> the turn ends, no further LLM call
    approval_roundtrip(p, t1, "call-1", "reject")
    a1 = r.answer_to(of_type(t1, "ApprovalRequest")[0].id) if of_type(t1, "ApprovalRequest") else None
    p.expect(a1 is not None and "feedback" not in a1.msg["result"], "turn 1 answer has feedback")
    rv = tool_result(t1, "call-1")
    p.expect(rv and rv["is_error"] is True, f"turn 1 ToolResult {rv}")
    p.expect([f.payload["n"] for f in of_type(t1, "StepBegin")] == [1], "turn 1 must stop after step 1")
    p.expect(turn_status(r, "p-1") == "finished", f"p-1 status {turn_status(r, 'p-1')}")
    # turn 2: rejected with feedback -> error ToolResult carrying the feedback, model continues
    approval_roundtrip(p, t2, "call-2", "reject", feedback=REJECT_FEEDBACK)
    rv = tool_result(t2, "call-2")
    p.expect(rv and rv["is_error"] is True and REJECT_FEEDBACK in json.dumps(rv), f"turn 2 ToolResult {rv}")
    p.expect([f.payload["n"] for f in of_type(t2, "StepBegin")] == [1, 2], "turn 2 steps")
    last_text = [f.payload.get("text") for f in of_type(t2, "ContentPart")][-1:]
    p.expect(last_text == ["Understood, I will use ls next time."], f"turn 2 text {last_text}")
    p.expect(turn_status(r, "p-2") == "finished", f"p-2 status {turn_status(r, 'p-2')}")
    return list(p)


_add(
    Scenario(
        name="reject_shell",
        description=(
            "Turn 1: a Shell call rejected without feedback (turn ends, no further LLM call). "
            "Turn 2: a Shell call rejected with feedback; the model reads it and answers."
        ),
        session_id="wr-reject-shell",
        scripts=[
            script(msg_id("msg-1"), usage(100, 12), text("Removing the build folder."), shell("call-1", "rm -rf build")),
            script(msg_id("msg-2"), usage(180, 10), shell("call-2", "find . -type f")),
            script(msg_id("msg-3"), usage(260, 9), text("Understood, I will use ls next time.")),
        ],
        plan=ClientPlan(
            prompts=[Prompt("Clean the build folder"), Prompt("Find all files")],
            approvals=[Approval.reject(), Approval.reject(REJECT_FEEDBACK)],
        ),
        check=_check_reject_shell,
    )
)


# approve_for_session ---------------------------------------------------------------------------


def _check_approve_for_session(r: ClientResult) -> list[str]:
    p = Problems()
    t = turn_frames(r, "p-1")
    reqs = r.requests("ApprovalRequest")
    p.expect(len(reqs) == 1, f"{len(reqs)} ApprovalRequests (second call must be auto-approved)")
    approval_roundtrip(p, t, "call-1", "approve_for_session")
    for cid, out in (("call-1", "first\n"), ("call-2", "second\n")):
        rv = tool_result(t, cid)
        p.expect(rv and rv["is_error"] is False and rv["output"] == out, f"{cid} ToolResult {rv}")
    p.expect([f.payload["n"] for f in of_type(t, "StepBegin")] == [1, 2, 3], "steps")
    p.expect(turn_status(r, "p-1") == "finished", f"status {turn_status(r, 'p-1')}")
    return list(p)


_add(
    Scenario(
        name="approve_for_session",
        description=(
            "Two Shell calls (action `run command`) in consecutive steps; the first is approved for "
            "the session, the second runs without any ApprovalRequest."
        ),
        session_id="wr-approve-for-session",
        scripts=[
            script(msg_id("msg-1"), usage(100, 10), shell("call-1", "echo first")),
            script(msg_id("msg-2"), usage(140, 10), shell("call-2", "echo second")),
            script(msg_id("msg-3"), usage(180, 7), text("Both commands ran.")),
        ],
        plan=ClientPlan(prompts=[Prompt("Run two echos")], approvals=[Approval.for_session()]),
        check=_check_approve_for_session,
    )
)


# external_tool ---------------------------------------------------------------------------------

WEATHER_TOOL = {
    "name": "lookup_weather",
    "description": "Look up the current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
}
WEATHER_RESULT = {
    "is_error": False,
    "output": "Paris: sunny ☀, 21 °C",
    "message": "weather found",
    "display": [],
}


def _check_external_tool(r: ClientResult) -> list[str]:
    p = Problems()
    init = r.result_of("init-1") or {}
    p.expect(init.get("external_tools", {}).get("accepted") == ["lookup_weather"], f"init external_tools {init.get('external_tools')}")
    t = turn_frames(r, "p-1")
    p.expect([f.type for f in r.requests()] == ["ToolCallRequest"], f"requests {[f.type for f in r.requests()]}")
    req = r.requests("ToolCallRequest")[0]
    p.expect(req.id == "call-w1" and req.payload.get("name") == "lookup_weather", f"ToolCallRequest {req.msg}")
    p.expect(json.loads(req.payload.get("arguments") or "null") == {"city": "Paris", "unit": "celsius"}, "arguments")
    ans = r.answer_to("call-w1")
    p.expect(ans is not None and ans.msg["result"]["return_value"] == WEATHER_RESULT, "client answer")
    rv = tool_result(t, "call-w1")
    p.expect(rv and rv["is_error"] is False and rv["output"] == WEATHER_RESULT["output"], f"ToolResult {rv}")
    p.expect(turn_status(r, "p-1") == "finished", f"status {turn_status(r, 'p-1')}")
    return list(p)


_add(
    Scenario(
        name="external_tool",
        description=(
            "An external tool `lookup_weather` is registered in initialize; the model calls it, the "
            "client answers the ToolCallRequest, the model finishes with text."
        ),
        session_id="wr-external-tool",
        scripts=[
            script(
                msg_id("msg-1"), usage(300, 20), text("Checking the weather."),
                tool_call("call-w1", "lookup_weather", {"city": "Paris", "unit": "celsius"}),
            ),
            script(msg_id("msg-2"), usage(360, 12), text("It is sunny in Paris ☀ (21 °C).")),
        ],
        plan=ClientPlan(
            prompts=[Prompt("What's the weather in Paris?")],
            external_tools=[WEATHER_TOOL],
            tool_results={"lookup_weather": WEATHER_RESULT},
        ),
        check=_check_external_tool,
    )
)


# cancel_turn -------------------------------------------------------------------------------------


def _check_cancel_turn(r: ClientResult) -> list[str]:
    p = Problems()
    t = turn_frames(r, "p-1")
    reqs = r.requests("ApprovalRequest")
    if not p.expect(len(reqs) == 1, f"{len(reqs)} ApprovalRequests"):
        return list(p)
    req = reqs[0]
    p.expect(r.answer_to(req.id) is None, "the client must not answer the pending approval")
    ri = index_of(t, lambda f: f is req)
    ci = index_of(t, lambda f: f.dir == "c2a" and f.method == "cancel")
    p.expect(ci > ri >= 0, "cancel must follow the ApprovalRequest")
    if ci >= 0:
        p.expect(t[ci].id == "c-1", f"cancel id {t[ci].id}")
        p.expect(t[ci].t - req.t >= 0.45, f"cancel sent {t[ci].t - req.t:.3f}s after the request")
    p.expect(r.result_of("c-1") == {}, f"cancel response {r.response('c-1')}")
    resp = [f for f in of_type(t, "ApprovalResponse") if f.payload.get("request_id") == req.id]
    p.expect(len(resp) == 1 and resp[0].payload.get("response") == "reject", f"ApprovalResponse {[f.payload for f in resp]}")
    p.expect(of_type(t, "TurnEnd"), "TurnEnd missing")
    p.expect(tool_result(t, "call-1") is None, "no ToolResult expected after a clean cancel")
    p.expect(turn_status(r, "p-1") == "cancelled", f"status {turn_status(r, 'p-1')}")
    p.expect(t and t[-1].is_response and t[-1].id == "p-1", "prompt response must end the turn")
    return list(p)


_add(
    Scenario(
        name="cancel_turn",
        description=(
            "A Shell call's ApprovalRequest is left pending; the client sends `cancel` 0.5 s after "
            "it arrives. kimi rejects its own request and the prompt ends `cancelled`."
        ),
        session_id="wr-cancel-turn",
        scripts=[
            script(msg_id("msg-1"), usage(90, 11), text("Running the slow command."), shell("call-1", "sleep 20")),
        ],
        plan=ClientPlan(
            prompts=[Prompt("Run the slow command", cancel_after=0.5, cancel_on="ApprovalRequest")],
            approvals=[Approval.pending()],
        ),
        check=_check_cancel_turn,
    )
)


# multi_step --------------------------------------------------------------------------------------

MULTI_USAGE = {
    "msg-1": {"input_other": 1200, "output": 40, "input_cache_read": 300, "input_cache_creation": 0},
    "msg-2": {"input_other": 310, "output": 25, "input_cache_read": 1500, "input_cache_creation": 64},
    "msg-3": {"input_other": 80, "output": 61, "input_cache_read": 1874, "input_cache_creation": 0},
}


def _check_multi_step(r: ClientResult) -> list[str]:
    p = Problems()
    t = turn_frames(r, "p-1")
    p.expect([f.payload["n"] for f in of_type(t, "StepBegin")] == [1, 2, 3], "steps 1..3")
    su = {f.payload.get("message_id"): f.payload for f in of_type(t, "StatusUpdate")}
    p.expect(set(su) == set(MULTI_USAGE), f"StatusUpdate message ids {sorted(su, key=str)}")
    for mid, u in MULTI_USAGE.items():
        if mid in su:
            p.expect(su[mid].get("token_usage") == u, f"{mid} token_usage {su[mid].get('token_usage')}")
            p.expect(
                su[mid].get("context_tokens") == u["input_other"] + u["input_cache_read"] + u["input_cache_creation"],
                f"{mid} context_tokens",
            )
    kinds = [f.payload.get("type") for f in of_type(t, "ContentPart")]
    p.expect(kinds.count("think") == 2 and kinds.count("text") >= 4, f"content parts {kinds}")
    p.expect(len(of_type(t, "ToolCallPart")) == 1, "one ToolCallPart (streamed arguments of call-2)")
    for cid, out in (("call-1", "step one\n"), ("call-2", "step two\n")):
        approval_roundtrip(p, t, cid, "approve")
        rv = tool_result(t, cid)
        p.expect(rv and rv["is_error"] is False and rv["output"] == out, f"{cid} ToolResult {rv}")
    p.expect(turn_status(r, "p-1") == "finished", f"status {turn_status(r, 'p-1')}")
    return list(p)


_add(
    Scenario(
        name="multi_step",
        description=(
            "One prompt, three LLM steps with different token usage: think + streamed text + Shell "
            "(approved), think + Shell with streamed arguments (approved), final text."
        ),
        session_id="wr-multi-step",
        scripts=[
            script(
                msg_id("msg-1"), usage(**MULTI_USAGE["msg-1"]),
                think("The user wants two steps; start with step one."),
                text("Starting"), text(" with step one."),
                shell("call-1", "echo step one"),
            ),
            script(
                msg_id("msg-2"), usage(**MULTI_USAGE["msg-2"]),
                think("Step one worked, now step two."),
                text("Now step two."),
                tool_call("call-2", "Shell", '{"command": '),
                tool_call_part('"echo step two"}'),
            ),
            script(
                msg_id("msg-3"), usage(**MULTI_USAGE["msg-3"]),
                text("Both steps are done:"), text(" step one, then step two."),
            ),
        ],
        plan=ClientPlan(prompts=[Prompt("Do the two steps")], approval_default=Approval.approve()),
        check=_check_multi_step,
    )
)


# question ----------------------------------------------------------------------------------------

QUESTION = {
    "questions": [
        {
            "question": "Which database should I use?",
            "header": "Database",
            "options": [
                {"label": "DuckDB (Recommended)", "description": "embedded, columnar"},
                {"label": "SQLite", "description": "embedded, row store"},
            ],
        }
    ]
}
QUESTION_ANSWER = {"Which database should I use?": "SQLite"}


def _check_question(r: ClientResult) -> list[str]:
    p = Problems()
    t = turn_frames(r, "p-1")
    p.expect([f.type for f in r.requests()] == ["QuestionRequest"], f"requests {[f.type for f in r.requests()]}")
    req = r.requests("QuestionRequest")[0]
    p.expect(req.payload.get("tool_call_id") == "call-q", "tool_call_id")
    qs = req.payload.get("questions") or [{}]
    p.expect(qs[0].get("question") == "Which database should I use?" and len(qs[0].get("options", [])) == 2, f"questions {qs}")
    ans = r.answer_to(req.id)
    p.expect(ans is not None and ans.msg["result"] == {"request_id": req.id, "answers": QUESTION_ANSWER}, "answer")
    rv = tool_result(t, "call-q")
    p.expect(rv and rv["is_error"] is False and json.loads(rv["output"]) == {"answers": QUESTION_ANSWER}, f"ToolResult {rv}")
    p.expect(turn_status(r, "p-1") == "finished", f"status {turn_status(r, 'p-1')}")
    return list(p)


_add(
    Scenario(
        name="question",
        description=(
            "The client declares capabilities.supports_question; the model calls AskUserQuestion, "
            "the client answers the QuestionRequest, the model finishes."
        ),
        session_id="wr-question",
        scripts=[
            script(msg_id("msg-1"), usage(220, 30), text("I need to ask first."), tool_call("call-q", "AskUserQuestion", QUESTION)),
            script(msg_id("msg-2"), usage(280, 9), text("SQLite it is.")),
        ],
        plan=ClientPlan(
            prompts=[Prompt("Set up storage")],
            capabilities={"supports_question": True},
            question_answers=[QUESTION_ANSWER],
        ),
        check=_check_question,
    )
)


# hook --------------------------------------------------------------------------------------------

HOOK_BLOCK_REASON = "rm is not allowed in this repository"


def _check_hook(r: ClientResult) -> list[str]:
    p = Problems()
    t = turn_frames(r, "p-1")
    types = [f.type for f in r.requests()]
    p.expect(types == ["HookRequest", "ApprovalRequest", "HookRequest"], f"requests {types}")
    hooks = r.requests("HookRequest")
    for h, cid, action in zip(hooks, ("call-1", "call-2"), ("allow", "block"), strict=False):
        pl = h.payload
        p.expect(pl.get("subscription_id") == "h-pre-shell" and pl.get("event") == "PreToolUse" and pl.get("target") == "Shell", f"HookRequest {pl}")
        p.expect(pl.get("input_data", {}).get("tool_call_id") == cid, f"hook input_data {pl.get('input_data')}")
        p.expect(pl.get("input_data", {}).get("session_id") == "wr-hook", "hook session id")
        ans = r.answer_to(h.id)
        p.expect(ans is not None and ans.msg["result"]["action"] == action, f"hook answer {ans and ans.msg}")
    resolved = [f.payload.get("action") for f in of_type(t, "HookResolved")]
    p.expect(resolved == ["allow", "block"], f"HookResolved {resolved}")
    p.expect(len(of_type(t, "HookTriggered")) == 2, "HookTriggered x2")
    approval_roundtrip(p, t, "call-1", "approve")
    rv = tool_result(t, "call-1")
    p.expect(rv and rv["is_error"] is False and rv["output"] == "allowed\n", f"call-1 ToolResult {rv}")
    rv = tool_result(t, "call-2")
    p.expect(rv and rv["is_error"] is True and rv["message"] == HOOK_BLOCK_REASON, f"call-2 ToolResult {rv}")
    p.expect(turn_status(r, "p-1") == "finished", f"status {turn_status(r, 'p-1')}")
    return list(p)


_add(
    Scenario(
        name="hook",
        description=(
            "initialize subscribes to PreToolUse on Shell. First Shell call: HookRequest allowed, "
            "then ApprovalRequest approved. Second: HookRequest blocked (error ToolResult, no "
            "approval). The model finishes with text."
        ),
        session_id="wr-hook",
        scripts=[
            script(msg_id("msg-1"), usage(150, 10), shell("call-1", "echo allowed")),
            script(msg_id("msg-2"), usage(190, 10), shell("call-2", "rm -rf tmp")),
            script(msg_id("msg-3"), usage(230, 12), text("The rm was blocked by a hook.")),
        ],
        plan=ClientPlan(
            prompts=[Prompt("Echo, then clean up")],
            hooks=[{"id": "h-pre-shell", "event": "PreToolUse", "matcher": "Shell", "timeout": 10}],
            hook_answers={"PreToolUse": [HookAnswer("allow"), HookAnswer("block", HOOK_BLOCK_REASON)]},
            approvals=[Approval.approve()],
        ),
        check=_check_hook,
    )
)


# steer -------------------------------------------------------------------------------------------

STEER_TEXT = "Also tell me when you are done."


def _check_steer(r: ClientResult) -> list[str]:
    p = Problems()
    t = turn_frames(r, "p-1")
    approval_roundtrip(p, t, "call-1", "approve")
    si = index_of(t, lambda f: f.dir == "c2a" and f.method == "steer")
    p.expect(si >= 0 and t[si].id == "s-1", "steer s-1 not sent")
    p.expect(r.result_of("s-1") == {"status": "steered"}, f"steer response {r.response('s-1')}")
    ti = index_of(t, lambda f: f.type == "ToolResult")
    ei = index_of(t, lambda f: f.type == "SteerInput")
    p.expect(si < ti < ei, "steer must be sent while the command runs; SteerInput follows the ToolResult")
    if ei >= 0:
        p.expect(t[ei].payload.get("user_input") == STEER_TEXT, f"SteerInput {t[ei].payload}")
    p.expect([f.payload["n"] for f in of_type(t, "StepBegin")] == [1, 2], "steps")
    rv = tool_result(t, "call-1")
    p.expect(rv and rv["is_error"] is False, f"ToolResult {rv}")
    p.expect(turn_status(r, "p-1") == "finished", f"status {turn_status(r, 'p-1')}")
    return list(p)


_add(
    Scenario(
        name="steer",
        description=(
            "A Shell `sleep 2` is approved; 0.5 s after its ApprovalRequest the client sends `steer`. "
            "kimi injects the input (SteerInput) after the tool step and the model answers."
        ),
        session_id="wr-steer",
        scripts=[
            script(msg_id("msg-1"), usage(100, 10), text("Waiting a bit."), shell("call-1", "sleep 2")),
            script(msg_id("msg-2"), usage(150, 12), text("Done waiting, and I am done.")),
        ],
        plan=ClientPlan(
            prompts=[Prompt("Wait two seconds", steer=STEER_TEXT, steer_on="ApprovalRequest", steer_after=0.5)],
            approvals=[Approval.approve()],
        ),
        check=_check_steer,
    )
)
