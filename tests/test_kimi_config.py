"""One reader of kimi-cli's config (recorder/kimi_config.py) for the model leg
(recorder/llm_upstream.py) and replay's pinned model (replay/agents/kimi.py): both find the same
file, read the same TOML or JSON, and say the same about a config they cannot read, each with its
own error."""

from __future__ import annotations

import json

import pytest

from wire_recorder.recorder import llm_upstream
from wire_recorder.recorder.errors import InputError
from wire_recorder.replay.agents.kimi import user_config

CONFIG = 'default_model = "m"\n[providers.p]\ntype = "kimi"\nbase_url = "https://x.test/v1"\n'


def test_both_read_the_file_kimi_would_load(tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    (share / "config.toml").write_text(CONFIG, encoding="utf-8")
    env = {"HOME": str(tmp_path / "home"), "KIMI_SHARE_DIR": str(share)}
    argv = ["kimi", "--wire"]
    leg = llm_upstream.kimi_config(argv, env)
    assert leg == user_config(argv, env) == ({"default_model": "m", "providers": {"p": {
        "type": "kimi", "base_url": "https://x.test/v1"}}}, str(share / "config.toml"))
    given = tmp_path / "given.toml"
    given.write_text('default_model = "given"\n', encoding="utf-8")
    for argv in (["kimi", "--config-file", str(given)], ["kimi", f"--config-file={given}"]):
        assert llm_upstream.kimi_config(argv, env) == user_config(argv, env) == \
            ({"default_model": "given"}, str(given))
    inline = ["kimi", "--config", json.dumps({"default_model": "j"}), "--wire"]
    assert llm_upstream.kimi_config(inline, env) == user_config(inline, env) == \
        ({"default_model": "j"}, "--config")


def test_a_missing_or_bad_config_is_said_alike_with_each_callers_error(tmp_path):
    env = {"HOME": str(tmp_path)}
    with pytest.raises(llm_upstream.NoLeg, match="no kimi config at .*config.toml"):
        llm_upstream.kimi_config(["kimi"], env)
    assert user_config(["kimi"], env) == ({}, None)  # replay runs the agent's own defaults
    bad = ["kimi", "--config", "default_model = ["]
    with pytest.raises(llm_upstream.NoLeg) as leg:
        llm_upstream.kimi_config(bad, env)
    with pytest.raises(InputError) as replay:
        user_config(bad, env)
    assert str(leg.value).startswith("cannot read the agent's kimi config given with --config: ")
    assert replay.value.message == str(leg.value)
    assert "--config-file" in (replay.value.hint or "")
