"""The named ACP sessions: what `kimi acp` is given (echo scripts, prompts, permission answers,
work dir files) and what each run must show. The machinery that runs and checks them, and the
facts about the client, are in tests/harness/acp.py.

    from sample_sessions.acp_scenarios import ACP_SCENARIOS
    from tests.harness.acp import check_acp_scenario, run_acp_scenario
    sc = ACP_SCENARIOS["acp_tools"]
    result = run_acp_scenario(sc, ["wire-proxy", "-q", "--db", db, "--"])     # through the proxy
    assert check_acp_scenario(sc, result) == []
"""

from __future__ import annotations

from typing import Any

from tests.harness.acp import AcpResult, AcpScenario, Check
from tests.harness.kimi_peer import msg_id, script, shell, text, think, tool_call, usage
from tests.harness.wire import Problems


def _methods(ph: dict[str, Any]) -> list[str]:
    return [q["method"] for q in ph.get("requests", [])]


def _req(ph: dict[str, Any], method: str, n: int = 0) -> dict[str, Any]:
    return [q for q in ph.get("requests", []) if q["method"] == method][n]


# ---------------------------------------------------------------------------------------------
# the scenarios

ACP_SCENARIOS: dict[str, AcpScenario] = {}


def _add(sc: AcpScenario) -> AcpScenario:
    ACP_SCENARIOS[sc.name] = sc
    return sc


# acp_tools --------------------------------------------------------------------------------------

NOTES = "alpha\nbeta\ngamma\n"
PROMPT_1_METHODS = [
    "session/request_permission",
    "terminal/create",
    "terminal/wait_for_exit",
    "terminal/output",
    "terminal/release",
    "fs/read_text_file",
    "session/request_permission",
    "fs/write_text_file",
]


def tools_scripts(shell_command: str, summary: str, final_text: str, reject_command: str) -> list[str]:
    """The four LLM steps of prompt 1 and the one of prompt 2 (fixed message and call ids)."""
    return [
        script(msg_id("msg-1"), usage(120, 15), text("Let me look at the environment first."),
               shell("call-shell-1", shell_command)),
        script(msg_id("msg-2"), usage(180, 12), think("Now read the notes file."),
               tool_call("call-read-1", "ReadFile", {"path": "notes.txt"})),
        script(msg_id("msg-3"), usage(240, 20),
               tool_call("call-write-1", "WriteFile", {"path": "summary.txt", "content": summary})),
        script(msg_id("msg-4"), usage(300, 9), text(final_text)),
        script(msg_id("msg-5"), usage(340, 10), shell("call-shell-2", reject_command)),
    ]


def _tools_check(shell_command: str, shell_output: str, summary: str, final_text: str,
                 reject_command: str) -> Check:
    def check(r: AcpResult) -> list[str]:
        p = Problems()
        init = r.summary.get("initialize", {})
        p.expect(init.get("protocolVersion") == 1, f"initialize {init}")
        p.expect(r.summary.get("session", {}).get("updates") == ["available_commands_update"],
                 f"updates before prompt 1: {r.summary.get('session', {}).get('updates')}")
        p1, p2 = (r.prompts + [{}, {}])[:2]
        # prompt 1: Shell (approve, terminal), ReadFile (fs read), WriteFile (approve, fs write)
        p.expect(_methods(p1) == PROMPT_1_METHODS, f"prompt 1 requests {_methods(p1)}")
        if _methods(p1) == PROMPT_1_METHODS:
            perm1, perm2 = _req(p1, "session/request_permission"), _req(p1, "session/request_permission", 1)
            p.expect((perm1["params"]["toolCallId"], perm1["answer"]) == ("call-shell-1", "approve"), f"{perm1}")
            p.expect(perm1["params"]["options"] == ["approve", "approve_for_session", "reject"], f"{perm1}")
            p.expect((perm2["params"]["toolCallId"], perm2["answer"]) == ("call-write-1", "approve"), f"{perm2}")
            create = _req(p1, "terminal/create")
            p.expect(create["params"]["command"] == shell_command and create["answer"] == {"terminalId": "term-1"},
                     f"terminal/create {create}")
            p.expect(_req(p1, "terminal/wait_for_exit")["answer"] == {"exitCode": 0}, "wait_for_exit")
            out = _req(p1, "terminal/output")["answer"]
            p.expect(out == {"output": shell_output, "truncated": False, "exitStatus": {"exitCode": 0}},
                     f"terminal/output {out}")
            rd = _req(p1, "fs/read_text_file")
            p.expect(rd["params"]["path"].endswith("/notes.txt") and rd["answer"] == {"content": NOTES},
                     f"fs/read_text_file {rd}")
            wr = _req(p1, "fs/write_text_file")
            p.expect(wr["params"]["path"].endswith("/summary.txt") and wr["params"]["content"] == summary,
                     f"fs/write_text_file {wr}")
        p.expect(r.files.get("summary.txt") == summary, f"summary.txt on disk: {r.files.get('summary.txt')!r}")
        kinds = set(p1.get("updates", []))
        p.expect({"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update"} <= kinds,
                 f"prompt 1 update kinds {sorted(kinds)}")
        calls = p1.get("tool_calls", {})
        p.expect(list(calls) == ["call-shell-1", "call-read-1", "call-write-1"], f"prompt 1 tool calls {list(calls)}")
        p.expect(all(c["statuses"][-1:] == ["completed"] for c in calls.values()), f"tool call statuses {calls}")
        p.expect(p1.get("thought") == "Now read the notes file.", f"thought {p1.get('thought')!r}")
        p.expect(p1.get("text") == "Let me look at the environment first." + final_text, f"text {p1.get('text')!r}")
        p.expect(p1.get("stopReason") == "end_turn", f"prompt 1 stopReason {p1.get('stopReason')}")
        # prompt 2: Shell rejected -> tool call failed, the turn ends without another LLM call
        p.expect(_methods(p2) == ["session/request_permission"], f"prompt 2 requests {_methods(p2)}")
        if _methods(p2) == ["session/request_permission"]:
            perm = p2["requests"][0]
            p.expect((perm["params"]["toolCallId"], perm["answer"]) == ("call-shell-2", "reject"), f"{perm}")
            p.expect(perm["params"]["title"] == f"Shell: {reject_command}", f"{perm}")
        calls2 = p2.get("tool_calls", {})
        p.expect(list(calls2) == ["call-shell-2"] and calls2["call-shell-2"]["statuses"][-1] == "failed",
                 f"prompt 2 tool calls {calls2}")
        p.expect(p2.get("stopReason") == "end_turn", f"prompt 2 stopReason {p2.get('stopReason')}")
        p.expect(r.summary.get("permissions_used") == 3, f"permissions used {r.summary.get('permissions_used')}")
        return list(p)

    return check


