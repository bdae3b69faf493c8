"""ACP sessions against the real agent: `kimi acp` driven by the official ACP SDK client.

    from sample_sessions.acp_scenarios import ACP_SCENARIOS, run_acp_scenario, check_acp_scenario
    sc = ACP_SCENARIOS["acp_tools"]
    result = run_acp_scenario(sc)                                              # kimi directly
    result = run_acp_scenario(sc, ["wire-proxy", "-q", "--db", db, "--"])     # through the proxy
    assert check_acp_scenario(sc, result) == []

The client is `sample_sessions/peers/acp_client.py`, run with the ACP SDK's own interpreter
(`.peers/acp/bin/python`, agent-client-protocol 0.12.1; `$WIRE_ACP_PYTHON` overrides it). It
spawns `command_prefix + [kimi, "acp"]`, advertises fs read/write and terminal, answers
permissions from the scenario's list, serves fs/* on real files and terminal/* by running the
command. kimi runs offline with its `_scripted_echo` LLM: `kimi acp` takes no options, so the
config goes to `$HOME/.kimi/config.toml`, with a dummy OAuth token file beside it (without one
`session/new` answers AUTH_REQUIRED). Facts: shared/protocol/acp-mcp-peers.md.

What differs between two runs of the same scenario (everything else is frame-for-frame equal):
the ACP sessionId (uuid4), the turn uuid prefix of every toolCallId (`<uuid4>/call-shell-1`, a
new uuid per session/prompt), and absolute paths (session/new cwd, fs paths, diff paths, and the
kimi executable in initialize's authMethods `_meta.terminal-auth.command`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from wire_recorder.recorder.kimi_peer import KimiRun, PeerMissing, clean_env
from sample_sessions.scenarios import (Problems, msg_id, script, shell, text, think, tool_call,
                                      usage)

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
CLIENT_SCRIPT = HERE / "peers" / "acp_client.py"
ENV_ACP_PYTHON = "WIRE_ACP_PYTHON"
DEFAULT_ACP_PYTHON = REPO_ROOT / ".peers" / "acp" / "bin" / "python"
ACP_SDK_VERSION = "0.12.1"

# kimi's ACP server only checks that an access token exists and has not expired (2100-01-01);
# the echo provider never uses it.
CREDENTIALS = {
    "access_token": "offline-dummy",
    "refresh_token": "offline-dummy",
    "expires_at": 4102444800,
    "scope": "",
    "token_type": "Bearer",
    "expires_in": 0,
}


class AcpSdkMissing(PeerMissing):
    """The ACP client SDK venv is not installed where we look for it."""


def find_acp_python() -> Path:
    """The interpreter that has the ACP SDK: $WIRE_ACP_PYTHON, else <repo>/.peers/acp/bin/python."""
    explicit = os.environ.get(ENV_ACP_PYTHON)
    p = Path(explicit).expanduser() if explicit else DEFAULT_ACP_PYTHON
    if p.is_file() and os.access(p, os.X_OK):
        return p  # not resolved: a venv's python is a symlink, resolving it loses the venv
    where = f"${ENV_ACP_PYTHON}={explicit}" if explicit else str(DEFAULT_ACP_PYTHON)
    raise AcpSdkMissing(
        f"ACP client SDK not found: {where} is not an executable file",
        f"install it with `bash scripts/setup-peers` (creates .peers/acp with "
        f"agent-client-protocol=={ACP_SDK_VERSION}), or set {ENV_ACP_PYTHON}=/path/to/python",
    )


# ---------------------------------------------------------------------------------------------
# scratch environment


@dataclass
class AcpRun(KimiRun):
    """Scratch folder for one `kimi acp` run: a KimiRun (HOME, echo scripts, work dir) whose HOME
    also holds what `kimi acp` reads there, since it takes no options: `.kimi/config.toml` and
    the credentials its `session/new` insists on; plus the scenario's files in the work dir.
    Use `AcpRun.create(...)`."""

    @classmethod
    def create(
        cls,
        scripts: Sequence[str],
        files: Mapping[str, str] | None = None,
        *,
        kimi: Path | str | None = None,
        tmp_root: Path | str | None = None,
        max_context_size: int = 100000,
        keep: bool = False,
    ) -> "AcpRun":
        run = super().create(scripts, kimi=kimi, tmp_root=tmp_root,
                             max_context_size=max_context_size, keep=keep)
        kimi_dir = run.home / ".kimi"
        (kimi_dir / "credentials").mkdir(parents=True)
        shutil.copyfile(run.config_path, kimi_dir / "config.toml")
        cred = kimi_dir / "credentials" / "kimi-code.json"
        cred.write_text(json.dumps(CREDENTIALS), encoding="utf-8")
        cred.chmod(0o600)
        for rel, content in (files or {}).items():
            p = run.workdir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(content, encoding="utf-8")
        return run

    def argv(self) -> list[str]:
        return [str(self.kimi), "acp"]

    def agent_env(self) -> dict[str, str]:
        """What the agent (and a proxy in front of it) needs on top of the SDK's trimmed env."""
        return {
            "HOME": str(self.home),
            "KIMI_SCRIPTED_ECHO_SCRIPTS": str(self.scripts_path),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        }

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """Environment for starting `kimi acp` directly (e.g. under wire-replay)."""
        env = clean_env(base)
        env.update(self.agent_env())
        return env


