"""`wire-proxy --llm -- kimi acp`: the real kimi-cli over ACP recorded with its model leg
against the streaming model server, then replayed from the recorded leg with the upstream
stopped (green), and with an AGENTS.md added (red, naming the system prompt)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.harness.acp import AcpRun, AcpScenario, run_acp_scenario
from tests.harness.llm_leg import exchanges
from tests.harness.model_server import StreamingModel, answer, call, failure
from tests.harness.replay import WIRE_PROXY, parallel, run_cli


@pytest.fixture(scope="module")
def acp_leg(kimi_exe, tmp_path_factory):
    root = tmp_path_factory.mktemp("llm-leg-acp")
    run = AcpRun.create([], {"a.txt": "alpha line one\n"}, kimi=kimi_exe, tmp_root=root,
                        keep=True)
    work = str(run.workdir)
    model = StreamingModel([
        answer(think=["Reading."], text=["Reading ", "a.txt"],
               calls=[call("call-1", "ReadFile", ['{"path": "' + work[:-2], work[-2:] + '/a.txt"}'])],
               usage=(900, 40, 300), message_id="m-1"),
        failure(503, "overloaded"),
        answer(text=["It says alpha."], usage=(1000, 10, 900), message_id="m-2")])
    scenario = AcpScenario(name="leg", description="", scripts=[], prompts=["Read a.txt"],
                           permissions=[], timeout=600)
    db = root / "acp.db"
    with model:
        (run.home / ".kimi" / "config.toml").write_text(model.config_toml(), encoding="utf-8")
        result = run_acp_scenario(scenario, [WIRE_PROXY, "-q", "--llm", "--wait", "60", "--db",
                                             str(db), "--"], run=run)
    agents_md = root / "work-agents-md"
    shutil.copytree(run.workdir, agents_md)
    (agents_md / "AGENTS.md").write_text("# Rules\n\nAnswer in one line.\n", encoding="utf-8")

    def replay(case: tuple[str, str]):
        name, cwd = case
        home = root / f"home-{name}"
        shutil.copytree(run.home, home)  # kimi acp reads its config and login from HOME
        return name, run_cli(["--json", db, "--", run.kimi, "acp"], timeout=1200,
                             env={"HOME": str(home)}, cwd=cwd)

    runs = dict(parallel(replay, [("green", work), ("agents_md", str(agents_md))], workers=2))
    return result, model, db, runs


def test_kimi_acp_records_its_model_leg(acp_leg):
    result, model, db, _ = acp_leg
    assert result.exit_code == 0, result.client_stderr[-2000:]
    assert len(model.requests) == 3
    ex = exchanges(db)
    assert [e["response"]["status"] for e in ex] == [200, 503, 200]
    assert model.key.encode() not in db.read_bytes()


def test_kimi_acp_replays_green_from_its_leg_and_red_with_an_agents_md(acp_leg):
    runs = acp_leg[3]
    green = json.loads(runs["green"].stdout)
    assert runs["green"].returncode == 0, json.dumps(green)[-3000:]
    red = json.loads(runs["agents_md"].stdout)
    assert runs["agents_md"].returncode == 1, json.dumps(red)[-3000:]
    first = red["first_divergence"]
    assert first["where"] == "llm call 1" and "system prompt changed at char " in first["message"]
    assert "AGENTS.md" in first["message"], first