def _tools_scenario(name: str, description: str, *, shell_command: str, shell_output: str,
                    summary: str, final_text: str, reject_command: str = "rm -rf build",
                    sample: bool = True) -> AcpScenario:
    return AcpScenario(
        name=name,
        description=description,
        scripts=tools_scripts(shell_command, summary, final_text, reject_command),
        prompts=["Look around, read notes.txt and write a summary.", "Now clean the build folder."],
        permissions=["approve", "approve", "reject"],
        files={"notes.txt": NOTES},
        check=_tools_check(shell_command, shell_output, summary, final_text, reject_command),
        sample=sample,
    )


ACP_TOOLS = _add(_tools_scenario(
    "acp_tools",
    "Prompt 1: Shell `echo hello from the terminal` approved and run through terminal/*, ReadFile "
    "through fs/read_text_file, WriteFile approved and done through fs/write_text_file, final text. "
    "Prompt 2: Shell `rm -rf build` rejected; the tool call fails and the turn ends.",
    shell_command="echo hello from the terminal",
    shell_output="hello from the terminal\n",
    summary="Notes: alpha, beta, gamma.\n",
    final_text="Done: summary.txt lists the three notes.",
))

# The same session with a changed LLM: another shell command (so terminal/create asks something
# else and its output differs) and another final text. Replaying acp_tools.jsonl against kimi
# running these scripts must fail, naming terminal/create of prompt 1 as the first divergence.
ACP_TOOLS_CHANGED = _add(_tools_scenario(
    "acp_tools_changed",
    "acp_tools with a changed script: Shell runs `echo goodbye from the terminal` and the final "
    "text differs. For showing that a replay of acp_tools names the first divergence.",
    shell_command="echo goodbye from the terminal",
    shell_output="goodbye from the terminal\n",
    summary="Notes: alpha, beta, gamma.\n",
    final_text="Done: summary.txt lists the notes, and the command said goodbye.",
    sample=False,
))


# acp_cancel -------------------------------------------------------------------------------------


CANCEL_TEXT_2 = "Stopped. Here is the plan.Tell me how to go on."