# ---------------------------------------------------------------------------------------------
# scenarios and results

Check = Callable[["AcpResult"], list[str]]


@dataclass
class AcpScenario:
    name: str
    description: str
    scripts: list[str]
    prompts: list[str]
    permissions: list[str]  # approve | reject | approve_for_session | cancelled, in order
    files: dict[str, str] = field(default_factory=dict)  # work dir contents before the run
    check: Check | None = None
    timeout: float = 60.0
    sample: bool = True  # recorded to sample_sessions/NAME.jsonl by record.py (all)
    tags: dict[str, Any] = field(default_factory=dict)
    # a second `kimi acp` process, same HOME and work dir, that session/loads this scenario's
    # session and runs its own prompts with its own scripts (an editor reopening a session)
    then: "AcpScenario | None" = None
    await_commands: float = 5.0  # kimi sends available_commands_update after session/new only


@dataclass
class AcpResult:
    exit_code: int | None  # the client's
    summary: dict[str, Any]
    raw_in: bytes  # exact bytes the client read from the agent's stdout (a2c)
    raw_out: bytes  # exact bytes the client wrote to the agent's stdin (c2a)
    client_stderr: str
    agent_stderr: bytes
    files: dict[str, str]  # work dir files after the run (relative path -> text)
    timed_out: bool = False
    context: dict[str, Any] = field(default_factory=dict)

    @property
    def prompts(self) -> list[dict[str, Any]]:
        return self.summary.get("prompts", [])

    @staticmethod
    def _lines(raw: bytes) -> list[bytes]:
        parts = raw.split(b"\n")
        if parts and parts[-1] == b"":
            parts.pop()
        return parts

    def received(self) -> list[dict[str, Any]]:
        """Decoded agent->client messages, in order."""
        return [json.loads(x) for x in self._lines(self.raw_in) if x.strip()]

    def sent(self) -> list[dict[str, Any]]:
        """Decoded client->agent messages, in order."""
        return [json.loads(x) for x in self._lines(self.raw_out) if x.strip()]

    def received_lines(self) -> list[bytes]:
        return self._lines(self.raw_in)

    def sent_lines(self) -> list[bytes]:
        return self._lines(self.raw_out)


def _plan(scenario: AcpScenario, run: AcpRun, load_session: str | None = None) -> dict[str, Any]:
    return {
        "load_session": load_session,
        "cwd": str(run.workdir),
        "prompts": list(scenario.prompts),
        "permissions": list(scenario.permissions),
        "env": run.agent_env(),
        "timeout": scenario.timeout,
        "await_commands": 0 if load_session else scenario.await_commands,
        "client_info": {"name": "wire-recorder-acp-client", "version": "1"},
    }


def run_acp_scenario(
    scenario: AcpScenario,
    command_prefix: Sequence[str] = (),
    *,
    kimi: Path | str | None = None,
    acp_python: Path | str | None = None,
    scripts: Sequence[str] | None = None,
    tmp_root: Path | str | None = None,
    keep: bool = False,
    agent: Sequence[str] | None = None,
    run: AcpRun | None = None,
    load_session: str | None = None,
) -> AcpResult:
    """Run one scenario: fresh scratch HOME/work dir, client -> `command_prefix + [kimi, acp]`.

    `scripts` replaces the scenario's echo scripts; `agent` replaces the whole agent command
    (e.g. `wire-replay REC --serve`, a stand-in for kimi). `result.context` gets scenario, home,
    workdir, argv (the dirs are deleted afterwards unless keep=True). `run` reuses a scratch
    folder (its HOME keeps kimi's sessions: the caller cleans it up), for `load_session`, which
    makes the client send session/load of that id instead of session/new. Raises PeerMissing
    when kimi or the ACP SDK cannot be found.
    """
    py = Path(acp_python) if acp_python is not None else find_acp_python()
    own_run = run is None
    if run is None:
        run = AcpRun.create(scenario.scripts if scripts is None else scripts, scenario.files,
                            kimi=kimi, tmp_root=tmp_root, keep=keep)
    try:
        plan_path = run.root / "plan.json"
        plan_path.write_text(json.dumps(_plan(scenario, run, load_session), indent=1),
                             encoding="utf-8")
        out = {k: run.root / f"client.{k}" for k in ("summary", "raw-in", "raw-out", "agent-stderr")}
        agent_argv = list(map(str, agent)) if agent is not None else \
            [*map(str, command_prefix), *run.argv()]
        argv = [str(py), str(CLIENT_SCRIPT), str(plan_path),
                *(x for k, p in out.items() for x in (f"--{k}", str(p))), "--", *agent_argv]
        timed_out = False
        try:
            proc = subprocess.run(argv, env=run.env(), cwd=run.workdir, capture_output=True, check=False,
                                  timeout=scenario.timeout + 120)
            rc, err = proc.returncode, proc.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as e:
            timed_out, rc = True, None
            err = (e.stderr or b"").decode("utf-8", "replace")

        def read(k: str) -> bytes:
            return out[k].read_bytes() if out[k].exists() else b""

        summary = json.loads(read("summary") or b"{}")
        files = {}
        for p in sorted(run.workdir.rglob("*")):
            if p.is_file():
                try:
                    files[str(p.relative_to(run.workdir))] = p.read_text(encoding="utf-8")
                except UnicodeDecodeError:
                    files[str(p.relative_to(run.workdir))] = "<binary>"
        return AcpResult(
            exit_code=rc,
            summary=summary,
            raw_in=read("raw-in"),
            raw_out=read("raw-out"),
            client_stderr=err,
            agent_stderr=read("agent-stderr"),
            files=files,
            timed_out=timed_out,
            context={"scenario": scenario.name, "home": str(run.home), "workdir": str(run.workdir),
                     "argv": argv, "agent_argv": agent_argv},
        )
    finally:
        if own_run:
            run.cleanup()


