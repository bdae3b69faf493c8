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


def give_back(mine: str, theirs: str, ours: str, rewritten: frozenset[str] = frozenset()) -> None:
    """Move what the agent made in the scratch dir `mine` to the user's `theirs`, where nothing
    of that name is yet; links and `ours` (our own copy) stay. A name in `rewritten` was a link
    to a file of theirs that the agent replaced with a new file (written atomically): copied
    over theirs."""
    import shutil

    for name in os.listdir(mine) if os.path.isdir(mine) else ():
        src = os.path.join(mine, name)
        if name == ours or os.path.islink(src):
            continue
        dest = os.path.join(theirs, name)
        try:
            if name in rewritten and os.path.isfile(src) and not os.path.isdir(dest):
                shutil.copyfile(src, dest)
            elif not os.path.lexists(dest):
                shutil.move(src, dest)
        except OSError:
            pass  # left behind with the scratch dir: nothing to break the relay for
