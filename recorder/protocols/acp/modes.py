"""The session mode an ACP agent is in (kimi's and Kimi Code's `default`, `plan`, `auto`,
`yolo`), as its frames say it: `session/new`'s (or load's) `modes.currentModeId` or its
`configOptions` select of category mode, then the client's `session/set_mode` /
`session/set_config_option`, and the agent's `current_mode_update` / `config_option_update`.
Replay names it in the first divergence when the agent's differs from the recording's
(replay/mode_note.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _of_options(options: Any) -> str | None:
    for opt in options if isinstance(options, list) else []:
        opt = _obj(opt)
        if opt.get("category") == "mode" or opt.get("id") == "mode":
            cur = opt.get("currentValue")
            return cur if isinstance(cur, str) else None
    return None


def mode_of(frames: Iterable[tuple[str, Any]]) -> str | None:
    """The mode after `frames` ((direction c2a | a2c, JSON-RPC object) in order); None: they
    do not say."""
    mode: str | None = None
    for direction, obj in frames:
        obj = _obj(obj)
        params = _obj(obj.get("params"))
        if direction == "c2a":
            if obj.get("method") == "session/set_mode" and isinstance(params.get("modeId"), str):
                mode = params["modeId"]
            elif obj.get("method") == "session/set_config_option" and \
                    params.get("configId") == "mode" and isinstance(params.get("value"), str):
                mode = params["value"]
            continue
        result = _obj(obj.get("result"))
        cur = _obj(result.get("modes")).get("currentModeId")
        said = cur if isinstance(cur, str) else _of_options(result.get("configOptions"))
        if obj.get("method") == "session/update":
            update = _obj(params.get("update"))
            kind = update.get("sessionUpdate")
            if kind == "current_mode_update" and isinstance(update.get("currentModeId"), str):
                said = update["currentModeId"]
            elif kind == "config_option_update":
                said = _of_options(update.get("configOptions"))
        mode = said or mode
    return mode
