"""`wire-proxy recover`: bring spools left by a killed proxy (and its loader) into their DB."""

from __future__ import annotations

import os
import sys

from .errors import UserError
from .loader import ingest_spool, orphan_spools, spool_is_orphan
from .spool import SpoolError


def recover(path: str) -> list[dict]:
    """Recover one .spool, or every orphan spool of a .db. Returns one summary per session."""
    if path.endswith(".spool"):
        if not os.path.exists(path):
            raise UserError(f"{path}: no such spool")
        if not spool_is_orphan(path):
            raise UserError(f"{path} is still being recorded by a live proxy", "try again later")
        spools = [path]
    else:
        spools = orphan_spools(path)
        if not spools and not os.path.exists(path):
            raise UserError(f"{path}: no such recording", "give a .db or a .spool path")
    out = []
    for spool in spools:
        try:
            out.append(ingest_spool(spool, follow=False))
        except SpoolError as e:
            raise UserError(str(e)) from None
    return out


def recover_paths(paths: list[str]) -> int:
    os.umask(0o077)
    found = 0
    for path in paths:
        for s in recover(path):
            found += 1
            sys.stderr.write(f"wire-proxy: recovered session {s['session_id']} "
                             f"({s['frames']} frames) into {s['db']}\n")
    if not found:
        sys.stderr.write("wire-proxy: nothing to recover\n")
    return 0