def run_acp_chain(scenario: AcpScenario, command_prefix: Sequence[str] = (), *,
                  kimi: Path | str | None = None, acp_python: Path | str | None = None,
                  tmp_root: Path | str | None = None) -> list[AcpResult]:
    """`scenario`, then each `then` in a new agent process that session/loads the first one's
    session (same HOME, so kimi finds it; same work dir). One result per agent process."""
    run = AcpRun.create(scenario.scripts, scenario.files, kimi=kimi, tmp_root=tmp_root)
    try:
        results = [run_acp_scenario(scenario, command_prefix, acp_python=acp_python, run=run)]
        sid = results[0].summary.get("sessionId")
        step = scenario.then
        while step is not None and sid:
            run.write_scripts(step.scripts)
            results.append(run_acp_scenario(step, command_prefix, acp_python=acp_python,
                                            run=run, load_session=sid))
            step = step.then
        return results
    finally:
        run.cleanup()


def check_acp_chain(scenario: AcpScenario, results: list[AcpResult]) -> list[str]:
    problems, step = [], scenario
    for i, r in enumerate(results):
        problems += [f"{step.name}: {p}" if i else p for p in check_acp_scenario(step, r)]
        step = step.then
    if step is not None:
        problems.append(f"{step.name} did not run (no session id from the run before)")
    return problems


# ---------------------------------------------------------------------------------------------
# checks


def generic_problems(scenario: AcpScenario, r: AcpResult) -> list[str]:
    p = Problems()
    p.expect(not r.timed_out, "hard timeout (client killed)")
    p.expect(r.exit_code == 0, f"client exit code {r.exit_code}: {r.client_stderr.strip()[-500:]}")
    p.extend(f"client: {x}" for x in r.summary.get("problems", []))
    p.expect(r.summary.get("agent_exit_code") == 0, f"agent exit code {r.summary.get('agent_exit_code')}")
    p.expect(len(r.prompts) == len(scenario.prompts),
             f"{len(r.prompts)} of {len(scenario.prompts)} prompts ran")
    for i, ph in enumerate(r.prompts, 1):
        p.expect(ph.get("stopReason"), f"prompt {i}: no stopReason")
    try:
        received, sent = r.received(), r.sent()
    except ValueError as e:
        p.append(f"non-JSON line on the wire: {e}")
        return list(p)
    p.expect(all(b.endswith(b"}") for b in r.received_lines() + r.sent_lines()), "a frame is not one JSON line")
    # every request either way got exactly one response with its (per-direction) id
    for reqs, answers, who in ((received, sent, "agent"), (sent, received, "client")):
        asked = [m["id"] for m in reqs if "method" in m and "id" in m]
        answered = [m["id"] for m in answers if "method" not in m and "id" in m]
        p.expect(sorted(asked) == sorted(answered), f"{who} requests {asked} vs answers {answered}")
    return list(p)


def check_acp_scenario(scenario: AcpScenario, result: AcpResult) -> list[str]:
    """Generic + scenario-specific problems; [] when the run produced the intended exchange."""
    problems = generic_problems(scenario, result)
    if scenario.check is not None and result.summary:
        try:
            problems += scenario.check(result)
        except Exception as e:  # a check tripping over a missing item is a failed check
            problems.append(f"check raised {type(e).__name__}: {e}")
    return problems


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
