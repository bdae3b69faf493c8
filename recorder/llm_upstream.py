"""Where an agent's model is and how to point the agent at a stand-in instead, without changing
its command line or files: the model leg of `wire-proxy --llm` (recorder/llm_leg.py) and the
replay that serves a recorded model leg both use it.

kimi-cli 1.51 (`kimi_cli/app.py`, `llm.augment_provider_with_env_vars`) picks its model from the
config (`--config` inline, `--config-file`, else `$KIMI_SHARE_DIR/config.toml` or
`~/.kimi/config.toml`): `-m/--model` or `default_model`, that alias's provider. For a provider of
type `kimi` it then takes the base URL from `KIMI_BASE_URL`, for `openai_legacy` and
`openai_responses` from `OPENAI_BASE_URL`; the other types take no override from the environment:
for `anthropic` with the config in the share dir, kimi gets a scratch share dir
(llm_upstream_kimi_share.py); otherwise the leg is not recorded, and the proxy says so. Only the
session's model is pointed: a model switched to mid-session (ACP `session/set_model`) talks to
its provider directly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from .loopback_env import direct_to_loopback

KIMI_PROGRAMS = frozenset({"kimi", "kimi-cli"})
# provider type -> the variable kimi-cli reads its base URL from
BASE_URL_ENV = {"kimi": "KIMI_BASE_URL", "openai_legacy": "OPENAI_BASE_URL",
                "openai_responses": "OPENAI_BASE_URL"}
DIALECTS = {"kimi": "openai-chat", "openai_legacy": "openai-chat",
            "openai_responses": "openai-responses"}


class Upstream:
    """A plain class: `dataclasses` would be imported before the agent is spawned."""

    def __init__(self, base_url: str, env_var: str, provider_type: str, model: str | None,
                 dialect: str, source: str):
        self.base_url = base_url  # the real model's base URL (what the agent would have used)
        self.env_var = env_var  # the variable that points the agent elsewhere
        self.provider_type = provider_type
        self.model = model
        self.dialect = dialect  # openai-chat | openai-responses | raw
        self.source = source  # where the config came from, for notes

    def agent_env(self, env: Mapping[str, str], stand_in: str) -> dict[str, str]:
        """`env` with the agent pointed at `stand_in` (a base URL on 127.0.0.1), which it
        reaches directly, never through a proxy the user's variables name."""
        out = dict(env)
        out[self.env_var] = stand_in
        direct_to_loopback(out)
        return out


class NoLeg(Exception):
    """Why the model leg cannot be put in front of this agent (one line)."""


def _flag(argv: Sequence[str], names: Sequence[str]) -> str | None:
    found = None
    for i, a in enumerate(argv[1:], start=1):
        for name in names:
            if a == name and i + 1 < len(argv):
                found = argv[i + 1]
            elif a.startswith(name + "=") and name.startswith("--"):
                found = a[len(name) + 1:]
    return found


def kimi_config(argv: Sequence[str], env: Mapping[str, str]) -> tuple[dict, str]:
    from . import kimi_config as kc

    try:
        config, source = kc.load(argv, env)
    except kc.KimiConfigError as e:
        raise NoLeg(str(e)) from None
    if config is None:
        raise NoLeg(f"no kimi config at {source}: the model's address is not known")
    return config, source


def is_kimi(argv: Sequence[str]) -> bool:
    return bool(argv) and os.path.basename(argv[0]) in KIMI_PROGRAMS


def find(argv: Sequence[str], env: Mapping[str, str]) -> Upstream:
    """The model the agent `argv` would talk to with `env`. Raises NoLeg saying why not."""
    from .llm_upstream_kimicode import find_kimi_code, is_kimi_code

    if is_kimi_code(argv, env):  # before is_kimi: Kimi Code's bin is also `kimi`
        return find_kimi_code(argv, env)
    if not is_kimi(argv):
        raise NoLeg(f"{os.path.basename(argv[0]) if argv else 'the agent'} is not an agent "
                    "whose model address this knows (kimi-cli, Kimi Code)")
    config, source = kimi_config(argv, env)
    models = config.get("models")
    models = models if isinstance(models, dict) else {}
    providers = config.get("providers")
    providers = providers if isinstance(providers, dict) else {}
    alias = _flag(argv, ("-m", "--model")) or config.get("default_model")
    model = models.get(alias) if isinstance(alias, str) else None
    if not isinstance(model, dict):
        raise NoLeg(f"the kimi config {source} names no model {alias!r}")
    provider = providers.get(model.get("provider"))
    if not isinstance(provider, dict):
        raise NoLeg(f"the kimi config {source} has no provider {model.get('provider')!r}")
    ptype = str(provider.get("type") or "")
    var = BASE_URL_ENV.get(ptype)
    from .llm_upstream_kimi_share import POINTED_TYPES, KimiShareUpstream, share_dir

    if var is None and ptype in POINTED_TYPES and source != "--config" and \
            _flag(argv, ("--config-file",)) is None:  # the share dir's config: a scratch copy
        base = str(provider.get("base_url") or "")
        if not base.startswith(("http://", "https://")):
            raise NoLeg(f"the model's base URL {base!r} (provider {model.get('provider')!r}) "
                        "is not an http(s) URL")
        return KimiShareUpstream(base_url=base.rstrip("/"), provider_type=ptype,
                                 model=str(model.get("model") or "") or None, source=source,
                                 config=config, share=share_dir(env), alias=str(alias),
                                 provider=str(model.get("provider")))
    if var is None:
        raise NoLeg(f"kimi takes no base URL from the environment for a provider of type "
                    f"{ptype!r}")
    base = env.get(var) or str(provider.get("base_url") or "")
    if not base.startswith(("http://", "https://")):
        raise NoLeg(f"the model's base URL {base!r} (provider {model.get('provider')!r}) is "
                    "not an http(s) URL")
    return Upstream(base_url=base.rstrip("/"), env_var=var, provider_type=ptype,
                    model=str(model.get("model") or "") or None,
                    dialect=DIALECTS.get(ptype, "raw"), source=source)
