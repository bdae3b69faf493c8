"""Work other packages do on a session once the loader has stored all of its frames.

The recorder knows nothing of turns, tokens or indexes (those are analysis's), yet the cheapest
moment to summarise a session is while its file is still open for writing, in the background
loader, after the relay is long done. Packages declare a function in the entry-point group below;
the loader calls each with the open, writable store and the session id. A failing hook costs
its own summary only: readers compute what a summary would have held themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

GROUP = "wire_recorder.after_load"

Hook = Callable[[Any, str], None]


def hooks() -> list[tuple[str, Hook]]:
    from importlib import metadata

    try:
        eps = sorted(metadata.entry_points(group=GROUP), key=lambda ep: ep.name)
    except Exception:  # unreadable metadata of some other distribution
        return []
    out = []
    for ep in eps:
        try:
            out.append((ep.name, ep.load()))
        except Exception:
            continue
    return out


def run(store: Any, session_id: str, say: Callable[[str], None] | None = None) -> list[str]:
    """Call every hook on one stored session. Returns the names of the hooks that failed."""
    failed = []
    for name, fn in hooks():
        try:
            fn(store, session_id)
        except Exception as e:
            failed.append(name)
            if say is not None:
                say(f"session {session_id}: after-load step {name!r} failed "
                    f"({type(e).__name__}: {e}); readers will compute it themselves")
    return failed
