"""The real `kimi acp` sample session acp_tools recorded through the real wire-proxy once per
test run and read by every module that needs it (the ACP record, replay, work-dir rule, analysis
and diff tests each recorded it again: kimi acp and the SDK client, ~15-30 s apiece).

`acp_recordings` (a session fixture, registered in tests/conftest.py) works as
tests/harness/kimi_recordings.py does: made on first use, once per run for every xdist worker,
a copy for each reader (`Recording.copy_to`). The session is named after its scenario, and its
scratch HOME and work dir are gone once it is recorded (as a user's would be)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.acp import check_acp_scenario, run_acp_scenario
from tests.harness.kimi_recordings import WIRE_PROXY, Recording, made_once, shared_root
from wire_recorder.recorder.handoff import wait_for_loaders


class AcpRecordings:
    def __init__(self, root: Path, kimi: Path, acp_python: Path) -> None:
        self.root, self.kimi, self.acp_python = root, kimi, acp_python
        root.mkdir(parents=True, exist_ok=True)

    def get(self, name: str) -> Recording:
        return made_once(self.root, name, lambda: self._record(name))

    def _record(self, name: str) -> Recording:
        from sample_sessions.acp_scenarios import ACP_SCENARIOS

        sc = ACP_SCENARIOS[name]
        folder = self.root / name
        folder.mkdir()
        db = str(folder / f"{name}.db")
        result = run_acp_scenario(sc, [WIRE_PROXY, "-q", "--db", db, "--name", name, "--"],
                                  kimi=self.kimi, acp_python=self.acp_python,
                                  tmp_root=folder)
        wait_for_loaders(db, limit=600)  # the proxy exits before its loader has stored it all
        return Recording(name, db, result, check_acp_scenario(sc, result), None)


@pytest.fixture(scope="session")
def acp_recordings(kimi_exe, acp_python, tmp_path_factory) -> AcpRecordings:
    """The shared ACP recordings of this run: `acp_recordings.get(name)` -> Recording."""
    return AcpRecordings(shared_root(tmp_path_factory).with_name("acp-recordings"), kimi_exe,
                         acp_python)
