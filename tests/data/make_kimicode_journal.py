"""Re-make tests/data/kimicode_sessions: one real Kimi Code session (tests/test_import_kimicode.py's
PROMPTS against its scripted model) run offline, its journal copied with the scratch paths
replaced by /home/user ones. Run from the repo root: .venv/bin/python tests/data/make_kimicode_journal.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.test_import_kimicode import FIXTURE, run_session  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = run_session(Path(tmp) / "run")
        session: Path = out["session"]
        swaps = [(str(out["work"]), "/home/user/work"), (str(out["home"]), "/home/user")]
        shutil.rmtree(FIXTURE, ignore_errors=True)
        dst = FIXTURE / session.parent.name / session.name
        for src in [session / "state.json", *sorted(session.glob("agents/*/wire.jsonl"))]:
            text = src.read_text(encoding="utf-8")
            for a, b in swaps:
                text = text.replace(a, b)
            target = dst / src.relative_to(session)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            print(target, len(text))


if __name__ == "__main__":
    main()
