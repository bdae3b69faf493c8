"""Kimi Code 2.x (`@moonshot-ai/kimi-code`, `<node> dist/main.mjs acp` or its `kimi` bin) for the
model leg of `wire-proxy --llm` (recorder/llm_upstream.py does kimi-cli).

Which model: Kimi Code 2.1.0's `dist/main.mjs` loads `$KIMI_CODE_HOME/config.toml` (default
`~/.kimi-code`): `default_model`, that alias's `provider`, the provider's `type` and
`base_url` (a `base_url` on the model wins). No environment variable moves a configured model:
`resolveModelConnection` reads `OPENAI_BASE_URL`/`KIMI_BASE_URL`/... only when the config gives
no base URL, and `KIMI_MODEL_BASE_URL` belongs to the model `KIMI_MODEL_NAME` makes (an alias of
its own, `__kimi_env_model__`, which the client would see in `session/new`).

How it is pointed: the agent gets a scratch HOME (0700) that mirrors the user's: every entry
linked to the user's, except `.kimi-code`, a scratch data dir whose entries are linked to the
user's data dir, except `config.toml`, a copy with only the default model's base URL set to the
loopback. HOME and not `KIMI_CODE_HOME`, because `kimi acp` tells the client a KIMI_CODE_HOME it
was given (initialize's `authMethods[].env`): the client's view stays the same. (When the user set
KIMI_CODE_HOME, the scratch data dir is given there instead, and the client sees its path.)
So the agent's sessions, journals (`sessions/`) and logs land in the user's dir as without the
leg (those two are made there first if missing); what it creates elsewhere at the top of HOME or
of the data dir is moved to the user's when the proxy ends (unless the user's has it by then),
and a file of the user's that it rewrote in place of the link (`workspaces.json`, written
atomically) is copied over the user's.
A change the agent writes to `config.toml` itself is lost (the copy is removed: it holds the
provider's api_key). When the user set `KIMI_MODEL_NAME` (no config model), `KIMI_MODEL_BASE_URL`
points it instead.

The agent is recognised from the command, before it runs: node with a script that is Kimi Code's
`dist/main.mjs` (its package.json names `@moonshot-ai/kimi-code`), or a program (`kimi` on PATH)
whose real path is that script.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .llm_upstream import NoLeg, Upstream
from .loopback_env import direct_to_loopback, give_back, write_private

PACKAGE = "@moonshot-ai/kimi-code"
HOME_ENV = "KIMI_CODE_HOME"
DATA_DIR = ".kimi-code"
# provider type -> the variable Kimi Code reads a base URL from when the config gives none
BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "openai_responses": "OPENAI_BASE_URL",
                "anthropic": "ANTHROPIC_BASE_URL", "kimi": "KIMI_BASE_URL"}
DIALECTS = {"openai": "openai-chat", "kimi": "openai-chat",
            "openai_responses": "openai-responses", "anthropic": "anthropic-messages"}
# made in the user's data dir before the agent starts, so that they are links in the scratch one
SHARED_DIRS = ("sessions", "logs")
CREDENTIALS = frozenset({"api_key", "apiKey", "oauth", "api_key_env", "apiKeyEnv",
                         "custom_headers", "customHeaders", "env"})


def _package_of(script: str) -> bool:
    """`script` is a dist/main.mjs of Kimi Code's npm package."""
    real = os.path.realpath(script)
    if os.path.basename(real) != "main.mjs":
        return False
    manifest = os.path.join(os.path.dirname(os.path.dirname(real)), "package.json")
    try:
        with open(manifest, encoding="utf-8") as f:
            return json.load(f).get("name") == PACKAGE
    except (OSError, ValueError, AttributeError):
        return False


def is_kimi_code(argv: Sequence[str], env: Mapping[str, str] | None = None) -> bool:
    if not argv:
        return False
    prog = argv[0]
    if os.path.basename(prog).startswith("node"):
        script = next((a for a in argv[1:] if not a.startswith("-")), None)
        return script is not None and _package_of(script)
    if os.sep not in prog:
        import shutil

        found = shutil.which(prog, path=(env or os.environ).get("PATH"))
        if found is None:
            return False
        prog = found
    return _package_of(prog)


def _clean(model: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in model.items() if k not in CREDENTIALS}


