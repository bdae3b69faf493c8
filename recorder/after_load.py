"""Work other packages do on a session once the loader has stored all of its frames.

The recorder knows nothing of turns, tokens or indexes (those are analysis's), yet the cheapest
moment to summarise a session is while its file is still open for writing, in the background
loader, after the relay is long done. Packages declare a function in the entry-point group below;
the loader calls each (in the order of their names) with the open, writable store and the
session id. A hook may return a callable: the loader calls it with the recording's path once it
has closed the store (the file is then whole, without its WAL, and its size and time final).
A failing hook or callable costs its own work only: readers compute what it would have held
themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

GROUP = "wire_recorder.after_load"

Hook = Callable[[Any, str], Any]
AfterClose = Callable[[str], object]


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


def run(store: Any, session_id: str, say: Callable[[str], None] | None = None,
        later: list[tuple[str, AfterClose]] | None = None) -> list[str]:
    """Call every hook on one stored session; the callables they return go into `later` (for
    `closed`). Returns the names of the hooks that failed."""
    failed = []
    for name, fn in hooks():
        try:
            got = fn(store, session_id)
        except Exception as e:
            failed.append(name)
            if say is not None:
                say(f"session {session_id}: after-load step {name!r} failed "
                    f"({type(e).__name__}: {e}); readers will compute it themselves")
            continue
        if later is not None and callable(got):
            later.append((name, got))
    return failed


def closed(later: list[tuple[str, AfterClose]], path: str,
           say: Callable[[str], None] | None = None) -> list[str]:
    """Call what the hooks returned, with the path of the recording its loader has closed.
    Returns the names of those that failed."""
    failed = []
    for name, fn in later:
        try:
            fn(path)
        except Exception as e:
            failed.append(name)
            if say is not None:
                say(f"{path}: after-close step {name!r} failed ({type(e).__name__}: {e}); "
                    "readers will compute it themselves")
    return failed
