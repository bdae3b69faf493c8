"""Real `kimi --wire` sessions recorded through the real wire-proxy once per test run and read by
every module that needs the same scenario (the proxy, replay, analysis, DuckDB-compat and stored
views tests each recorded the same sessions again, ~20 s of kimi apiece).

`kimi_recordings` (a session fixture, registered in tests/conftest.py) records a scenario the
first time a test asks for it, into a folder shared by the xdist workers of one run: a lock file
per scenario makes it once per run, not once per worker (a worker that asks while another records
it waits for that one). A test reads its own copy (`Recording.copy_to`): readers may write to a
file (stored views, wire-ui's index), so the shared file is never handed out.
"""

from __future__ import annotations

import fcntl
import glob
import os
import pickle
import shutil
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.harness.scripted_client import ClientResult
from tests.harness.wire import Scenario, check_scenario, run_scenario
from wire_recorder.recorder.handoff import wait_for_loaders

WIRE_PROXY = str(Path(sys.executable).parent / "wire-proxy")
# kimi's start-up mostly waits (two cores): three runs side by side, as the modules did before
WORKERS = 3
T = TypeVar("T")


@dataclass
class Recording:
    """One scenario recorded through `wire-proxy -q --db <name>.db --name <name> --`."""

    name: str
    db: str  # the shared file: read a copy of it (copy_to)
    result: ClientResult | Any  # what the client sent and received (an AcpResult for ACP)
    problems: list[str]  # the scenario check's findings; [] when kimi did what it intends
    kimi_log: str | None  # kimi's own wire.jsonl of the run, in a folder named by kimi's session id

    def copy_to(self, folder: str | os.PathLike, name: str | None = None) -> str:
        """A copy of the recording (the .db, its .blobs sidecar and .wal when there) as
        folder/<name>.db."""
        os.makedirs(folder, exist_ok=True)
        dest = os.path.join(folder, f"{name or self.name}.db")
        for suffix in ("", ".blobs", ".wal"):
            if os.path.exists(self.db + suffix):
                shutil.copyfile(self.db + suffix, dest + suffix)
        return dest


class KimiRecordings:
    """Recordings of the scenarios `scenario(name)` names, made on first use under `root`."""

    def __init__(self, root: Path, kimi: Path | None, scenario) -> None:
        self.root, self.kimi, self.scenario = root, kimi, scenario
        root.mkdir(parents=True, exist_ok=True)

    def get(self, names: Iterable[str]) -> dict[str, Recording]:
        names = list(names)
        with ThreadPoolExecutor(WORKERS) as ex:
            return dict(zip(names, ex.map(self.one, names), strict=True))

    def one(self, name: str) -> Recording:
        return made_once(self.root, name, lambda: self._record(name))

    def _record(self, name: str) -> Recording:
        sc: Scenario = self.scenario(name)
        folder = self.root / name
        folder.mkdir()
        db = str(folder / f"{name}.db")
        result = run_scenario(sc, [WIRE_PROXY, "-q", "--db", db, "--name", name, "--"],
                              kimi=self.kimi, keep=True)
        home = result.context["home"]
        logs = glob.glob(os.path.join(home, ".kimi", "sessions", "*", "*", "wire.jsonl"))
        kimi_log = None
        if logs:  # kimi's folder name is its session id: kept
            dest = self.root / "kimi-logs" / name / os.path.basename(os.path.dirname(logs[0]))
            dest.mkdir(parents=True)
            kimi_log = str(dest / "wire.jsonl")
            shutil.copyfile(logs[0], kimi_log)
        shutil.rmtree(os.path.dirname(home), ignore_errors=True)
        wait_for_loaders(db, limit=600)  # the proxy exits before its loader has stored it all
        return Recording(name, db, result, check_scenario(sc, result), kimi_log)


def made_once(root: Path, name: str, make: Callable[[], T]) -> T:
    """`make()`'s value, made once per run under `root` for every xdist worker: a lock file per
    name (a worker that asks while another makes it waits for that one), the value pickled."""
    done = root / f"{name}.pickle"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes (or the worker dies)
        if not done.exists():
            value = make()
            tmp = done.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(value))
            os.replace(tmp, done)  # whole or absent for a reader
    return pickle.loads(done.read_bytes())


def shared_root(tmp_path_factory) -> Path:
    """A folder every xdist worker of this run sees (the parent of the workers' base temp
    folders); the run's own base temp folder without xdist."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "kimi-recordings"


def scenario(name: str) -> Scenario:
    """A sample scenario, or the one only the analysis tests need."""
    from sample_sessions.scenarios import SCENARIOS

    if name in SCENARIOS:
        return SCENARIOS[name]
    from tests.harness.analysis import SUBAGENT_ERRORS  # here: analysis imports this module

    assert name == SUBAGENT_ERRORS.name, f"no scenario named {name}"
    return SUBAGENT_ERRORS


@pytest.fixture(scope="session")
def kimi_recordings(kimi_exe, tmp_path_factory) -> KimiRecordings:
    """The shared recordings of this run: `kimi_recordings.get([names])` -> {name: Recording}."""
    return KimiRecordings(shared_root(tmp_path_factory), kimi_exe, scenario)
