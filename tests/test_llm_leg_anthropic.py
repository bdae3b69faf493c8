"""The model leg in Anthropic's Messages dialect: Kimi Code 2.1.0 (`kimi acp`) with a provider of
type `anthropic` (its bundled Anthropic client: `POST /v1/messages`, the key in `x-api-key`,
`event:`/`data:` SSE with thinking, text and tool_use blocks) recorded through
`wire-proxy --llm` against tests/harness/model_server.py playing Anthropic; both legs relayed
byte for byte, no key stored, `llm_calls` with Anthropic's usage and a time to first token;
replayed from the recorded leg with the upstream stopped (green) and with an AGENTS.md added
(red, naming the system prompt, here the request's top-level `system`). One recording, one green
and one red replay. kimi-cli 1.51 speaks the dialect too (kosong's Anthropic provider) but takes
no base URL for it from the environment: with `--config-file`, `wire-proxy --llm` says so and
runs it without the leg (test_kimi_cli_anthropic_is_relayed_without_the_leg_and_says_why); with
the config in its share dir it is recorded (tests/test_llm_leg_kimi_anthropic.py).

The dialect's parsing (summary, served path mapping, request diff) is also checked on its own,
without an agent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.acp import check_acp_scenario
from tests.harness.kimicode import find_kimicode
from tests.harness.kimicode_leg import record_and_replay
from tests.harness.kimicode_session import SCENARIO
from tests.harness.llm_leg import KEY_RE, exchanges
from tests.harness.model_server import answer, call, sse_events
from tests.harness.peers import need

BIN = Path(sys.executable).parent
# the Kimi Code session of tests/harness/kimicode_session.py, its first answer with reasoning
TURNS = [
    answer(think=["The user says ", "hello."], text=["Hello ", "there."], usage=(900, 5, 0),
           message_id="msg-a-1"),
    answer(text=["Running it."], usage=(1000, 20, 300), message_id="msg-a-2",
           calls=[call("toolu_bash_1", "Bash", ['{"command": "echo hi', ' > out.txt && cat out.txt"}'])]),
    answer(usage=(1100, 10, 900), message_id="msg-a-3",
           calls=[call("toolu_read_1", "Read", ['{"path": "no', 'tes.txt"}'])]),
    answer(text=["Done: ", "notes read."], usage=(1200, 8, 1000), message_id="msg-a-4"),
]


def _events(turn: dict, model: str) -> list[bytes]:
    return sse_events(turn, model, "anthropic")


# -- the dialect's parsing, without an agent ------------------------------------------------


def test_an_anthropic_stream_is_summarized_with_usage_and_first_token():
    from wire_recorder.recorder.llm_summary import summarize

    turn = answer(think=["a", "b"], text=["Hi ", "there"],
                  calls=[call("t1", "Read", ['{"pa', 'th": "x"}'])], usage=(1000, 20, 300))
    chunks = _events(turn, "claude-x")
    times = [[10.0 * (i + 1), len(c)] for i, c in enumerate(chunks)]
    s = summarize("anthropic-messages", b"".join(chunks), times, "text/event-stream")
    # message_start, ping, thinking block start: the first thinking_delta is the 4th event
    assert s["first_token_ms"] == 40.0
    assert s["usage"] == {"input_other": 700, "output": 20, "input_cache_read": 300,
                          "input_cache_creation": 0}
    assert s["finish_reason"] == "tool_use" and s["tool_calls"] == ["Read"]
    assert s["model"] == "claude-x" and s["message_id"].startswith("msg_")
    assert s["content_chars"] == 8 and s["reasoning_content_chars"] == 2
    assert s["events"] == len(chunks) and "_anthropic_usage" not in s


def test_an_anthropic_stream_is_served_with_the_work_dir_mapped():
    from wire_recorder.replay.agents.kimi import PathMap
    from wire_recorder.replay.agents.llm_leg_map import mapped_chunks

    rec, live = "/home/ci/build/project", "/runner/_work/p"
    turn = answer(think=["Look in /home/ci/build/project"], text=["In /home/ci/build/project/a.txt:"],
                  calls=[call("t1", "Read", ['{"path": "/home/ci/bu', 'ild/project/a.txt"}'])])
    chunks = _events(turn, "m")
    out = mapped_chunks(chunks, PathMap(rec, live))
    assert len(out) == len(chunks)
    assert all(c.startswith(b"event: ") for c in out)
    events = [json.loads(c.split(b"\ndata: ", 1)[1]) for c in out]
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    args = [d["partial_json"] for d in deltas if d["type"] == "input_json_delta"]
    assert json.loads("".join(args)) == {"path": f"{live}/a.txt"} and len(args) == 2
    assert all(args) and live not in args[0]  # still cut mid-path
    assert "".join(d.get("text", "") for d in deltas) == f"In {live}/a.txt:"
    assert "".join(d.get("thinking", "") for d in deltas) == f"Look in {live}"
    unchanged = [i for i, c in enumerate(chunks) if b"/ci/bu" not in c and b"project" not in c]
    assert len(unchanged) == len(chunks) - 4
    assert all(out[i] == chunks[i] for i in unchanged)  # the rest byte for byte


def test_an_anthropic_request_diff_names_system_tools_and_thinking():
    from wire_recorder.replay.agents.llm_request_diff import request_diffs

    rec = {"model": "m", "max_tokens": 100, "metadata": {"user_id": "a"},
           "system": [{"type": "text", "text": "You are here.", "cache_control": {"type": "x"}}],
           "tools": [{"name": "Read", "input_schema": {}}],
           "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    live = {**rec, "metadata": {"user_id": "b"},
            "system": [{"type": "text", "text": "You are there.", "cache_control": {"type": "x"}}],
            "tools": [*rec["tools"], {"name": "SendDMail", "input_schema": {}}],
            "thinking": {"type": "enabled", "budget_tokens": 1024}}
    assert request_diffs(rec, rec) == []
    assert request_diffs(rec, {**rec, "metadata": {"user_id": "b"}}) == []  # volatile
    diffs = request_diffs(rec, live)
    assert diffs[0].startswith("parameter thinking changed: \"<absent>\" → "), diffs
    assert diffs[1].startswith("system prompt changed at char 8: "), diffs
    assert diffs[2] == "tools: added SendDMail", diffs
    # an OpenAI body (no top-level system) still has its system prompt in the messages
    chat = {"model": "m", "messages": [{"role": "system", "content": "You are here."}]}
    assert request_diffs(chat, {"model": "m", "messages": [
        {"role": "system", "content": "You are there."}]}) == \
        ['system prompt changed at char 8: "You are here." → "You are there."']


# -- Kimi Code with an anthropic provider, recorded and replayed ----------------------------


@pytest.fixture(scope="module")
def kc_anthropic(acp_python, tmp_path_factory):
    return record_and_replay(acp_python, tmp_path_factory.mktemp("llm-leg-anthropic"), TURNS,
                             dialect="anthropic")


def test_kimi_code_records_its_anthropic_leg_byte_for_byte(kc_anthropic):
    from wire_recorder.recorder.store import open_store

    result, model, db = kc_anthropic[:3]
    assert result.exit_code == 0, result.client_stderr[-2000:]
    assert check_acp_scenario(SCENARIO, result) == [], result.client_stderr[-2000:]
    # the stdio leg: every byte each side wrote, as the other side read it
    with open_store(str(db), read_only=True) as store:
        (session,) = store.sessions()
        frames = store.frames(session["session_id"])
    assert b"".join(f.raw + b"\n" for f in frames if f.direction == "a2c") == result.raw_in
    assert b"".join(f.raw + b"\n" for f in frames if f.direction == "c2a") == result.raw_out
    # the model leg: Anthropic's route and headers, every answer as the model server wrote it
    ex = exchanges(db)
    assert len(ex) == len(model.requests) == len(TURNS)
    assert all(h.get("x-api-key") == model.key for h in model.headers)  # Anthropic's key header
    for e, req, turn in zip(ex, model.requests, TURNS, strict=True):
        assert e["request"]["path"].split("?")[0] == "/v1/messages", e["request"]["path"]
        assert "x-api-key" in [k.lower() for k in e["request"]["secret_headers"]]
        assert "x-api-key" not in [k.lower() for k, _ in e["request"]["headers"]]
        body = json.loads(e["request"]["request_body"])
        assert body["messages"] == req["messages"] and body["system"] == req["system"]
        assert [t["name"] for t in body["tools"]] == [t["name"] for t in req["tools"]]
        assert body["stream"] is True and len(body["tools"]) > 10
        res = e["response"]
        sent = _events(turn, model.model)
        assert res["status"] == 200 and res["response_body"].encode() == b"".join(sent)
        assert [size for _, size in res["chunks"]] == [len(x) for x in sent]
    # thinking went back to the model with its signature, as Anthropic requires
    thinking = [b for m in model.requests[1]["messages"] if m["role"] == "assistant"
                for b in m["content"] if isinstance(b, dict) and b.get("type") == "thinking"]
    assert thinking and thinking[0]["signature"] == "sig-msg-a-1", model.requests[1]["messages"]
    for side in [db, *db.parent.iterdir()]:  # the recording, its blobs, spools and notes
        if side.is_file():
            raw = side.read_bytes()
            assert model.key.encode() not in raw and not KEY_RE.search(raw), side


def test_kimi_code_anthropic_llm_calls_have_usage_and_first_token(kc_anthropic):
    db = kc_anthropic[2]
    p = subprocess.run([str(BIN / "wire-query"), str(db), "SELECT * FROM llm_calls ORDER BY call",
                        "-f", "ndjson"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    assert len(rows) == len(TURNS)
    assert [r["output"] for r in rows] == [t["usage"][1] for t in TURNS], rows[0]
    assert [r["input_other"] for r in rows] == [t["usage"][0] - t["usage"][2] for t in TURNS]
    assert [r["input_cache_read"] for r in rows] == [t["usage"][2] for t in TURNS], rows[0]
    assert [r["finish_reason"] for r in rows] == ["end_turn", "tool_use", "tool_use", "end_turn"]
    assert all(r["status"] == 200 and r["time_to_first_token_ms"] is not None for r in rows)


def test_kimi_code_anthropic_replays_green_and_red_with_an_agents_md(kc_anthropic):
    runs = kc_anthropic[4]
    green = runs["green"]
    assert green.returncode == 0, ([d["message"] for d in json.loads(green.stdout).get(
        "divergences")] if green.stdout.strip() else None, green.stderr[-2000:])
    assert "LLM pinned to the recorded model leg: 4 exchange(s)" in green.stdout, green.stdout
    assert "(anthropic) on loopback" in green.stdout, green.stdout
    red = runs["agents_md"]
    assert red.returncode == 1, (red.stdout[-4000:], red.stderr[-2000:])
    first = json.loads(red.stdout)["first_divergence"]
    assert first["where"] == "llm call 1" and "system prompt changed at char " in \
        first["message"], first
    assert "AGENTS.md" in first["message"], first


def test_kimi_cli_anthropic_is_relayed_without_the_leg_and_says_why(tmp_path):
    """kimi-cli 1.51 reads no base URL from the environment for an `anthropic` provider
    (kimi_cli/llm.py augment_provider_with_env_vars: only `kimi`, `openai_*`), and its config
    file is the user's (`--config-file`): the proxy cannot point it elsewhere without changing
    the command, so it says so and does not record a leg."""
    from wire_recorder.recorder.llm_leg import prepare

    cfg = tmp_path / "config.toml"
    cfg.write_text('default_model = "c"\n[models.c]\nprovider = "a"\nmodel = "claude"\n'
                   'max_context_size = 100000\n[providers.a]\ntype = "anthropic"\n'
                   'base_url = "https://example.invalid"\napi_key = "k"\n', encoding="utf-8")
    leg, env, note = prepare(["kimi", "--config-file", str(cfg), "--wire"], {"HOME": "/x"})
    assert leg is None and env is None
    assert note == ("--llm: the model leg is not recorded: kimi takes no base URL from the "
                    "environment for a provider of type 'anthropic'")


def test_kimi_code_anthropic_from_the_environment_is_pointed_by_its_base_url_variable():
    """Kimi Code's config-less model (KIMI_MODEL_NAME, KIMI_MODEL_PROVIDER_TYPE=anthropic):
    the leg points KIMI_MODEL_BASE_URL at the loopback and reads the answers as Anthropic's."""
    from wire_recorder.recorder.llm_leg import prepare

    node, main = need(find_kimicode, "Kimi Code")
    env = {"HOME": "/nonexistent", "KIMI_MODEL_NAME": "claude-x", "KIMI_MODEL_API_KEY": "k",
           "KIMI_MODEL_PROVIDER_TYPE": "anthropic",
           "KIMI_MODEL_BASE_URL": "https://models.example.invalid/anthropic/"}
    leg, agent_env, note = prepare([str(node), str(main), "acp"], env)
    assert leg is not None and agent_env is not None, note
    try:
        up = leg.upstream
        assert (up.dialect, up.provider_type, up.model) == ("anthropic-messages", "anthropic",
                                                            "claude-x")
        assert up.base_url == "https://models.example.invalid/anthropic"
        assert agent_env["KIMI_MODEL_BASE_URL"] == leg.stand_in
        assert agent_env["KIMI_MODEL_API_KEY"] == "k"  # the agent still sends its own key
    finally:
        leg.stop()
