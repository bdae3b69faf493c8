"""kimi-cli `--wire` with an `anthropic` provider recorded through `wire-proxy --llm`: kimi 1.51
takes no base URL from the environment for that type, so with its config in the share dir
(`~/.kimi/config.toml`, no --config-file) the proxy gives it a scratch KIMI_SHARE_DIR whose
config.toml is a copy with that provider's base_url on the leg (recorder/llm_upstream_kimi_share.py).
One real session against tests/harness/model_server.py playing Anthropic: both legs byte for
byte, the exchanges stored without the key, `llm_calls` with the provider's usage, the session
in the user's share dir; replayed with only the agent command in a fresh HOME and share dir,
the upstream stopped (green), and with an AGENTS.md added (red, naming the system prompt)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.harness.kimi_peer import clean_env
from tests.harness.llm_leg import KEY_RE, PROMPT, exchanges
from tests.harness.model_server import StreamingModel, answer, anthropic_events, call
from tests.harness.replay import WIRE_PROXY, parallel, run_cli
from wire_recorder.replay.agents.llm_text import aligned


def _turns(work: str) -> list[dict]:
    k = len(work) - 2  # the path cut mid-name, as real models do
    return [
        answer(think=["The user wants a file read.\n", "Absolute path."],
               text=["Reading ", "`a.txt`."], message_id="msg-k-1", usage=(900, 40, 300),
               calls=[call("toolu_read", "ReadFile",
                           ['{"path": "' + work[:k], work[k:] + '/a.txt"}'])]),
        answer(text=["It says:\n\n", "alpha line one\n"], usage=(1100, 30, 900),
               message_id="msg-k-2"),
    ]


def _config(model: StreamingModel) -> str:
    return ('default_model = "claude"\n\n[models.claude]\nprovider = "anth"\n'
            f'model = "{model.model}"\nmax_context_size = 128000\n\n'
            f'[providers.anth]\ntype = "anthropic"\nbase_url = "{model.base_url}"\n'
            f'api_key = "{model.key}"\n')


def _anthropic_works(kimi_exe: Path) -> None:
    """kimi-cli 1.51's Anthropic provider (kosong 0.56) builds `MessageParam(...)`, which the
    anthropic library 2.x made a Union: every model call fails before any request is sent
    (scripts/setup-peers puts anthropic 1.17.0 into kimi's venv)."""
    from tests.harness.peers import PeerMissing

    p = subprocess.run([str(kimi_exe.parent / "python"), "-c", "from anthropic.types import "
                        "MessageParam; MessageParam(role='user', content=[])"],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise PeerMissing("kimi-cli's anthropic library cannot build a message for its "
                          f"Anthropic provider: {(p.stderr.strip().splitlines() or ['?'])[-1]}",
                          "run bash scripts/setup-peers: it puts anthropic 1.17.0 into kimi's venv")


@pytest.fixture(scope="module")
def rec(kimi_exe, tmp_path_factory):
    from tests.harness.peers import need
    from tests.harness.scripted_client import Approval, ClientPlan, Prompt, run_client

    need(lambda: _anthropic_works(kimi_exe), "kimi-cli with a working Anthropic provider")

    root = tmp_path_factory.mktemp("llm-leg-kimi-anthropic")
    work, home, out = root / "work", root / "home", root / "rec"
    for d in (work, home / ".kimi", out):
        d.mkdir(parents=True)
    (work / "a.txt").write_text("alpha line one\n", encoding="utf-8")
    db = out / "s.db"
    turns = _turns(str(work))
    with StreamingModel(turns, dialect="anthropic") as model:
        config = _config(model)
        (home / ".kimi" / "config.toml").write_text(config, encoding="utf-8")
        result = run_client(
            [WIRE_PROXY, "-q", "--wait", "60", "--db", str(db), "--llm", "--", str(kimi_exe),
             "--wire"],
            ClientPlan(prompts=[Prompt(PROMPT)], approval_default=Approval.approve(),
                       init_timeout=600, prompt_timeout=600),
            env={**clean_env(), "HOME": str(home)}, cwd=work, timeout=1200)
    # the replays: only the agent command, a fresh HOME and share dir, the upstream stopped
    agents_md = root / "work-agents-md"
    shutil.copytree(work, agents_md)
    (agents_md / "AGENTS.md").write_text("# Rules\n\nAnswer in one line.\n", encoding="utf-8")

    def replay(case: tuple[str, Path]):
        name, cwd = case
        fresh = root / f"home-{name}"
        (fresh / "share").mkdir(parents=True)
        return name, run_cli(["--json", db, "--", str(kimi_exe), "--wire"], timeout=1200,
                             env={**clean_env(), "HOME": str(fresh),
                                  "KIMI_SHARE_DIR": str(fresh / "share")}, cwd=cwd)

    runs = dict(parallel(replay, [("green", work), ("agents_md", agents_md)], workers=2))
    return result, model, turns, db, home, config, runs


def test_both_legs_are_relayed_and_stored_byte_for_byte(rec):
    from wire_recorder.recorder.store import open_store

    result, model, turns, db = rec[:4]
    assert result.response("p-1") is not None, result.summary()
    with open_store(str(db), read_only=True) as store:
        (session,) = store.sessions()
        frames = store.frames(session["session_id"])
    for side in ("a2c", "c2a"):
        assert b"".join(f.raw + b"\n" for f in frames if f.direction == side) == \
            b"".join(f.raw + b"\n" for f in result.frames if f.dir == side), side
    ex = exchanges(db)
    assert len(ex) == len(model.requests) == len(turns)
    assert all({k.lower(): v for k, v in h.items()}["x-api-key"] == model.key
               for h in model.headers)  # Anthropic's key header
    for e, req, turn in zip(ex, model.requests, turns, strict=True):
        assert e["request"]["path"] == "/v1/messages", e["request"]["path"]
        assert [k.lower() for k in e["request"]["secret_headers"]] == ["x-api-key"]
        # the stored copy is redacted as frames are; the rest is the body the model got
        stored = e["request"]["request_body"]
        assert json.loads(aligned(json.dumps(json.loads(stored), ensure_ascii=False),
                                  json.dumps(req, ensure_ascii=False))) == json.loads(stored)
        assert req["model"] == model.model and req["stream"] is True and len(req["tools"]) > 5
        sent = [f"event: {n}\ndata: ".encode() + json.dumps(d, ensure_ascii=False).encode()
                + b"\n\n" for n, d in anthropic_events(turn, model.model)]
        assert e["response"]["status"] == 200
        assert e["response"]["response_body"].encode() == b"".join(sent)
        assert [size for _, size in e["response"]["chunks"]] == [len(x) for x in sent]


def test_no_key_is_stored_and_the_users_share_dir_keeps_the_session(rec):
    model, db, home, config = rec[1], rec[3], rec[4], rec[5]
    for side in db.parent.iterdir():  # the recording, its blobs, spools and notes
        if side.is_file():
            raw = side.read_bytes()
            assert model.key.encode() not in raw and not KEY_RE.search(raw), side
    share = home / ".kimi"
    assert (share / "config.toml").read_text(encoding="utf-8") == config  # untouched
    assert not any(p.is_symlink() for p in share.iterdir())
    sessions = [p for p in (share / "sessions").rglob("*") if p.is_file()]
    assert sessions, sorted(str(p) for p in share.rglob("*"))
    meta = json.loads((share / "kimi.json").read_text(encoding="utf-8"))
    assert meta["work_dirs"] and meta["work_dirs"][0]["last_session_id"], meta


def test_llm_calls_have_the_providers_usage(rec):
    db, turns = rec[3], rec[2]
    p = subprocess.run([str(Path(WIRE_PROXY).with_name("wire-query")), str(db), "-f", "ndjson",
                        "SELECT * FROM llm_calls ORDER BY call"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    assert [(r["input_other"], r["output"], r["input_cache_read"]) for r in rows] == \
        [(t["usage"][0] - t["usage"][2], t["usage"][1], t["usage"][2]) for t in turns]
    assert [r["finish_reason"] for r in rows] == ["tool_use", "end_turn"]
    assert all(r["status"] == 200 and r["time_to_first_token_ms"] is not None for r in rows)


def test_replayed_green_then_red_with_an_agents_md(rec):
    green_from_the_share_dir_then_red_with_an_agents_md(rec[6])


def green_from_the_share_dir_then_red_with_an_agents_md(runs: dict) -> None:
    """The green replay (from the recorded leg, kimi given a scratch KIMI_SHARE_DIR) and the red
    one (an AGENTS.md: the system prompt of llm call 1) of a kimi-cli anthropic recording."""
    green = runs["green"]
    assert green.stdout.strip(), green.stderr.decode()[-3000:]
    report = json.loads(green.stdout)
    assert green.returncode == 0, ([d["message"] for d in report.get("divergences") or []],
                                   green.stderr.decode()[-2000:])
    assert any("recorded model leg: 2 exchange(s) (2 answered)" in n and
               "scratch KIMI_SHARE_DIR" in n for n in report["notes"]), report["notes"]
    red = runs["agents_md"]
    assert red.returncode == 1, (red.stdout.decode()[-4000:], red.stderr.decode()[-2000:])
    first = json.loads(red.stdout)["first_divergence"]
    assert first["kind"] == "model" and first["where"] == "llm call 1", first
    assert "system prompt changed at char " in first["message"], first
    assert "AGENTS.md" in first["message"], first


def test_the_scratch_share_dir_links_the_users_and_gives_back_what_kimi_made(tmp_path):
    """Without an agent (so it runs wherever kimi's Anthropic provider does not): the scratch
    dir the proxy makes, and what it does with the agent's writes when the leg stops."""
    import tomllib

    from wire_recorder.recorder.llm_leg import prepare

    share = tmp_path / "share"
    share.mkdir()
    text = ('default_model = "c"\n[models.c]\nprovider = "a"\nmodel = "claude"\n'
            'max_context_size = 100000\n[providers.a]\ntype = "anthropic"\n'
            'base_url = "https://example.invalid/anthropic"\napi_key = "k"\n'
            '[providers.o]\ntype = "kimi"\nbase_url = "https://other.invalid"\napi_key = "k2"\n')
    (share / "config.toml").write_text(text, encoding="utf-8")
    (share / "kimi.json").write_text('{"work_dirs": []}', encoding="utf-8")
    leg, env, note = prepare(["kimi", "--wire"], {"HOME": "/nonexistent",
                                                   "KIMI_SHARE_DIR": str(share)})
    assert leg is not None and env is not None, note
    try:
        assert "KIMI_SHARE_DIR: a scratch copy of" in note
        scratch = Path(env["KIMI_SHARE_DIR"])
        assert scratch != share and leg.upstream.dialect == "anthropic-messages"
        assert leg.upstream.base_url == "https://example.invalid/anthropic"
        copy = tomllib.loads((scratch / "config.toml").read_text(encoding="utf-8"))
        want = tomllib.loads(text)
        want["providers"]["a"]["base_url"] = leg.stand_in
        assert copy == want  # only that provider's base_url
        assert sorted(p.name for p in scratch.iterdir() if p.is_symlink()) == \
            ["kimi.json", "logs", "sessions"]
        assert (share / "sessions").is_dir() and (share / "logs").is_dir()
        # what kimi does: a session under sessions/, kimi.json rewritten atomically, a new file
        (scratch / "sessions" / "s1").mkdir()
        (scratch / "kimi.json.tmp").write_text('{"work_dirs": [1]}', encoding="utf-8")
        os.replace(scratch / "kimi.json.tmp", scratch / "kimi.json")
        (scratch / "device_id").write_text("d", encoding="utf-8")
    finally:
        leg.stop()
    assert not scratch.exists()
    assert (share / "sessions" / "s1").is_dir()
    assert (share / "kimi.json").read_text(encoding="utf-8") == '{"work_dirs": [1]}'
    assert (share / "device_id").read_text(encoding="utf-8") == "d"
    assert (share / "config.toml").read_text(encoding="utf-8") == text
