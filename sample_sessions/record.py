"""Record the sample sessions from the real peers, through the real proxy.

    .venv/bin/python sample_sessions/record.py            # every scenario -> sample_sessions/NAME.jsonl
    .venv/bin/python sample_sessions/record.py approve_shell --db demo.db   # one, keep its .db
    .venv/bin/python sample_sessions/record.py acp_tools     # ACP: kimi acp + the ACP SDK client
    .venv/bin/python sample_sessions/record.py mcp_demo_2026 # MCP: an mcp SDK client and server

Each Wire scenario runs kimi-cli 1.51.0 with its `_scripted_echo` LLM behind `wire-proxy`; ACP
scenarios (sample_sessions/acp_scenarios.py) drive `kimi acp` with the ACP SDK client; MCP
scenarios (sample_sessions/mcp_scenarios.py) run an mcp SDK client against an MCP server. Each is
checked (the intended requests and answers happened; for MCP also the recorded frames), and is
exported as a text transcript, so a reviewer reads a re-recording as a diff (a scenario that
reopens its session in a second agent process, like acp_load, also writes NAME.origin.jsonl).
`wire-import sample_sessions/*.jsonl --db all.db` gives a DuckDB file. Needs the peer venvs from
`bash scripts/setup-peers`. The proxy detects the protocol itself unless `--protocol` is given.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from wire_recorder.recorder import protocols  # noqa: E402
from wire_recorder.recorder.errors import UserError  # noqa: E402
from wire_recorder.recorder.store import open_store  # noqa: E402
from wire_recorder.recorder.transcript import write_transcript  # noqa: E402
from sample_sessions.acp_scenarios import (  # noqa: E402
    ACP_SCENARIOS, check_acp_chain, run_acp_chain)
from sample_sessions.mcp_scenarios import (  # noqa: E402
    MCP_SCENARIOS, check_mcp_scenario, run_mcp_scenario)
from sample_sessions.scenarios import SCENARIOS, check_scenario, run_scenario  # noqa: E402

WIRE_PROXY = str(Path(sys.executable).parent / "wire-proxy")


def proxy_prefix(name: str, db: str, protocol: str | None = None) -> list[str]:
    """`wire-proxy ... --` recording scenario `name` into db, tagged with its name."""
    prefix = [WIRE_PROXY, "-q", "--db", db, "--name", name, "--tag", f"scenario={name}"]
    if protocol:
        prefix += ["--protocol", protocol]
    return prefix + ["--"]


def record(name: str, db: str, out_dir: Path | None = HERE,
           protocol: str | None = None) -> tuple[str, list[str]]:
    """Record one scenario into db (appending a session); return (session id, problems)."""
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
            with open(out_dir / f"{name}.jsonl", "wb") as f:
                write_transcript(store, session["session_id"], f)
            if runs == 2:  # the session the last one reopens (ACP session/load)
                with open(out_dir / f"{name}.origin.jsonl", "wb") as f:
                    write_transcript(store, sessions[-2]["session_id"], f)
    return session["session_id"], problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    known = [*SCENARIOS, *ACP_SCENARIOS, *MCP_SCENARIOS]
    ap.add_argument("names", nargs="*", help=f"scenarios (default: all but variants): {', '.join(known)}")
    ap.add_argument("--db", help="also keep the recording in this DuckDB file")
    ap.add_argument("--no-transcript", action="store_true", help="do not write sample_sessions/*.jsonl")
    ap.add_argument("--protocol", choices=protocols.names(),
                    help="pass --protocol to wire-proxy (default: detect)")
    args = ap.parse_args(argv)
    names = args.names or [*SCENARIOS, *(n for n, sc in ACP_SCENARIOS.items() if sc.sample),
                           *MCP_SCENARIOS]
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"record.py: unknown scenario {unknown[0]!r}; known: {', '.join(known)}",
              file=sys.stderr)
        return 2
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.abspath(args.db) if args.db else os.path.join(tmp, "samples.db")
        for name in names:
            try:
                sid, problems = record(name, db, None if args.no_transcript else HERE,
                                       args.protocol)
            except UserError as e:  # a missing peer too
                print(f"record.py: {name}: {e.one_line()}", file=sys.stderr)
                return 2
            status = "ok" if not problems else "PROBLEMS: " + "; ".join(problems)
            failed += bool(problems)
            print(f"{name:22} session {sid}  {status}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
