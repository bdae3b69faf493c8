"""Kimi Code 2.x replayed from its recorded model leg (`wire-proxy --llm -- <node> main.mjs acp`):
the recording's model served as recorded from loopback (llm_leg_pin.py), configured the way
kimi_code.py configures a pinned model: a scratch HOME whose `~/.kimi-code/config.toml` is the
user's (if any) with the model swapped, here for the recorded one: the alias, its settings and
the provider type the recording's `llm_leg` event names (recorder/llm_upstream_kimicode.py), so
the agent asks the same requests as when it was recorded, and the base URL the loopback's. So
the replay needs only the agent command, in any HOME.

The agent is recognised twice: the command is Kimi Code's (recorder/llm_upstream_kimicode.py)
and the recording was made by it (its initialize answer, kimi_code.recognises).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wire_recorder.recorder.errors import InputError
from wire_recorder.recorder.llm_upstream_kimicode import is_kimi_code

from . import kimi_code
from .kimi import to_toml

if TYPE_CHECKING:
    from ..recording import Recording

PROVIDER = "wire-replay-leg"


def on_loopback(user_config: Mapping[str, Any], ev: Mapping[str, Any], default_alias: str,
                default_type: str, stand_in: str) -> dict[str, Any]:
    """The user's agent config with the recorded model (`ev`: the leg's model event) as its
    default, and every model on one provider: the loopback at `stand_in`."""
    alias = str(ev.get("alias") or default_alias)
    model = dict(ev.get("model_config") or {}) if isinstance(ev.get("model_config"),
                                                               dict) else {}
    model["provider"] = PROVIDER
    if ev.get("model"):
        model["model"] = ev["model"]
    config = dict(user_config)
    own = config.get("models")
    own = own if isinstance(own, dict) else {}
    config["models"] = {**{k: {**v, "provider": PROVIDER} for k, v in own.items()
                           if isinstance(v, dict) and k != alias}, alias: model}
    config["default_model"] = alias
    config["providers"] = {PROVIDER: {"type": str(ev.get("provider_type") or default_type),
                                      "base_url": stand_in, "api_key": "wire-replay"}}
    return config


def leg_event(rec: Recording) -> dict[str, Any] | None:
    """The recording's `llm_leg` event (how its model was reached), None without one."""
    from wire_recorder.recorder.store import open_store

    try:
        with open_store(rec.path, read_only=True) as store:
            frames = store.frames(rec.session_id, directions=("proxy",))
    except Exception:  # noqa: BLE001 - llm_leg_pin.exchanges_of read it a moment ago
        return None
    for f in frames:
        if f.method == "llm_leg":
            try:
                ev = json.loads(bytes(f.raw or b"{}"))
            except ValueError:
                return None
            return ev if isinstance(ev, dict) else None
    return None


class KimiCodeLeg:
    """The scratch HOME a Kimi Code replay of a recorded leg runs in."""

    @classmethod
    def of(cls, rec: Recording, argv: Sequence[str],
           env: Mapping[str, str]) -> KimiCodeLeg | None:
        if not is_kimi_code(argv, env) or not kimi_code.recognises(rec):
            return None
        event = leg_event(rec)
        if event is None or event.get("env_var") == "KIMI_MODEL_BASE_URL":
            return None  # the model KIMI_MODEL_* made: pointed by that variable, as recorded
        if event.get("agent") != "kimi-code":
            raise InputError(f"{rec.path}: session {rec.session_id} has a model leg that does "
                             "not say how Kimi Code's model was configured (recorded by an "
                             "older wire-proxy --llm)", "replay with --live-llm")
        return cls(event, env)

    def __init__(self, event: dict[str, Any], env: Mapping[str, str]):
        self.event = event
        self.user_config, self.source = kimi_code.user_config(env)
        self.root = tempfile.mkdtemp(prefix="wire-replay-llm-leg-")
        self.home = os.path.join(self.root, "home")
        self.config_path = os.path.join(self.home, ".kimi-code", "config.toml")
        self.linked: list[str] = []
        try:
            os.makedirs(os.path.dirname(self.config_path))
            self._link_home(env.get("KIMI_CODE_HOME"), env.get("HOME"))
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.base_env = env

    def _link_home(self, data_dir: str | None, home: str | None) -> None:
        for rel in kimi_code.HOME_LINKS:
            tail = rel.split("/", 1)[1]
            if rel.startswith(".kimi-code/") and data_dir:
                src = os.path.join(data_dir, tail)
            elif home:
                src = os.path.join(home, rel)
            else:
                continue
            src = os.path.abspath(os.path.expanduser(src))
            if os.path.exists(src):
                dest = os.path.join(self.home, rel)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                os.symlink(src, dest)
                self.linked.append(rel)

    def env(self, stand_in: str) -> dict[str, str]:
        """The agent's environment, its config written for the loopback at `stand_in`."""
        config = on_loopback(self.user_config, self.event, kimi_code.DEFAULT_ALIAS, "openai",
                             stand_in)
        config["models"][config["default_model"]].pop("base_url", None)  # (the provider's)
        config.pop("default_provider", None)
        config["telemetry"] = False
        catalog = config.get("model_catalog")
        config["model_catalog"] = {**(catalog if isinstance(catalog, dict) else {}),
                                   "refresh_on_start": False, "refresh_interval_ms": 0}
        try:
            text = to_toml(config)
        except TypeError as e:
            raise InputError(f"cannot copy the agent's Kimi Code config: {e}") from None
        with open(self.config_path, "w", encoding="utf-8") as f:
            f.write(text)
        return kimi_code.agent_env(self.base_env, self.home)

    def note(self) -> str:
        return (f"Kimi Code in a scratch HOME, its config {self.source or '(none found)'} with "
                f"the recorded model {self.event.get('alias')!r} "
                f"({self.event.get('provider_type')}) on loopback"
                + (f"; linked from HOME: {', '.join(self.linked)}" if self.linked else ""))

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
