"""Protocol adapters: Wire, ACP and MCP, one module each.

Every module in this package that defines `ADAPTER` is registered on import, in file-name order;
adding a protocol means adding one file here. `get(name)` returns the adapter (unknown or missing
names fall back to a generic JSON-RPC adapter), `detect(...)` asks each adapter whether a frame
reveals its protocol.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from .base import Adapter

ADAPTERS: dict[str, Adapter] = {}


def _load() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name == "base" or info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        adapter = getattr(mod, "ADAPTER", None)
        if isinstance(adapter, Adapter):
            ADAPTERS[adapter.name] = adapter


class _Generic(Adapter):
    name = "unknown"
    title = "JSON-RPC"


GENERIC = _Generic()
_load()


def names() -> list[str]:
    return list(ADAPTERS)


def get(name: str | None) -> Adapter:
    return ADAPTERS.get(name or "", GENERIC)


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
