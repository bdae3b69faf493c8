"""Kimi Code's session (tests/harness/kimicode_session.py) recorded with `wire-proxy --llm`
against the streaming model server in either dialect, then replayed from the recorded leg twice
at once: with the work dir as recorded (green) and with an AGENTS.md added (red). What
tests/test_llm_leg_kimicode.py (OpenAI's dialect) and tests/test_llm_leg_anthropic.py
(Anthropic's) share.

    result, model, db, run, runs, root, config = record_and_replay(acp_python, root, TURNS)
    runs["green"], runs["agents_md"]      # wire-replay --json, completed
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.harness.acp import AcpResult, run_acp_scenario
from tests.harness.kimicode import KimiCodeRun, clean_env, config_toml, find_kimicode
from tests.harness.kimicode_session import NOTES, SCENARIO
from tests.harness.model_server import StreamingModel
from tests.harness.peers import need
from tests.harness.replay import parallel

BIN = Path(sys.executable).parent
AGENTS_MD = "# Rules\n\nAnswer in one line.\n"


def replay_from_leg(db: Path, argv: list[str], root: Path,
                    files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """wire-replay --json with only the agent command, a fresh empty HOME, a fresh work dir."""
    home, work = root / "home", root / "work"
    home.mkdir(parents=True)
    work.mkdir()
    for rel, text in files.items():
        (work / rel).write_text(text, encoding="utf-8")
    env = clean_env()
    env.update({"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    return subprocess.run([str(BIN / "wire-replay"), "--json", str(db), "--", *argv], env=env,
                          capture_output=True, text=True, timeout=1200, cwd=str(work))


def record_and_replay(acp_python: Path, root: Path, turns: list[dict[str, Any]],
                      dialect: str = "openai",
                      before: Callable[[KimiCodeRun], None] | None = None) -> tuple[AcpResult, StreamingModel, Path,
                                                        KimiCodeRun, dict[str, Any], Path,
                                                        str]:
    """Record the session into root/kc.db (the model server stopped afterwards), then replay
    it green and red side by side, each in its own folder under root. `before` may prepare the
    user's HOME before the session."""
    node, main = need(find_kimicode, "Kimi Code")
    db = root / "kc.db"
    run = KimiCodeRun.create(files=SCENARIO.files, tmp_root=root, keep=True)
    if before is not None:
        before(run)
    with StreamingModel(turns, dialect=dialect) as model:
        config = config_toml(model.base_url, model.key, model.model, provider_type=dialect)
        run.config_path.write_text(config, encoding="utf-8")
        result = run_acp_scenario(SCENARIO, [str(BIN / "wire-proxy"), "-q", "--llm", "--db",
                                             str(db), "--"], acp_python=acp_python, run=run)
    argv = [str(node), str(main), "acp"]
    cases = [("green", {"notes.txt": NOTES}),
             ("agents_md", {"notes.txt": NOTES, "AGENTS.md": AGENTS_MD})]
    runs = dict(parallel(lambda c: (c[0], replay_from_leg(db, argv, root / c[0], c[1])), cases,
                         workers=2))
    return result, model, db, run, runs, root, config
