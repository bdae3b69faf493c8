"""The project's wire-recorder config: `[tool.wire-recorder]` in pyproject.toml, or a
`wire-recorder.toml` (its top level is that table), found from a directory upwards.

The nearest directory holding either file wins; in one directory `wire-recorder.toml` comes
before pyproject.toml, and a pyproject.toml without a `[tool.wire-recorder]` table does not stop
the search. Only the `redact` table is read today (recorder.redact). tomllib is imported on first
use so that the proxy, which never reads the config, does not pay for it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .errors import InputError


class ConfigError(InputError):
    """The project's config file cannot be used: not TOML, or a key with a wrong value."""


@dataclass
class ProjectConfig:
    path: str | None = None  # the file the table came from; None when there is none
    table: dict[str, Any] = field(default_factory=dict)  # the [tool.wire-recorder] table


def _read_toml(path: str) -> dict[str, Any]:
    import tomllib

    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from e


def find_config(start: str | None = None) -> ProjectConfig:
    """The config that applies to `start` (default: the current directory).

    Raises ConfigError when the nearest config file cannot be read or is not TOML."""
    d = os.path.abspath(start or os.getcwd())
    while True:
        own = os.path.join(d, "wire-recorder.toml")
        if os.path.isfile(own):
            return ProjectConfig(own, _read_toml(own))
        pp = os.path.join(d, "pyproject.toml")
        if os.path.isfile(pp):
            data = _read_toml(pp)
            tool = data.get("tool")
            if isinstance(tool, dict) and "wire-recorder" in tool:
                table = tool["wire-recorder"]
                if not isinstance(table, dict):
                    raise ConfigError(f"{pp}: [tool.wire-recorder] must be a table")
                return ProjectConfig(pp, table)
        parent = os.path.dirname(d)
        if parent == d:
            return ProjectConfig()
        d = parent
