"""Frames, signals and the EOF due at a time: a heap, earliest first, ties in the order given."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field


@dataclass(order=True)
class Due:
    when: float
    order: int
    what: str = field(compare=False)  # step | answer | eof | signal
    raw: bytes = field(compare=False, default=b"")
    newline: bool = field(compare=False, default=True)


class Scheduler:
    def __init__(self) -> None:
        self._heap: list[Due] = []
        self._order = itertools.count(1)

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, when: float, what: str, raw: bytes = b"", newline: bool = True) -> None:
        heapq.heappush(self._heap, Due(when, next(self._order), what, raw, newline))

    def pop_due(self, now: float) -> Due | None:
        """The earliest item due at `now`, taken off the heap; None when none is."""
        if self._heap and self._heap[0].when <= now:
            return heapq.heappop(self._heap)
        return None

    def next_when(self) -> float | None:
        return self._heap[0].when if self._heap else None

    def clear(self) -> None:
        self._heap.clear()
