"""What every agent pointed at a model on loopback gets in its environment and scratch files."""

from __future__ import annotations

import os


def direct_to_loopback(env: dict[str, str]) -> dict[str, str]:
    """`env` with 127.0.0.1 added to NO_PROXY/no_proxy: the loopback model is reached directly,
    never through a proxy the user's variables name."""
    for name in ("NO_PROXY", "no_proxy"):
        env[name] = ",".join(x for x in (env.get(name), "127.0.0.1") if x)
    return env


def write_private(path: str, text: str) -> None:
    """A new file only its owner can read (a config copy holds the user's API key)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
