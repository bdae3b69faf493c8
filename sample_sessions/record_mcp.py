"""Record the MCP sample sessions between the real SDKs, through the real proxy.

    .venv/bin/python sample_sessions/record_mcp.py                 # every scenario -> sample_sessions/NAME.jsonl
    .venv/bin/python sample_sessions/record_mcp.py mcp_demo_2026 --db demo.db   # one, keep its .db

Each scenario (sample_sessions/mcp_scenarios.py) runs an mcp SDK client against an MCP server
with `wire-proxy` in between, is checked (client summary and the recorded frames), and is
exported as a text transcript. Needs the peer venvs from `bash scripts/setup-peers`. The proxy
detects the protocol itself unless `--protocol mcp` is given.
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

from recorder.errors import UserError  # noqa: E402
from recorder.store import open_store  # noqa: E402
from recorder.transcript import write_transcript  # noqa: E402
from sample_sessions.mcp_scenarios import (  # noqa: E402
    MCP_SCENARIOS,
    McpPeerMissing,
    McpResult,
    check_mcp_scenario,
    run_mcp_scenario,
)

WIRE_PROXY = str(Path(sys.executable).parent / "wire-proxy")


def proxy_prefix(name: str, db: str, protocol: str | None = None) -> list[str]:
    prefix = [WIRE_PROXY, "-q", "--db", db, "--name", name, "--tag", f"scenario={name}"]
    if protocol:
        prefix += ["--protocol", protocol]
    return prefix + ["--"]


def record(name: str, db: str, out_dir: Path | None = HERE,
           protocol: str | None = None) -> tuple[str, list[str], McpResult]:
    """Record one scenario into db (appending a session); return (session id, problems, result)."""
    scenario = MCP_SCENARIOS[name]
    result = run_mcp_scenario(scenario, proxy_prefix(name, db, protocol))
    with open_store(db, read_only=True) as store:
        sessions = [s for s in store.sessions() if s["name"] == name]
        if not sessions:
            return "", [f"no session recorded; client stderr: {result.stderr.strip()[-500:]}"], result
        session = sessions[-1]
        problems = check_mcp_scenario(scenario, result, frames=store.frames(session["session_id"]))
        if out_dir is not None:
            with open(out_dir / f"{name}.jsonl", "wb") as f:
                write_transcript(store, session["session_id"], f)
    return session["session_id"], problems, result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"scenarios (default: all): {', '.join(MCP_SCENARIOS)}")
    ap.add_argument("--db", help="also keep the recording in this DuckDB file")
    ap.add_argument("--no-transcript", action="store_true", help="do not write sample_sessions/*.jsonl")
    ap.add_argument("--protocol", choices=["mcp"], help="pass --protocol to wire-proxy (default: detect)")
    args = ap.parse_args(argv)
    names = args.names or list(MCP_SCENARIOS)
    unknown = [n for n in names if n not in MCP_SCENARIOS]
    if unknown:
        print(f"record_mcp.py: unknown scenario {unknown[0]!r}; known: {', '.join(MCP_SCENARIOS)}",
              file=sys.stderr)
        return 2
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.abspath(args.db) if args.db else os.path.join(tmp, "samples.db")
        for name in names:
            try:
                sid, problems, _ = record(name, db, None if args.no_transcript else HERE, args.protocol)
            except (UserError, McpPeerMissing) as e:
                print(f"record_mcp.py: {name}: {e.one_line()}", file=sys.stderr)
                return 2
            status = "ok" if not problems else "PROBLEMS: " + "; ".join(problems)
            failed += bool(problems)
            print(f"{name:18} session {sid}  {status}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
