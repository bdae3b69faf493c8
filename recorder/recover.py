"""`wire-proxy recover`: bring spools left by a killed proxy (and its loader) into their DB."""

from __future__ import annotations

import os

from .edge import PROXY, say
from .errors import InputError, SpoolError
from .loader import (
    FAILED_SUFFIX,
    failure_text,
    ingest_spool,
    keep_failed,
    orphan_spools,
    spool_is_orphan,
    spools_of,
)


def recover(path: str, failed: list[str] | None = None) -> list[dict]:
    """Recover one .spool, or every orphan spool of a .db. Returns one summary per session.
    A spool that cannot be loaded is never deleted: it is set aside as `*.spool.failed` and
    one line per spool saying why and where is appended to `failed` (raised when not given)."""
    if path.endswith((".spool", ".spool" + FAILED_SUFFIX)):
        if not os.path.exists(path):
            raise InputError(f"{path}: no such spool")
        if not spool_is_orphan(path):
            raise InputError(f"{path} is still being recorded by a live proxy", "try again later")
        spools = [path]
    else:
        spools = orphan_spools(path)
        if not spools and not os.path.exists(path) and not spools_of(path):
            raise InputError(f"{path}: no such recording", "give a .db or a .spool path")
    done = []
    problems = [] if failed is None else failed
    for spool in spools:
        try:
            done.append(ingest_spool(spool, follow=False))
        except Exception as e:  # a traceback helps nobody; the spool is what matters
            kept = keep_failed(spool)
            problems.append(f"could not recover {spool} ({failure_text(e)}); it is kept as "
                            f"{kept}: run `{PROXY} recover {kept}` once that is fixed")
    if failed is None and problems:
        raise SpoolError("; ".join(problems))
    return done


def recover_paths(paths: list[str]) -> int:
    os.umask(0o077)
    found = 0
    failed: list[str] = []
    for path in paths:
        for s in recover(path, failed):
            found += 1
            say(PROXY, f"recovered session {s['session_id']} ({s['frames']} frames) "
                       f"into {s['db']}")
    for line in failed[:-1]:
        say(PROXY, line)
    if failed:
        raise SpoolError(failed[-1])  # the edge's one line and exit 2
    if not found:
        # a spool still held is a session being stored now, or one whose killed proxy or
        # loader has not finished exiting: said, so that "nothing" is not taken for "lost"
        held = [s for p in paths if not p.endswith(".spool") for s in spools_of(p)
                if not spool_is_orphan(s)]
        if held:
            say(PROXY, f"nothing to recover now: {len(held)} spool(s) still held by a live "
                       f"process ({held[0]}{', …' if len(held) > 1 else ''}); run "
                       f"`{PROXY} recover` again once it has exited")
        else:
            say(PROXY, "nothing to recover")
    return 0
