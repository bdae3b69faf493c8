"""ACP sessions against the real agent: `kimi acp` driven by the official ACP SDK client.

    from sample_sessions.acp_scenarios import ACP_SCENARIOS
    from tests.harness.acp import check_acp_scenario, run_acp_scenario
    sc = ACP_SCENARIOS["acp_tools"]
    result = run_acp_scenario(sc)                                              # kimi directly
    result = run_acp_scenario(sc, ["wire-proxy", "-q", "--db", db, "--"])     # through the proxy
    assert check_acp_scenario(sc, result) == []

The client is `tests/harness/sdk/acp_client.py`, run with the ACP SDK's own interpreter
(`.peers/acp/bin/python`, agent-client-protocol 0.12.1; `$WIRE_ACP_PYTHON` overrides it). It
spawns `command_prefix + [kimi, "acp"]`, advertises fs read/write and terminal, answers
permissions from the scenario's list, serves fs/* on real files and terminal/* by running the
command. kimi runs offline with its `_scripted_echo` LLM: `kimi acp` takes no options, so the
config goes to `$HOME/.kimi/config.toml`, with a dummy OAuth token file beside it (without one
`session/new` answers AUTH_REQUIRED).

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness.kimi_peer import KimiRun, clean_env
from tests.harness.peers import find_acp_python
from tests.harness.wire import Problems

CLIENT_SCRIPT = Path(__file__).resolve().parent / "sdk" / "acp_client.py"

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


# ---------------------------------------------------------------------------------------------
# scratch environment


@dataclass
class AcpRun(KimiRun):
    """Scratch folder for one `kimi acp` run: a KimiRun (HOME, echo scripts, work dir) whose HOME
    also holds what `kimi acp` reads there, since it takes no options: `.kimi/config.toml` and
    the credentials its `session/new` insists on; plus the scenario's files in the work dir.
    Use `AcpRun.create(...)`."""

    @classmethod
    def create(  # type: ignore[override]  # an ACP run has files, and no session id to resume
        cls,
        scripts: Sequence[str],
        files: Mapping[str, str] | None = None,
        *,
        kimi: Path | str | None = None,
        tmp_root: Path | str | None = None,
        max_context_size: int = 100000,
        keep: bool = False,
    ) -> AcpRun:
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

    def argv(self, *, session_id: str | None = None, extra: Sequence[str] = ()) -> list[str]:
        """`[kimi, acp]`: the client picks the session (session/load), not the command line."""
        return [str(self.kimi), "acp", *extra]

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

Check = Callable[["AcpResult"], list[str]]  # a scenario's own check: its problems, [] when fine


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
    then: AcpScenario | None = None
    await_commands: float = 5.0  # kimi sends available_commands_update after session/new only
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)  # session/new mcpServers


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
        "mcp_servers": scenario.mcp_servers,
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
    problems: list[str] = []
    step: AcpScenario | None = scenario
    for i, r in enumerate(results):
        assert step is not None  # one result per scenario of the chain, never more
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
