"""kimi-cli replayed from a model leg recorded through a scratch share dir (an `anthropic`
provider, which takes no base URL from the environment: recorder/llm_upstream_kimi_share.py):
kimi gets a scratch KIMI_SHARE_DIR whose config.toml is the user's (if any) with the recorded
model, from the recording's `llm_leg` event (alias, settings, provider type), on the loopback
that serves the recorded answers (llm_leg_pin.py). So the replay needs only the agent command,
in any HOME. The user's skills, plugins, MCP file and login (`credentials/`: `kimi acp` refuses
session/new without one, whatever the model) are linked in; sessions and logs stay in the
scratch dir.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wire_recorder.recorder import kimi_config
from wire_recorder.recorder.errors import InputError
from wire_recorder.recorder.llm_upstream import is_kimi
from wire_recorder.recorder.llm_upstream_kimi_share import ENV, share_dir
from wire_recorder.recorder.loopback_env import direct_to_loopback
from wire_recorder.recorder.toml_text import dumps as to_toml

from .llm_leg_kimi_code import leg_event, on_loopback

if TYPE_CHECKING:
    from ..recording import Recording

SHARE_LINKS = ("skills", "plugins", "mcp.json", "credentials")


class KimiCliLeg:
    """The scratch share dir a kimi-cli replay of such a recorded leg runs with."""

    @classmethod
    def of(cls, rec: Recording, argv: Sequence[str], env: Mapping[str, str]) -> KimiCliLeg | None:
        if not is_kimi(argv):
            return None
        event = leg_event(rec)
        if event is None or event.get("agent") != "kimi-cli" or event.get("env_var") != ENV:
            return None  # pointed by KIMI_BASE_URL / OPENAI_BASE_URL, as recorded
        return cls(event, argv, env)

    def __init__(self, event: dict[str, Any], argv: Sequence[str], env: Mapping[str, str]):
        try:
            config, self.source = kimi_config.load(argv, env)
        except kimi_config.KimiConfigError as e:
            raise InputError(str(e), "fix the config, or replay with --live-llm") from None
        self.event, self.user_config = event, config or {}
        self.source = self.source if config is not None else None
        self.root = tempfile.mkdtemp(prefix="wire-replay-llm-leg-")
        self.share = os.path.join(self.root, "share")
        self.linked: list[str] = []
        try:
            os.mkdir(self.share, 0o700)
            user = share_dir(env)
            for name in SHARE_LINKS:
                if os.path.exists(os.path.join(user, name)):
                    os.symlink(os.path.join(user, name), os.path.join(self.share, name))
                    self.linked.append(name)
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.base_env = env

    def env(self, stand_in: str) -> dict[str, str]:
        """The agent's environment, its config written for the loopback at `stand_in`."""
        config = on_loopback(self.user_config, self.event, "default", "", stand_in)
        try:
            text = to_toml(config)
        except TypeError as e:
            raise InputError(f"cannot copy the agent's kimi config: {e}") from None
        with open(os.path.join(self.share, "config.toml"), "w", encoding="utf-8") as f:
            f.write(text)
        out = dict(self.base_env)
        out[ENV] = self.share
        direct_to_loopback(out)
        return out

    def note(self) -> str:
        return (f"kimi with a scratch {ENV}, its config {self.source or '(none found)'} with "
                f"the recorded model {self.event.get('alias')!r} "
                f"({self.event.get('provider_type')}) on loopback"
                + (f"; linked: {', '.join(self.linked)}" if self.linked else ""))

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
