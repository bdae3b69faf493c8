"""Record a named scenario (Wire, ACP or MCP) from the real peers through the real wire-proxy,
check it, and export its transcript; sample_sessions/record.py is the command line over this."""

from __future__ import annotations

import sys
from pathlib import Path

from sample_sessions.acp_scenarios import ACP_SCENARIOS
from sample_sessions.mcp_scenarios import MCP_SCENARIOS
from sample_sessions.scenarios import SCENARIOS
from tests.harness.acp import check_acp_chain, run_acp_chain
from tests.harness.mcp import check_mcp_scenario, run_mcp_scenario
from tests.harness.wire import check_scenario, run_scenario
from wire_recorder.recorder.store import open_store
from wire_recorder.recorder.transcript import Aliases, write_transcript

WIRE_PROXY = str(Path(sys.executable).parent / "wire-proxy")


def proxy_prefix(name: str, db: str, protocol: str | None = None) -> list[str]:
    """`wire-proxy ... --` recording scenario `name` into db, tagged with its name."""
    prefix = [WIRE_PROXY, "-q", "--db", db, "--name", name, "--tag", f"scenario={name}"]
    if protocol:
        prefix += ["--protocol", protocol]
    return prefix + ["--"]


def record(name: str, db: str, out_dir: Path | None = None,
           protocol: str | None = None) -> tuple[str, list[str]]:
    """Record one scenario into db (appending a session); return (session id, problems). With
    out_dir, also write its transcript there as NAME.jsonl."""
    prefix = proxy_prefix(name, db, protocol)
    mcp = None
    runs = 1  # agent processes, each a session
    if name in ACP_SCENARIOS:  # `kimi acp` driven by the ACP SDK client
        acp_scenario = ACP_SCENARIOS[name]
        results = run_acp_chain(acp_scenario, prefix)
        runs = len(results)
        problems = check_acp_chain(acp_scenario, results)
    elif name in MCP_SCENARIOS:  # checked against the recorded frames below
        mcp = (MCP_SCENARIOS[name], run_mcp_scenario(MCP_SCENARIOS[name], prefix))
    else:
        scenario = SCENARIOS[name]
        problems = check_scenario(scenario, run_scenario(scenario, prefix))
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