class KimiCodeUpstream(Upstream):
    """The default model of a Kimi Code config; `agent_env` makes the scratch data dir."""

    def __init__(self, base_url: str, provider_type: str, model: str | None, source: str,
                 config: dict[str, Any], data_dir: str, alias: str, provider: str,
                 own_home: str | None, user_home: str):
        super().__init__(base_url=base_url, env_var=HOME_ENV if own_home else "HOME",
                         provider_type=provider_type,
                         model=model, dialect=DIALECTS.get(provider_type, "raw"), source=source)
        self.config, self.data_dir, self.alias, self.provider = config, data_dir, alias, provider
        self.scratch: str | None = None
        self.own_home = bool(own_home)
        self.user_home = user_home
        # (scratch dir, the user's it mirrors, the names linked there)
        self.links: list[tuple[str, str, set[str]]] = []
        self.how = (f"{HOME_ENV}: a scratch copy of {data_dir}" if own_home else
                    "a scratch HOME mirroring yours") + \
            f", its config.toml's base_url for the model {alias!r} swapped"
        # in the llm_leg event: what a replay needs to configure the same model (no credentials)
        models = config.get("models") or {}
        self.extra = {"agent": "kimi-code", "alias": alias,
                      "model_config": _clean(models.get(alias) or {})}

    def agent_env(self, env: Mapping[str, str], stand_in: str) -> dict[str, str]:
        import copy
        import tempfile

        from . import toml_text

        config = copy.deepcopy(self.config)
        config["providers"][self.provider]["base_url"] = stand_in
        model = config["models"][self.alias]
        if "base_url" in model:
            model["base_url"] = stand_in
        text = toml_text.dumps(config)
        self.scratch = tempfile.mkdtemp(prefix="wire-proxy-kimi-code-")
        out = dict(env)
        if self.own_home:
            data = self.scratch  # the user named the data dir: the scratch one is named instead
            out[HOME_ENV] = data
        else:
            # HOME, not KIMI_CODE_HOME: `kimi acp` tells the client a KIMI_CODE_HOME it was
            # given (initialize's authMethods[].env), so that would change the client's view
            home = self.user_home
            self.links.append((self.scratch, home, set()))
            for name in sorted(os.listdir(home)) if os.path.isdir(home) else ():
                if name != DATA_DIR:
                    os.symlink(os.path.join(home, name), os.path.join(self.scratch, name))
                    self.links[-1][2].add(name)
            data = os.path.join(self.scratch, DATA_DIR)
            os.mkdir(data, 0o700)
            out["HOME"] = self.scratch
        self.links.append((data, self.data_dir, set()))
        os.makedirs(self.data_dir, mode=0o700, exist_ok=True)
        for name in SHARED_DIRS:
            os.makedirs(os.path.join(self.data_dir, name), mode=0o700, exist_ok=True)
        for name in sorted(os.listdir(self.data_dir)):
            if name != "config.toml":
                os.symlink(os.path.join(self.data_dir, name), os.path.join(data, name))
                self.links[-1][2].add(name)
        write_private(os.path.join(data, "config.toml"), text)
        direct_to_loopback(out)
        return out

    def cleanup(self) -> None:
        """Move what the agent made in the scratch dirs to the user's, and copy over the
        user's what it rewrote in place of a link (Kimi Code 2.1 writes `workspaces.json`
        atomically once it exists), then remove them; never our config copy."""
        scratch, self.scratch = self.scratch, None
        if scratch is None:
            return
        import shutil

        for mine, theirs, linked in reversed(self.links):
            give_back(mine, theirs, "config.toml" if theirs == self.data_dir else DATA_DIR,
                      frozenset(linked))
        self.links.clear()
        shutil.rmtree(scratch, ignore_errors=True)


def find_kimi_code(argv: Sequence[str], env: Mapping[str, str]) -> Upstream:
    import tomllib

    if env.get("KIMI_MODEL_NAME", "").strip():
        base = env.get("KIMI_MODEL_BASE_URL", "").strip()
        if not base.startswith(("http://", "https://")):
            raise NoLeg("KIMI_MODEL_NAME is set without an http(s) KIMI_MODEL_BASE_URL: the "
                        "model's address is not known")
        ptype = env.get("KIMI_MODEL_PROVIDER_TYPE", "").strip() or "kimi"
        return Upstream(base_url=base.rstrip("/"), env_var="KIMI_MODEL_BASE_URL",
                        provider_type=ptype, model=env["KIMI_MODEL_NAME"].strip(),
                        dialect=DIALECTS.get(ptype, "raw"), source="KIMI_MODEL_*")
    data_dir = env.get(HOME_ENV) or os.path.join(env.get("HOME") or "~", DATA_DIR)
    data_dir = os.path.abspath(os.path.expanduser(data_dir))
    path = os.path.join(data_dir, "config.toml")
    try:
        with open(path, encoding="utf-8") as f:
            config = tomllib.loads(f.read())
    except FileNotFoundError:
        raise NoLeg(f"no Kimi Code config at {path}: the model's address is not known") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise NoLeg(f"cannot read the agent's Kimi Code config {path}: {e}") from None
    models = config.get("models")
    models = models if isinstance(models, dict) else {}
    providers = config.get("providers")
    providers = providers if isinstance(providers, dict) else {}
    alias = config.get("default_model")
    model = models.get(alias) if isinstance(alias, str) else None
    if not isinstance(model, dict):
        raise NoLeg(f"the Kimi Code config {path} names no default model {alias!r}")
    pname = model.get("provider")
    provider = providers.get(pname) if isinstance(pname, str) else None
    if not isinstance(provider, dict):
        raise NoLeg(f"the Kimi Code config {path} has no provider {pname!r}")
    ptype = str(provider.get("type") or "")
    var = BASE_URL_ENV.get(ptype)
    base = str(model.get("base_url") or provider.get("base_url") or (env.get(var) if var else "")
               or "")
    if not base.startswith(("http://", "https://")):
        raise NoLeg(f"the model's base URL {base!r} (provider {pname!r}) is not an http(s) URL")
    assert isinstance(alias, str) and isinstance(pname, str)
    return KimiCodeUpstream(base_url=base.rstrip("/"), provider_type=ptype,
                            model=str(model.get("model") or "") or None, source=path,
                            config=config, data_dir=data_dir, alias=alias, provider=pname,
                            own_home=env.get(HOME_ENV),
                            user_home=os.path.abspath(os.path.expanduser(env.get("HOME") or "~")))
