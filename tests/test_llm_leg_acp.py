"""`wire-proxy --llm -- kimi acp`: the real kimi-cli over ACP recorded with its model leg
against the streaming model server, then replayed from the recorded leg with the upstream
stopped (green), with an AGENTS.md added (red, naming the system prompt) and with thinking on
(red, naming reasoning_effort). `kimi acp` takes no options (no --thinking, --agent or
--agent-file: kimi_cli/cli `acp()` has none, and ACPServer.new_session creates every session with
the default agent file), so thinking is turned on the way an ACP user does it, in the config
(`default_thinking = true`, what `--thinking` sets for one run), and another agent file cannot
be given at all (test_kimi_acp_takes_no_agent_file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.kimi_acp_leg import record_kimi_acp_leg, replay_kimi_acp_leg
from tests.harness.llm_leg import exchanges
from tests.harness.model_server import StreamingModel, answer, call, failure


@pytest.fixture(scope="module")
def acp_leg(kimi_exe, tmp_path_factory):
    def model_for(work: str) -> StreamingModel:
        return StreamingModel([
            answer(think=["Reading."], text=["Reading ", "a.txt"],
                   calls=[call("call-1", "ReadFile", ['{"path": "' + work[:-2], work[-2:] + '/a.txt"}'])],
                   usage=(900, 40, 300), message_id="m-1"),
            failure(503, "overloaded"),
            answer(text=["It says alpha."], usage=(1000, 10, 900), message_id="m-2")])

    rec = record_kimi_acp_leg(kimi_exe, tmp_path_factory.mktemp("llm-leg-acp"), "Read a.txt",
                              model_for, lambda model: model.config_toml())

    def thinking_on(name: str, home: Path) -> None:
        if name == "thinking":  # `kimi acp` takes no --thinking: the config's default
            cfg = home / ".kimi" / "config.toml"
            cfg.write_text("default_thinking = true\n" + cfg.read_text(encoding="utf-8"),
                           encoding="utf-8")

    work = str(rec.run.workdir)
    runs = replay_kimi_acp_leg(rec, [("green", work), ("agents_md", str(rec.agents_md)),
                                     ("thinking", work)], thinking_on)
    return rec.result, rec.model, rec.db, runs


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



def test_kimi_acp_replay_with_thinking_on_is_red_naming_reasoning_effort(acp_leg):
    p = acp_leg[3]["thinking"]
    report = json.loads(p.stdout)
    assert p.returncode == 1, json.dumps(report)[-3000:]
    first = report["first_divergence"]
    assert first["kind"] == "model" and first["where"] == "llm call 1", first
    assert "parameter reasoning_effort changed" in first["message"], first
    # the client sees it too, later in the report: the session's model id says thinking
    assert any("currentModelId: stream → stream,thinking" in d["message"]
               for d in report["divergences"]), [d["message"] for d in report["divergences"]]


def test_kimi_acp_takes_no_agent_file(kimi_exe):
    """Why there is no `--agent okabe` red for `kimi acp`: kimi-cli 1.51 refuses the option
    there (the deprecated `kimi --agent okabe --acp` answers every ACP request with an error)."""
    import subprocess

    for flag in (["--agent", "okabe"], ["--agent-file", "agent.yaml"]):
        p = subprocess.run([str(kimi_exe), "acp", *flag], capture_output=True, text=True,
                           timeout=600, stdin=subprocess.DEVNULL)
        assert p.returncode == 2 and "No such option" in p.stderr, (p.returncode, p.stderr)
