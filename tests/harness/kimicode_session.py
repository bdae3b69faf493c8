"""The Kimi Code 2.x session the suite records (issue 29): a prompt answered with text, then a
prompt whose model runs a permission-gated `Bash` (through the client's terminal/*) and a `Read`
(through fs/read_text_file, after which Kimi Code probes AGENTS.md), then text. The model is our
streaming server on 127.0.0.1 (tests/harness/model_server.py) with this script; the client is
the official ACP SDK client (tests/harness/sdk/acp_client.py), answering `approve_once`.

    from tests.harness.kimicode_session import record_kimicode
    result, model = record_kimicode(db, tmp_root)     # through wire-proxy into db
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.harness.acp import AcpResult, AcpScenario, run_acp_scenario
from tests.harness.kimicode import KimiCodeRun
from tests.harness.model_server import StreamingModel, answer, call

WIRE_PROXY = str(Path(sys.executable).parent / "wire-proxy")
NOTES = "alpha\nbeta\ngamma\n"
PROMPTS = ["Say hello.", "Run echo hi into out.txt, then read notes.txt."]
BASH_COMMAND = "echo hi > out.txt && cat out.txt"
# (prompt tokens, completion tokens, cached): usage_update's `used` is the last call's sum
TURNS: list[dict[str, Any]] = [
    answer(text=["Hello ", "there."], usage=(900, 5, 0)),
    answer(text=["Running it."], usage=(1000, 20, 0),
           calls=[call("call_bash_1", "Bash", ['{"command": "echo hi', ' > out.txt && cat out.txt"}'])]),
    answer(usage=(1100, 10, 0), calls=[call("call_read_1", "Read", ['{"path": "no', 'tes.txt"}'])]),
    answer(text=["Done: ", "notes read."], usage=(1200, 8, 0)),
]
SCENARIO = AcpScenario(
    name="kimicode_tools",
    description="Kimi Code 2.1.0: text; Bash via terminal/* after approve_once; Read via fs/*",
    scripts=[], prompts=PROMPTS, permissions=["approve_once"], files={"notes.txt": NOTES},
    timeout=300.0, await_commands=0)


def record_kimicode(db: Path | str | None, tmp_root: Path | str, *,
                    name: str = "kimicode_tools",
                    extra: tuple[str, ...] = ()) -> tuple[AcpResult, StreamingModel]:
    """Run the session (through `wire-proxy --db db` when db is given); the model server is
    stopped when this returns, its requests kept."""
    with StreamingModel(TURNS) as model:
        run = KimiCodeRun.create(model, SCENARIO.files, tmp_root=tmp_root)
        try:
            prefix = [WIRE_PROXY, "-q", "--db", str(db), "--name", name, *extra, "--"] \
                if db is not None else []
            result = run_acp_scenario(SCENARIO, prefix, run=run)  # type: ignore[arg-type]
        finally:
            run.cleanup()
    return result, model
