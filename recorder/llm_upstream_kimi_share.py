"""kimi-cli with a model whose provider takes no base URL from the environment (type `anthropic`:
kimi_cli/llm.py augment_provider_with_env_vars reads overrides only for `kimi` and `openai_*`,
and the Anthropic client gets the config's base_url), for the model leg of `wire-proxy --llm`.

How it is pointed: kimi-cli keeps its config, sessions, logs and metadata in `$KIMI_SHARE_DIR`
(kimi_cli/share.py; default `~/.kimi`). When the config is that dir's `config.toml` (no
`--config`/`--config-file` on the command line: then the user's file would have to change, and
the proxy says so instead), the agent gets a scratch KIMI_SHARE_DIR (0700) whose entries are
links to the user's share dir, except `config.toml`, a copy with only that provider's base_url
set to the loopback. `sessions/` and `logs/` are made in the user's dir first, so sessions land
where they always do; a top-level file the agent creates or replaces (kimi.json is written
atomically: the link becomes a file) is moved to the user's dir when the proxy ends. The copy is
removed (it holds the provider's api_key); a change the agent writes to it is lost.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .llm_upstream import Upstream
from .loopback_env import direct_to_loopback, give_back, write_private

ENV = "KIMI_SHARE_DIR"
POINTED_TYPES = {"anthropic": "anthropic-messages"}
SHARED_DIRS = ("sessions", "logs")
CREDENTIALS = frozenset({"api_key", "oauth", "env", "custom_headers"})


def share_dir(env: Mapping[str, str]) -> str:
    share = env.get(ENV) or os.path.join(env.get("HOME") or "~", ".kimi")
    return os.path.abspath(os.path.expanduser(share))


class KimiShareUpstream(Upstream):
    """The model of a kimi config in the share dir; `agent_env` makes the scratch share dir."""

    def __init__(self, base_url: str, provider_type: str, model: str | None, source: str,
                 config: dict[str, Any], share: str, alias: str, provider: str):
        super().__init__(base_url=base_url, env_var=ENV, provider_type=provider_type,
                         model=model, dialect=POINTED_TYPES[provider_type], source=source)
        self.config, self.share, self.alias, self.provider = config, share, alias, provider
        self.scratch: str | None = None
        self.linked: set[str] = set()
        self.how = (f"{ENV}: a scratch copy of {share}, its config.toml's base_url for the "
                    f"provider {provider!r} swapped")
        # in the llm_leg event: what a replay needs to configure the same model (no credentials)
        models = config.get("models") or {}
        self.extra = {"agent": "kimi-cli", "alias": alias,
                      "model_config": {k: v for k, v in (models.get(alias) or {}).items()
                                       if k not in CREDENTIALS}}

    def agent_env(self, env: Mapping[str, str], stand_in: str) -> dict[str, str]:
        import copy
        import tempfile

        from . import toml_text

        config = copy.deepcopy(self.config)
        config["providers"][self.provider]["base_url"] = stand_in
        text = toml_text.dumps(config)
        os.makedirs(self.share, mode=0o700, exist_ok=True)
        for name in SHARED_DIRS:
            os.makedirs(os.path.join(self.share, name), mode=0o700, exist_ok=True)
        self.scratch = tempfile.mkdtemp(prefix="wire-proxy-kimi-share-")
        for name in sorted(os.listdir(self.share)):
            if name != "config.toml":
                os.symlink(os.path.join(self.share, name), os.path.join(self.scratch, name))
                self.linked.add(name)
        write_private(os.path.join(self.scratch, "config.toml"), text)
        out = dict(env)
        out[ENV] = self.scratch
        direct_to_loopback(out)
        return out

    def cleanup(self) -> None:
        """Move what the agent made or replaced in the scratch dir to the user's, remove it."""
        scratch, self.scratch = self.scratch, None
        if scratch is None:
            return
        import shutil

        give_back(scratch, self.share, "config.toml", frozenset(self.linked))
        shutil.rmtree(scratch, ignore_errors=True)
