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
# Run as a script, this file gets only sample_sessions/ on sys.path; the scenario tables
# (sample_sessions.*) and the machinery that records them (tests.harness.*) are imported from the
# repository root.
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sample_sessions.acp_scenarios import ACP_SCENARIOS  # noqa: E402
from sample_sessions.mcp_scenarios import MCP_SCENARIOS  # noqa: E402
from sample_sessions.scenarios import SCENARIOS  # noqa: E402
from tests.harness.peers import PeerMissing  # noqa: E402
from tests.harness.recording import record  # noqa: E402
from wire_recorder.recorder import protocols  # noqa: E402
from wire_recorder.recorder.errors import UserError  # noqa: E402

# A busy machine: kimi may take a minute or more to answer initialize (docs/replay.md,
# --startup-timeout, is the same rule for a replay); and the loader of a session whose client
# gave up may still hold the file when the next scenario starts.
START_UP_S = 300.0
LOADER_WAIT_S = 600.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    known = [*SCENARIOS, *ACP_SCENARIOS, *MCP_SCENARIOS]
    ap.add_argument("names", nargs="*", help=f"scenarios (default: all but variants): {', '.join(known)}")
    ap.add_argument("--db", help="also keep the recording in this DuckDB file")
    ap.add_argument("--no-transcript", action="store_true", help="do not write sample_sessions/*.jsonl")
    ap.add_argument("--protocol", choices=protocols.names(),
                    help="pass --protocol to wire-proxy (default: detect)")
    ap.add_argument("--start-up", type=float, default=START_UP_S, metavar="SECONDS",
                    help="seconds more each client waits for a slow agent start (a busy "
                         f"machine; default {START_UP_S:g}): an agent that dies is seen at once")
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
            # one scenario that fails (a client that gave up, a file still held) is reported
            # and the others are still recorded
            try:
                sid, problems = record(name, db, None if args.no_transcript else HERE,
                                       args.protocol, start_up=args.start_up,
                                       loader_wait=LOADER_WAIT_S)
            except PeerMissing as e:
                print(f"record.py: {name}: {e.one_line()}", file=sys.stderr)
                return 2
            except UserError as e:
                sid, problems = "-", [e.one_line()]
            status = "ok" if not problems else "PROBLEMS: " + "; ".join(problems)
            failed += bool(problems)
            print(f"{name:22} session {sid}  {status}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
