"""A busy machine on demand: processes spinning on the CPU while a block runs (the start-up of a
real agent on a loaded runner: tests/test_slow_start.py, tests/test_replay_samples.py)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator


@contextlib.contextmanager
def cpu_burners(n: int = 2) -> Iterator[None]:
    """`n` processes spinning on the CPU (`yes > /dev/null`), ended by their pids afterwards."""
    procs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()
