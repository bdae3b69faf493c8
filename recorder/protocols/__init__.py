"""Protocol adapters: Wire, ACP and MCP, one package each, and any a third party installs.

Adapters are found through the entry-point group `wire_recorder.protocols` (name = the
protocol's name, value = `module:ADAPTER`). Detection order is fixed and documented
(docs/protocols.md): the in-tree adapters first, in the order of `IN_TREE`, then every other
entry point by name. The in-tree ones are imported directly, so a source tree without installed
metadata still knows them; an entry point that fails to load, or names no Adapter, is skipped
with one line on stderr, so a broken plugin never stops a recording.

The entry points are read on first need (a name that is not in tree, or any listing of the
adapters: `names()`, `detect`, iterating `ADAPTERS`), not at import: importlib.metadata's scan of
every installed distribution costs 10-30 ms, which a command reading in-tree protocols only
(most runs of the readers) need not pay. What is found, and in what order, is the same.

`get(name)` returns the adapter (unknown or missing names fall back to a generic JSON-RPC
adapter), `detect(...)` asks each adapter in order whether a frame reveals its protocol.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import TYPE_CHECKING, Any

from ..completing_dict import CompletedOnDemand
from .base import Adapter

if TYPE_CHECKING:
    from importlib import metadata

GROUP = "wire_recorder.protocols"
# Wire first: its Wire-only methods and `protocol_version` are the most specific tells; ACP's
# integer protocolVersion before MCP's string one.
IN_TREE = ("wire", "acp", "mcp")
# What sessions recorded before the protocol column (schema < 3) speak.
LEGACY = "wire"



class _Registry(CompletedOnDemand[Adapter]):
    """The adapters by name, in detection order: the in-tree ones at once, the entry points'
    the first time anything else is asked for."""

    _scanned = False
    _lock = threading.Lock()

    def _complete(self) -> None:
        if not self._scanned:
            with self._lock:
                if not self._scanned:
                    _scan_entry_points()
                    self._scanned = True


ADAPTERS: dict[str, Adapter] = _Registry()


def _warn(what: str) -> None:
    print(f"wire-recorder: protocol adapter {what}; skipped", file=sys.stderr)


def _entry_points() -> list[metadata.EntryPoint]:
    from importlib import metadata

    try:
        return sorted(metadata.entry_points(group=GROUP), key=lambda ep: ep.name)
    except Exception as e:  # unreadable metadata of some other distribution
        _warn(f"entry points unreadable ({type(e).__name__}: {e})")
        return []


def _add(adapter: object, origin: str) -> None:
    if not isinstance(adapter, Adapter) or not adapter.name:
        _warn(f"{origin} is not a named wire_recorder Adapter")
    elif dict.__contains__(ADAPTERS, adapter.name):
        _warn(f"{origin}: protocol {adapter.name!r} is already taken")
    else:
        ADAPTERS[adapter.name] = adapter


def _load() -> None:
    for name in IN_TREE:
        _add(importlib.import_module(f"{__name__}.{name}").ADAPTER, name)


def _scan_entry_points() -> None:
    for ep in _entry_points():
        if ep.name in IN_TREE:  # declared by this distribution, loaded above
            if ep.value.replace(" ", "") != f"{__name__}.{ep.name}:ADAPTER":
                _warn(f"{ep.name!r} ({ep.value}): the name is the in-tree adapter's")
            continue
        try:
            adapter = ep.load()
        except Exception as e:
            _warn(f"{ep.name!r} ({ep.value}) failed to load: {type(e).__name__}: {e}")
            continue
        _add(adapter, f"{ep.name!r} ({ep.value})")


class _Generic(Adapter):
    name = "unknown"
    title = "JSON-RPC"


GENERIC = _Generic()
_load()


def names() -> list[str]:
    """The protocols known here, in detection order."""
    return list(ADAPTERS)


def get(name: str | None) -> Adapter:
    # no adapter has an empty name (_add): no need to read the entry points for that
    return ADAPTERS.get(name, GENERIC) if name else GENERIC


def for_session(name: str | None) -> Adapter:
    """The adapter that reads a stored session: its protocol's, and the Wire one for sessions
    recorded before the protocol column or naming a protocol no adapter here knows (how they
    have always been read)."""
    return (ADAPTERS.get(name) if name else None) or ADAPTERS[LEGACY]


def detect(method: str, params: Any, direction: str) -> tuple[str, str | None] | None:
    for adapter in ADAPTERS.values():
        hint = adapter.detect(method, params, direction)
        if hint is not None:
            return hint
    return None


def foreign(method: str, session: Adapter) -> Adapter | None:
    """The adapter a method belongs to when it is not the session's protocol's."""
    if session is GENERIC or session.claims(method):
        return None
    for adapter in ADAPTERS.values():
        if adapter is not session and adapter.claims(method):
            return adapter
    return None
