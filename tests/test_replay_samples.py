"""Every sample session in sample_sessions/ replays green against a fresh real kimi, through the
project's own pytest plugin (`wire_replay` fixture), although every request id differs."""

from __future__ import annotations

import json

import pytest

from tests.harness.replay import Agent, live_requests, sample_names

NAMES = sample_names()
FRESH_ID_TYPES = {"ApprovalRequest", "QuestionRequest", "HookRequest"}


@pytest.mark.parametrize("name", NAMES)
def test_sample_replays_against_the_real_agent(wire_replay, tmp_path, name):
    with Agent(name, tmp_root=tmp_path) as agent:
        result = wire_replay(f"sample_sessions/{name}.jsonl", agent.argv, env=agent.env,
                             cwd=agent.cwd, frame_timeout=60)
    assert result.ok and result.agent_exit_code == 0
    recorded = {m.rpc_id for m in result.recording.requests()}
    live = live_requests(result)
    assert len(live) == len(recorded) == result.stats.get("requests_matched", 0)
    fresh = [r["id"] for r in live if r["params"]["type"] in FRESH_ID_TYPES]
    assert not set(fresh) & recorded  # matched by what they ask, not by id
    # every answer the replay sent went to a live id
    sent = [json.loads(f.raw) for f in result.frames if f.direction == "c2a"]
    answers = [m for m in sent if "method" not in m]
    assert {a["id"] for a in answers} <= {r["id"] for r in live}
