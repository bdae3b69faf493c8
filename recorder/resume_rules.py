"""How a recorded agent command reopens an earlier session, read from its argv: one set of rules
for replay (which replays the origin first, replay/origins.py) and export (which writes the
origin beside a transcript, analysis/export_origin.py).

The session flag itself (kimi's `-S`/`--session`) is the adapter's `session_flags`; these are
the spellings around it. An adapter without session flags has no resuming at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

CONTINUE_FLAGS = ("-C", "--continue")  # the work dir's last session: no id
RESUME_ALIASES = ("-r", "--resume")  # kimi's other spelling of -S (its exit message uses it)
WORKDIR_FLAGS = ("-w", "--work-dir")  # kimi keys its sessions on the work dir
PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


def session_flags(adapter_flags: Sequence[str]) -> tuple[str, ...]:
    """The adapter's session flags and their aliases; () when it has none."""
    flags = tuple(adapter_flags)
    return flags + RESUME_ALIASES if flags else ()


def resume_flag_in(argv: Sequence[str], flags: Sequence[str],
                   strict: bool = False) -> tuple[str, str | None] | None:
    """("-S", ID) (the first of `flags`) or ("-C", None) when `argv` resumes a session; None
    otherwise. `strict`: an id that is not plain counts as none (it never goes on a live
    command line)."""
    if not flags:
        return None
    args = list(argv[1:])
    for i, a in enumerate(args):
        if a in CONTINUE_FLAGS:
            return ("-C", None)
        flag, eq, val = a.partition("=")
        if flag in flags:
            v = val if eq else (args[i + 1] if i + 1 < len(args) else "")
            if not strict or PLAIN_ID.fullmatch(v):
                return (flags[0], v)
            return None
    return None


def workdir_in(argv: Sequence[str], cwd: str | None) -> str | None:
    """Where the agent worked: its -w, else the recorded cwd."""
    args = list(argv[1:])
    for i, a in enumerate(args):
        flag, eq, val = a.partition("=")
        if flag in WORKDIR_FLAGS:
            return val if eq else (args[i + 1] if i + 1 < len(args) else None)
    return cwd


def names_id(ident: str) -> re.Pattern[bytes]:
    """Matches `ident` as a whole word in raw bytes (kimi made an id up and said it: "kimi -r ID")."""
    return re.compile(rb"(?<![\w.:-])" + re.escape(ident.encode()) + rb"(?![\w.:-])")