def _cancel_check(r: AcpResult) -> list[str]:
    p = Problems()
    p1, p2 = (r.prompts + [{}, {}])[:2]
    p.expect(_methods(p1) == ["session/request_permission"], f"prompt 1 requests {_methods(p1)}")
    if _methods(p1):
        perm = p1["requests"][0]
        p.expect((perm["params"]["toolCallId"], perm["answer"]) == ("call-shell-1", "cancel_turn"),
                 f"{perm}")
    calls = p1.get("tool_calls", {})
    # kimi races the cancel against the permission's answer: the call is reported failed
    # (answer first) or not at all after in_progress (cancel first)
    p.expect(list(calls) == ["call-shell-1"] and
             calls["call-shell-1"]["statuses"] in (["in_progress", "failed"], ["in_progress"]),
             f"prompt 1 tool calls {calls}")
    p.expect(p1.get("stopReason") == "cancelled", f"prompt 1 stopReason {p1.get('stopReason')}")
    p.expect(p2.get("stopReason") == "end_turn" and p2.get("text") == CANCEL_TEXT_2,
             f"prompt 2 {p2}")
    p.expect("plan" in p2.get("updates", []), f"prompt 2 updates {p2.get('updates')}: no plan")
    sent = [m.get("method") or ("answer", m.get("id")) for m in r.sent()]
    p.expect(sent[2:5] == ["session/prompt", "session/cancel", ("answer", 0)],
             f"client frames {sent}: session/cancel must come before the pending permission's answer")
    return list(p)


ACP_CANCEL = _add(AcpScenario(
    name="acp_cancel",
    description="The user stops a turn while its Shell permission is pending: the client sends "
                "session/cancel, answers the permission `cancelled`; the prompt ends with "
                "stopReason cancelled. A second prompt then runs normally and sets a todo list "
                "(a `plan` update).",
    scripts=[
        script(msg_id("msg-1"), usage(110, 12), text("Let me run the slow build."),
               shell("call-shell-1", "sleep 30; echo built")),
        script(msg_id("msg-2"), usage(160, 9), text("Stopped. Here is the plan."),
               tool_call("call-todo-1", "SetTodoList",
                         {"todos": [{"title": "Build the project", "status": "pending"},
                                    {"title": "Run the tests", "status": "pending"}]})),
        script(msg_id("msg-3"), usage(200, 6), text("Tell me how to go on.")),
    ],
    prompts=["Build the project.", "What now?"],
    permissions=["cancel_turn"],
    check=_cancel_check,
))


# acp_load ---------------------------------------------------------------------------------------


LOAD_SCRIPTS = [
    script(msg_id("msg-1"), usage(100, 10), think("Count them with the shell."),
           text("Let me count the files."), shell("call-shell-1", "ls | wc -l")),
    script(msg_id("msg-2"), usage(150, 8), text("There are 2 files.")),
]
LOAD_METHODS = ["session/request_permission", "terminal/create", "terminal/wait_for_exit",
                "terminal/output", "terminal/release"]
LOAD_TEXT = "Let me count the files.There are 2 files."


def _load_origin_check(r: AcpResult) -> list[str]:
    p = Problems()
    (p1,) = (r.prompts + [{}])[:1]
    p.expect(_methods(p1) == LOAD_METHODS, f"prompt 1 requests {_methods(p1)}")
    p.expect(p1.get("text") == LOAD_TEXT, f"text {p1.get('text')!r}")
    return list(p)


def _load_check(r: AcpResult) -> list[str]:
    p = Problems()
    hist = r.summary.get("session", {})
    p.expect(hist.get("updates") == ["user_message_chunk", "agent_thought_chunk",
                                     "agent_message_chunk", "tool_call", "tool_call_update",
                                     "agent_message_chunk"],
             f"history replayed by session/load: {hist.get('updates')}")
    p.expect(hist.get("text") == LOAD_TEXT, f"history text {hist.get('text')!r}")
    (p1,) = (r.prompts + [{}])[:1]
    p.expect(_methods(p1) == LOAD_METHODS, f"prompt after load: requests {_methods(p1)}")
    p.expect(p1.get("text") == LOAD_TEXT and p1.get("stopReason") == "end_turn",
             f"prompt after load {p1}")
    p.expect([m.get("method") for m in r.sent()][:2] == ["initialize", "session/load"],
             f"client frames {[m.get('method') for m in r.sent()]}")
    return list(p)


# The echo LLM starts its scripts afresh in each process, and a replay runs both processes with
# the same scripts file: so the reopened session's prompt runs the same two steps again.
ACP_LOAD = _add(AcpScenario(
    name="acp_load",
    description="An editor reopens a session: `kimi acp` #1 creates it (Shell `ls | wc -l` "
                "approved, run through terminal/*); `kimi acp` #2 session/loads it, replays its "
                "history as session/update, and runs a prompt with the same Shell call. Two "
                "sessions in the DB; replaying the second one replays the first before it.",
    scripts=LOAD_SCRIPTS,
    prompts=["How many files are here?"],
    permissions=["approve"],
    files={"a.txt": "a\n", "b.txt": "b\n"},
    check=_load_origin_check,
    then=AcpScenario(
        name="acp_load",
        description="the session/load half of acp_load",
        scripts=LOAD_SCRIPTS,
        prompts=["Count them again."],
        permissions=["approve"],
        files={"a.txt": "a\n", "b.txt": "b\n"},  # the same work dir (when run on its own)
        check=_load_check,
    ),
))
