"""`wire-proxy recover`: bring spools left by a killed proxy (and its loader) into their DB."""

from __future__ import annotations

import os

from .edge import PROXY, say
from .errors import InputError
from .loader import ingest_spool, orphan_spools, spool_is_orphan


def recover(path: str) -> list[dict]:
    """Recover one .spool, or every orphan spool of a .db. Returns one summary per session."""
    if path.endswith(".spool"):
        if not os.path.exists(path):
            raise InputError(f"{path}: no such spool")
        if not spool_is_orphan(path):
            raise InputError(f"{path} is still being recorded by a live proxy", "try again later")
        spools = [path]
    else:
        spools = orphan_spools(path)
        if not spools and not os.path.exists(path):
            raise InputError(f"{path}: no such recording", "give a .db or a .spool path")
    return [ingest_spool(spool, follow=False) for spool in spools]


def recover_paths(paths: list[str]) -> int:
    os.umask(0o077)
    found = 0
    for path in paths:
        for s in recover(path):
            found += 1
            say(PROXY, f"recovered session {s['session_id']} ({s['frames']} frames) "
                       f"into {s['db']}")
    if not found:
        say(PROXY, "nothing to recover")
    return 0
