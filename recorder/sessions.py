"""Picking a session the way people name it: `--session NAME` everywhere.

One rule for every command that picks a session (wire-show, wire-stats, wire-export, wire-check,
wire-replay, ...): the wanted text is matched, in this order, against

1. a session's name (`wire-proxy --name`) or id, exactly;
2. the start of a session id, or of a name.

The first rule with hits decides. One hit is the session; several are ambiguous and no hit is
unknown: both raise SessionNotFound (one line, exit 2) listing the candidates with their names,
so the user can copy the right one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from .errors import SessionNotFound
from .visible import visible

S = TypeVar("S", bound=Mapping[str, Any])

# how many candidates an error lists (the rest are counted)
SHOWN = 6


def label(session: Mapping[str, Any]) -> str:
    """`name (id)` when the session has a name, else its id: how a session is shown to people
    (control characters made visible: names come from recordings)."""
    sid = str(session.get("session_id"))
    name = session.get("name")
    text = f"{name} ({sid})" if name and name != sid else sid
    return visible(text)


def candidates(sessions: Sequence[Mapping[str, Any]], limit: int = SHOWN) -> str:
    """The sessions as a short list for an error's hint."""
    shown = ", ".join(label(s) for s in sessions[:limit])
    more = len(sessions) - limit
    return shown + (f" and {more} more" if more > 0 else "")


def pick_session(sessions: Sequence[S], wanted: str | None, where: str = "the recordings") -> S:
    """The one session `wanted` names (exact name or id, else a unique prefix of an id or name),
    or the only session there is when `wanted` is None. `where` names the input in errors
    (a file name, "3 files"). Raises SessionNotFound listing the candidates."""
    if not sessions:
        raise SessionNotFound(f"{where}: no sessions recorded")
    if wanted is None:
        if len(sessions) == 1:
            return sessions[0]
        raise SessionNotFound(f"{where} holds {len(sessions)} sessions",
                              "pick one with --session NAME or ID: " + candidates(sessions))
    hits = [s for s in sessions if wanted in (s.get("session_id"), s.get("name"))]
    if not hits:
        hits = [s for s in sessions
                if str(s.get("session_id") or "").startswith(wanted)
                or str(s.get("name") or "").startswith(wanted)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise SessionNotFound(f"{where} has no session matching {wanted!r}",
                              "sessions there: " + candidates(sessions))
    # several sessions may share a name; each id is unique
    raise SessionNotFound(f"{where} has {len(hits)} sessions matching {wanted!r}",
                          "give more of the name or the id: " + candidates(hits))
