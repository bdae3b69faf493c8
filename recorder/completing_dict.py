"""A dict that holds its cheap entries at once and brings in the rest on first need.

The protocol adapters (recorder/protocols) and the replay matchers (replay/matchers.py) keep the
in-tree entries from import and add third parties' from entry points only when a name is not
found or the whole table is read: importlib.metadata's scan of every installed distribution
costs 10-30 ms a command. A subclass says how to complete the table (`_complete`, idempotent);
what is found, and in what order, is the same as if all had been there from the start.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

V = TypeVar("V")


class CompletedOnDemand(dict[str, V]):
    def _complete(self) -> None:
        raise NotImplementedError

    def _all(self) -> CompletedOnDemand[V]:
        self._complete()
        return self

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or dict.__contains__(self._all(), key)

    def __getitem__(self, key: str) -> V:
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        return dict.__getitem__(self._all(), key)

    def get(self, key: str, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        return dict.get(self._all(), key, default)

    def __iter__(self) -> Iterator[str]:
        return dict.__iter__(self._all())

    def __len__(self) -> int:
        return dict.__len__(self._all())

    def keys(self) -> Any:  # dict_keys, which typing cannot name
        return dict.keys(self._all())

    def values(self) -> Any:
        return dict.values(self._all())

    def items(self) -> Any:
        return dict.items(self._all())

    def __repr__(self) -> str:
        return dict.__repr__(self._all())
