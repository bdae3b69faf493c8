"""A real ACP session recorded through the real wire-proxy into a real DuckDB file:
`kimi acp` (kimi-cli 1.51.0, scripted echo LLM) driven by the official ACP SDK client
(agent-client-protocol 0.12.1, tests/harness/sdk/acp_client.py)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from sample_sessions.acp_scenarios import ACP_SCENARIOS
from tests.harness.acp import check_acp_scenario, run_acp_scenario
from wire_recorder.recorder.store import open_store
from wire_recorder.recorder.transcript import read_transcript

WIRE_PROXY = str(Path(sys.executable).parent / "wire-proxy")
SAMPLE = Path(__file__).resolve().parents[1] / "sample_sessions" / "acp_tools.jsonl"

AGENT_REQUESTS = {
    "session/request_permission": 3,
    "terminal/create": 1,
    "terminal/wait_for_exit": 1,
    "terminal/output": 1,
    "terminal/release": 1,
    "fs/read_text_file": 1,
    "fs/write_text_file": 1,
}


@pytest.fixture(scope="module")
def recorded(acp_recordings, tmp_path_factory):
    """acp_tools through wire-proxy (once per test run, shared with other modules:
    tests/harness/acp_recordings.py): (scenario, client result, session row, frames)."""
    rec = acp_recordings.get("acp_tools")
    db = rec.copy_to(tmp_path_factory.mktemp("acp"))
    sc, result = ACP_SCENARIOS["acp_tools"], rec.result
    with open_store(db, read_only=True) as store:
        (session,) = store.sessions()
        frames = store.frames(session["session_id"])
    return sc, result, session, frames


def _rpc(frames, direction):
    return [f for f in frames if f.direction == direction]


def test_client_check_passes(recorded):
    sc, result, _, _ = recorded
    assert check_acp_scenario(sc, result) == []
    assert result.agent_stderr == b""  # kimi acp logs to ~/.kimi/logs; -q keeps the proxy quiet


def test_session_row(recorded):
    _, _, session, frames = recorded
    assert session["protocol"] == "acp" and session["protocol_version"] == "1"
    assert session["exit_code"] == 0 and session["end_reason"] == "agent_exit"
    assert session["lost_frames"] == 0 and session["frame_count"] == len(
        [f for f in frames if f.direction in ("c2a", "a2c")])
    assert json.loads(session["command"])[-1:] == ["acp"]  # the agent argv, after `--`


def test_recorded_methods(recorded):
    _, _, _, frames = recorded
    c2a = Counter((f.kind, f.method) for f in _rpc(frames, "c2a"))
    a2c = Counter((f.kind, f.method) for f in _rpc(frames, "a2c"))
    assert c2a == {
        ("request", "initialize"): 1,
        ("request", "session/new"): 1,
        ("request", "session/prompt"): 2,
        ("response", None): sum(AGENT_REQUESTS.values()),
    }
    assert {m: n for (k, m), n in a2c.items() if k == "request"} == AGENT_REQUESTS
    assert a2c[("response", None)] == 4  # initialize, session/new, two prompts
    assert a2c[("notification", "session/update")] >= 10
    assert not [f for f in frames if f.kind in ("invalid", "error")]
    updates = {json.loads(f.payload)["update"]["sessionUpdate"]
               for f in frames if f.method == "session/update"}
    assert {"available_commands_update", "agent_message_chunk", "agent_thought_chunk",
            "tool_call", "tool_call_update"} <= updates


def test_permission_answers_and_stop_reasons(recorded):
    _, _, _, frames = recorded
    answers = {f.rpc_id: json.loads(f.payload) for f in _rpc(frames, "c2a") if f.kind == "response"}
    perms = [f for f in frames if f.method == "session/request_permission"]
    chosen = [answers[f.rpc_id]["outcome"]["optionId"] for f in perms]
    assert chosen == ["approve", "approve", "reject"]
    prompt_ids = [f.rpc_id for f in frames if f.method == "session/prompt"]
    results = {f.rpc_id: json.loads(f.payload) for f in _rpc(frames, "a2c") if f.kind == "response"}
    assert [results[i] for i in prompt_ids] == [{"stopReason": "end_turn"}] * 2


def test_ids_are_keyed_per_direction(recorded):
    """Both sides count request ids from 0: the same integer appears as a client request and as an
    agent request. Every response answers a pending request of the *other* direction."""
    _, _, _, frames = recorded
    client_ids = [f.rpc_id for f in _rpc(frames, "c2a") if f.kind == "request"]
    agent_ids = [f.rpc_id for f in _rpc(frames, "a2c") if f.kind == "request"]
    assert client_ids == ["0", "1", "2", "3"]
    assert agent_ids == [str(i) for i in range(9)]
    assert set(client_ids) & set(agent_ids) == {"0", "1", "2", "3"}
    for direction, other in (("c2a", "a2c"), ("a2c", "c2a")):
        pending: set[str] = set()
        for f in frames:
            if f.direction == other and f.kind == "request":
                assert f.rpc_id not in pending
                pending.add(f.rpc_id)
            elif f.direction == direction and f.kind == "response":
                assert f.rpc_id in pending, f"{direction} response {f.rpc_id} answers nothing pending"
                pending.discard(f.rpc_id)
        assert not pending
    assert not [f for f in frames if getattr(f, "anomaly", None)]


def test_bytes_are_exact(recorded):
    """What the client read from wire-proxy's stdout is, byte for byte, the a2c frames recorded,
    and what it wrote is the c2a frames (the client taps its raw pipes under the SDK)."""
    _, result, _, frames = recorded
    assert [f.raw for f in _rpc(frames, "a2c")] == result.received_lines()
    assert [f.raw for f in _rpc(frames, "c2a")] == result.sent_lines()
    assert all(f.newline for f in frames if f.direction in ("a2c", "c2a"))
    assert result.raw_in.endswith(b"\n") and result.raw_out.endswith(b"\n")


def test_sample_transcript_has_the_same_exchange(recorded):
    """sample_sessions/acp_tools.jsonl (record.py acp_tools) matches a fresh recording frame for
    frame in order, direction, kind, method and id."""
    _, _, _, frames = recorded
    _, sample = read_transcript(str(SAMPLE))

    def shape(fs):
        return [(f.direction, f.kind, f.method, f.rpc_id) for f in fs if f.direction in ("c2a", "a2c")]

    assert shape(sample) == shape(frames)


def test_changed_script_variant_diverges(kimi_exe, acp_python, tmp_path):
    """The variant for replay demos runs green on its own and differs from acp_tools first at
    the terminal/create request of prompt 1."""
    sc = ACP_SCENARIOS["acp_tools_changed"]
    result = run_acp_scenario(sc, kimi=kimi_exe, acp_python=acp_python, tmp_root=tmp_path)
    assert check_acp_scenario(sc, result) == []
    create = [m for m in result.received() if m.get("method") == "terminal/create"]
    assert create[0]["params"]["command"] == "echo goodbye from the terminal"
