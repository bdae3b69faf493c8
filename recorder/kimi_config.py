"""The kimi-cli config a command would load, read once for the model leg (recorder/llm_upstream.py)
and for replay's pinned model (replay/agents/kimi.py).

kimi-cli 1.51 (`kimi_cli/app.py`) takes `--config` inline (TOML or JSON), else the file
`--config-file` names, else `$KIMI_SHARE_DIR/config.toml` or `~/.kimi/config.toml`. The callers
differ only in what a missing or bad config means to them, so this raises one error type and
says "no file" with None.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any


class KimiConfigError(ValueError):
    """The config cannot be read or parsed (one line: which, and why)."""


def _flag(argv: Sequence[str], name: str) -> str | None:
    """The value of the last `--name VALUE` / `--name=VALUE`, as kimi's option parser takes it."""
    found = None
    for i, a in enumerate(argv[1:], start=1):
        if a == name and i + 1 < len(argv):
            found = argv[i + 1]
        elif a.startswith(name + "="):
            found = a[len(name) + 1:]
    return found


def parse(text: str, where: str) -> dict[str, Any]:
    """A config's text, TOML or (as kimi also takes) a JSON object."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        toml_error = e
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        return data
    raise KimiConfigError(f"cannot read the agent's kimi config {where}: {toml_error}")


def load(argv: Sequence[str], env: Mapping[str, str]) -> tuple[dict[str, Any] | None, str]:
    """The config the kimi command `argv` would load with `env`, and where it is ("--config",
    or the file's path); None for the config when there is no file there. Raises
    KimiConfigError."""
    inline = _flag(argv, "--config")
    if inline is not None:
        return parse(inline, "given with --config"), "--config"
    given = _flag(argv, "--config-file")
    if given is not None:
        path = os.path.abspath(os.path.expanduser(given))
    else:
        share = env.get("KIMI_SHARE_DIR") or os.path.join(env.get("HOME") or "~", ".kimi")
        path = os.path.join(os.path.expanduser(share), "config.toml")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None, path
    except (OSError, UnicodeDecodeError) as e:
        raise KimiConfigError(f"cannot read the agent's kimi config {path}: {e}") from None
    return parse(text, path), path
