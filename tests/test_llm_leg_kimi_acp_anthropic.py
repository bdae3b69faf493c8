"""`wire-proxy --llm -- kimi acp` with an `anthropic` provider: kimi-cli 1.51 takes no base URL
from the environment for that type, so `kimi acp` (which takes no options at all: its config is
always the share dir's) gets the scratch KIMI_SHARE_DIR that `kimi --wire` gets
(recorder/llm_upstream_kimi_share.py; test_llm_leg_kimi_anthropic.py, whose model script and
config this shares). One real ACP session through the harness client against
tests/harness/model_server.py playing Anthropic: the exchanges stored without the key, the
session and the login in the user's share dir; replayed with the upstream stopped (green) and
with an AGENTS.md added (red, naming the system prompt). `kimi acp` checks the login
(`credentials/`) on session/new, so the replay's scratch share dir links it in."""

from __future__ import annotations

import json

import pytest

from tests.harness.kimi_acp_leg import record_kimi_acp_leg, replay_kimi_acp_leg
from tests.harness.llm_leg import KEY_RE, PROMPT, exchanges
from tests.harness.model_server import StreamingModel
from tests.harness.peers import need
from tests.test_llm_leg_kimi_anthropic import (
    _anthropic_works,
    _config,
    _turns,
    green_from_the_share_dir_then_red_with_an_agents_md,
)


@pytest.fixture(scope="module")
def acp_anthropic(kimi_exe, tmp_path_factory):
    need(lambda: _anthropic_works(kimi_exe), "kimi-cli with a working Anthropic provider")
    root = tmp_path_factory.mktemp("llm-leg-kimi-acp-anthropic")
    rec = record_kimi_acp_leg(
        kimi_exe, root, PROMPT, lambda work: StreamingModel(_turns(work), dialect="anthropic"),
        _config)
    runs = replay_kimi_acp_leg(rec, [("green", str(rec.run.workdir)),
                                     ("agents_md", str(rec.agents_md))])
    return rec.result, rec.model, rec.model.turns, rec.db, rec.run, rec.config, runs


def test_kimi_acp_records_the_anthropic_leg_without_the_key(acp_anthropic):
    result, model, turns, db, run, config = acp_anthropic[:6]
    assert result.exit_code == 0, result.client_stderr[-2000:]
    ex = exchanges(db)
    assert len(ex) == len(model.requests) == len(turns), result.client_stderr[-2000:]
    assert all({k.lower(): v for k, v in h.items()}["x-api-key"] == model.key
               for h in model.headers)
    for e, req in zip(ex, model.requests, strict=True):
        assert e["request"]["path"] == "/v1/messages", e["request"]["path"]
        assert [k.lower() for k in e["request"]["secret_headers"]] == ["x-api-key"]
        assert e["response"]["status"] == 200
        assert req["model"] == model.model and req["stream"] is True
    for side in db.parent.iterdir():  # the recording, its blobs, spools and notes
        if side.is_file():
            raw = side.read_bytes()
            assert model.key.encode() not in raw and not KEY_RE.search(raw), side
    share = run.home / ".kimi"
    assert (share / "config.toml").read_text(encoding="utf-8") == config  # untouched
    assert not any(p.is_symlink() for p in share.iterdir())
    assert (share / "credentials" / "kimi-code.json").is_file()
    assert [p for p in (share / "sessions").rglob("*") if p.is_file()], \
        sorted(str(p) for p in share.rglob("*"))
    meta = json.loads((share / "kimi.json").read_text(encoding="utf-8"))  # given back
    assert [w["path"] for w in meta["work_dirs"]] == [str(run.workdir)], meta


def test_kimi_acp_replays_the_anthropic_leg_green_then_red_with_an_agents_md(acp_anthropic):
    green_from_the_share_dir_then_red_with_an_agents_md(acp_anthropic[6])
