"""Record the Kimi Code 2.x sample session from the real peer, through the real proxy.

    .venv/bin/python sample_sessions/record_kimicode.py             # -> sample_sessions/kimicode_tools.jsonl
    .venv/bin/python sample_sessions/record_kimicode.py --db kc.db  # also keep the recording

Kimi Code CLI 2.1.0 (`<node22> <main.mjs> acp`, installed by `bash scripts/setup-peers` into
.peers/kimicode) runs offline against our streaming model server on 127.0.0.1, driven by the ACP
SDK client, behind `wire-proxy` with default redaction: the session of
tests/harness/kimicode_session.py (text; a permission-gated Bash through terminal/*; a Read
through fs/*, then the AGENTS.md probes; text). The run is checked, then exported as a text
transcript, so a reviewer reads a re-recording as a diff. Kimi Code has no scripted model, so
this sample is not in sample_sessions/acp_scenarios.py (whose samples tests replay against
kimi-cli's `kimi acp`).
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

from tests.harness.acp import check_acp_scenario  # noqa: E402
from tests.harness.kimicode_session import SCENARIO, record_kimicode  # noqa: E402
from tests.harness.peers import PeerMissing  # noqa: E402
from wire_recorder.recorder.store import open_store  # noqa: E402
from wire_recorder.recorder.transcript import Aliases, write_transcript  # noqa: E402

NAME = SCENARIO.name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="also keep the recording in this DuckDB file")
    ap.add_argument("--out", default=str(HERE / f"{NAME}.jsonl"), help="the transcript to write")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.abspath(args.db) if args.db else os.path.join(tmp, "kimicode.db")
        try:
            result, _ = record_kimicode(db, tmp, name=NAME)
        except PeerMissing as e:
            print(f"record_kimicode.py: {e.one_line()}", file=sys.stderr)
            return 2
        problems = check_acp_scenario(SCENARIO, result)
        with open_store(db, read_only=True) as store:
            sessions = [s for s in store.sessions() if s["name"] == NAME]
            with open(args.out, "wb") as f:
                write_transcript(store, sessions[-1]["session_id"], f, Aliases())
    status = "ok" if not problems else "PROBLEMS: " + "; ".join(problems)
    print(f"{NAME:22} -> {args.out}  {status}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
