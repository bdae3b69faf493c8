"""Record a named scenario (Wire, ACP or MCP) from the real peers through the real wire-proxy,
check it, and export its transcript; sample_sessions/record.py is the command line over this."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from sample_sessions.acp_scenarios import ACP_SCENARIOS
from sample_sessions.mcp_scenarios import MCP_SCENARIOS
from sample_sessions.scenarios import SCENARIOS
from tests.harness.acp import check_acp_chain, run_acp_chain
from tests.harness.mcp import check_mcp_scenario, run_mcp_scenario
from tests.harness.wire import check_scenario, run_scenario
from wire_recorder.recorder.handoff import wait_for_loaders
from wire_recorder.recorder.store import open_store
from wire_recorder.recorder.transcript import Aliases, write_transcript

WIRE_PROXY = str(Path(sys.executable).parent / "wire-proxy")


def proxy_prefix(name: str, db: str, protocol: str | None = None) -> list[str]:
    """`wire-proxy ... --` recording scenario `name` into db, tagged with its name."""
    prefix = [WIRE_PROXY, "-q", "--db", db, "--name", name, "--tag", f"scenario={name}"]
    if protocol:
        prefix += ["--protocol", protocol]
    return prefix + ["--"]


def _slow(scenario, start_up: float):
    """`scenario` with `start_up` more seconds for its client: an agent starting slowly (a busy
    machine) is waited for, while one that dies is still seen at once (its output closes)."""
    if not start_up:
        return scenario
    more: dict = {"timeout": scenario.timeout + start_up}
    plan = getattr(scenario, "plan", None)
    if plan is not None and hasattr(plan, "init_timeout"):  # Wire: the wait for initialize
        more["plan"] = dataclasses.replace(plan, init_timeout=plan.init_timeout + start_up)
    if getattr(scenario, "then", None) is not None:  # ACP: the agent process that reloads it
        more["then"] = _slow(scenario.then, start_up)
    if getattr(scenario, "era", None) == "2026":  # MCP: the SDK's wait for server/discover
        more["client_args"] = (*scenario.client_args, "--discover-timeout", f"{10 + start_up:g}")
    return dataclasses.replace(scenario, **more)


def record(name: str, db: str, out_dir: Path | None = None,
           protocol: str | None = None, start_up: float = 0.0,
           loader_wait: float | None = None) -> tuple[str, list[str]]:
    """Record one scenario into db (appending a session); return (session id, problems). With
    out_dir, also write its transcript there as NAME.jsonl. `start_up`: seconds more for a slow
    agent start; `loader_wait`: how long to wait for an earlier session's loader to let go of
    db (a client that gave up leaves one storing what it had)."""
    prefix = proxy_prefix(name, db, protocol)
    wait_for_loaders(db, loader_wait)
    mcp = None
    runs = 1  # agent processes, each a session
    if name in ACP_SCENARIOS:  # `kimi acp` driven by the ACP SDK client
        acp_scenario = _slow(ACP_SCENARIOS[name], start_up)
        results = run_acp_chain(acp_scenario, prefix)
        runs = len(results)
        problems = check_acp_chain(acp_scenario, results)
    elif name in MCP_SCENARIOS:  # checked against the recorded frames below
        mcp_scenario = _slow(MCP_SCENARIOS[name], start_up)
        mcp = (mcp_scenario, run_mcp_scenario(mcp_scenario, prefix))
    else:
        scenario = _slow(SCENARIOS[name], start_up)
        problems = check_scenario(scenario, run_scenario(scenario, prefix))
    wait_for_loaders(db, loader_wait)  # the proxy exits before its loader has stored the session
    with open_store(db, read_only=True) as store:
        sessions = [s for s in store.sessions() if s["name"] == name]
        if not sessions:
            stderr = mcp[1].stderr.strip()[-500:] if mcp else ""
            return "", [f"no session recorded; client stderr: {stderr}"]
        session = sessions[-1]
        if mcp is not None:
            problems = check_mcp_scenario(*mcp, frames=store.frames(session["session_id"]))
        if out_dir is not None:
            # one alias table for both files, so that the session id the second one reopens has
            # the same placeholder in each; the main file first, numbered as it alone would be
            aliases = Aliases()
            with open(out_dir / f"{name}.jsonl", "wb") as f:
                write_transcript(store, session["session_id"], f, aliases)
            if runs == 2:  # the session the last one reopens (ACP session/load)
                with open(out_dir / f"{name}.origin.jsonl", "wb") as f:
                    write_transcript(store, sessions[-2]["session_id"], f, aliases)
    return session["session_id"], problems
