"""`wire-replay --live-llm` when the agent's own model is dead: the real kimi 1.51 answers the
prompt with -32003 (its chat provider's error), and the report leads with that failure instead of
its side effects (a StepInterrupted, the steps that never came), with what to do about it."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.harness.model_server import StreamingModel, failure
from tests.harness.replay import Agent, run_cli

NAME = "approve_shell"
# kimi retries a failed model call a few times, with back-off, before it gives up on the prompt
RUN = ["--frame-timeout", "300"]
ADVICE = "check the model it is configured with, or drop --live-llm to pin the recorded model"


@pytest.fixture(scope="module")
def recorded(kimi_recordings, tmp_path_factory):
    rec = kimi_recordings.get([NAME])[NAME]  # recorded once per test run
    assert not rec.problems, rec.problems
    return Path(rec.copy_to(tmp_path_factory.mktemp("live-llm")))


def dead_config(port: int) -> str:
    """A kimi config whose only model is an OpenAI-compatible server on 127.0.0.1:port."""
    return ('default_model = "m"\ntelemetry = false\n\n[models.m]\nprovider = "p"\n'
            'model = "gpt-x"\nmax_context_size = 100000\n\n[providers.p]\n'
            f'type = "openai_legacy"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
            'api_key = "sk-dead-model"\n')


def model_lead(report: dict) -> dict:
    first = report["first_divergence"]
    assert first["kind"] == "model", first
    assert report["divergences"][0] == first
    return first


def test_a_model_port_nobody_listens_on_is_named_first(recorded, tmp_path):
    # bound but not listening: connecting is refused, and no other process can take the port
    with socket.socket() as held, Agent(NAME, tmp_root=tmp_path) as agent:
        held.bind(("127.0.0.1", 0))
        agent.run.config_path.write_text(dead_config(held.getsockname()[1]))
        text = tmp_path / "report.txt"
        p = run_cli(["--json", "--report", text, *RUN, recorded, "--live-llm", *agent.cli_args()],
                    timeout=600)
    assert p.returncode == 1, p.stdout.decode()[-3000:] + p.stderr.decode()
    report = json.loads(p.stdout)
    first = model_lead(report)
    assert first["where"] == "turn 1, step 1"
    assert first["message"] == ('the agent\'s model failed (-32003 chat provider error: '
                                f'"Connection error."): {ADVICE}')
    assert first["got"]["error"]["code"] == -32003
    # the side effects are still there, after it
    rest = report["divergences"][1:]
    assert any("got StepInterrupted" in d["message"] for d in rest), rest
    assert not any("-32003" in d["message"] for d in rest), rest
    assert report["hints"] == [h for h in report["hints"] if "timing" not in h]
    lines = text.read_text().splitlines()
    # the one-line summary (the title, all that -q prints) and the first divergence name it
    n = len(report["divergences"])
    assert lines[0].endswith(f"DIVERGED ({n} differences): the agent's model failed (-32003 chat "
                             f'provider error: "Connection error."): {ADVICE}'), lines[0]
    assert lines[1].startswith("first divergence: turn 1, step 1: the agent's model failed "
                               "(-32003 "), lines[1]


def test_a_model_answering_500_is_named_first(recorded, tmp_path):
    model = StreamingModel([failure(500, "the model is down")] * 50)
    with model, Agent(NAME, tmp_root=tmp_path) as agent:
        agent.run.config_path.write_text(model.config_toml())
        p = run_cli(["-q", *RUN, recorded, "--live-llm", *agent.cli_args()], timeout=600)
        asked = len(model.requests)
    out = p.stdout.decode()
    assert p.returncode == 1, out + p.stderr.decode()
    assert asked >= 1  # kimi did ask the live model, and it failed
    lines = out.splitlines()
    assert len(lines) == 1, out
    assert "DIVERGED" in lines[0] and "the agent's model failed (-32003 chat provider error: " \
           "\"Error code: 500" in lines[0] and "the model is down" in lines[0], lines[0]
    assert lines[0].endswith(ADVICE), lines[0]


def test_without_live_llm_the_pinned_model_replays_green(recorded, tmp_path):
    """What the advice says: the same dead config, the model pinned to the recording."""
    with socket.socket() as held, Agent(NAME, tmp_root=tmp_path) as agent:
        held.bind(("127.0.0.1", 0))
        agent.run.config_path.write_text(dead_config(held.getsockname()[1]))
        p = run_cli(["-q", *RUN, recorded, *agent.cli_args()], timeout=600)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    assert "MATCHES the recording" in p.stdout.decode()
