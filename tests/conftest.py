"""Shared fixtures: the real peers (skipped when missing, failed on CI) and scratch kimi runs.
The machinery behind them is in tests/harness/."""

from __future__ import annotations

import functools
import os
import re
import sys
from pathlib import Path

import pytest

# the harness (tests.harness) and the scenario tables (sample_sessions) are imported from the
# repository root; neither is an installed package
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The loader's record-time wire-ui index entries (analysis/ui/recindex.py) go to the user's
# cache and cost each recording ~0.1 s before readers see it: off here, on in the tests of it
# (tests/test_ui_record_index.py).
os.environ.setdefault("WIRE_UI_RECORD_INDEX", "0")

# The shared recordings: registered here, once, so that the session scope holds (a fixture
# imported into each test module is a fixture of each, made again for each module).
from tests.harness.acp_recordings import acp_recordings  # noqa: E402, F401
from tests.harness.analysis import recorded  # noqa: E402, F401
from tests.harness.kimi_peer import KimiRun  # noqa: E402
from tests.harness.kimi_recordings import kimi_recordings  # noqa: E402, F401
from tests.harness.peers import find_acp_python, find_kimi, find_mcp_peers, need  # noqa: E402

# Tests that share an expensive fixture run on one xdist worker, so that it is made once per run:
# a module-scoped fixture (mostly real-agent recordings) for the tests of its module, and a
# session-wide one for the modules named here. xdist hands out these groups first, largest
# first, then the single tests one by one, which even out the end of the run (scripts/test:
# --dist loadgroup). xdist 3.8's own groups (the xdist_group mark) rewrite item._nodeid, which
# pytest 9 no longer reads, so the groups are made here, from the test ids.
# The real kimi recordings several modules read (tests/harness/kimi_recordings.py,
# acp_recordings.py) need no group: they are made once per run whichever worker asks first.
SHARED_BY_MODULES = {
    # the wheel and its venv, built once per worker process (tests/harness/install.py)
    "test_docs_blocks": "wheel", "test_install": "wheel", "test_duckdb_compat": "wheel",
    "test_plugin_project": "wheel",
}
MODULE_FIXTURE = re.compile(r"@pytest\.fixture\(.*scope=\"module\"")


def xdist_group_of(nodeid: str) -> str:
    """The tests of one group go to one worker; a test of no group is its own."""
    path = nodeid.split("::", 1)[0]
    module = Path(path).stem
    if module in SHARED_BY_MODULES:
        return SHARED_BY_MODULES[module]
    return path if _has_module_fixture(path) else nodeid


@functools.cache
def _has_module_fixture(path: str) -> bool:
    file = ROOT / path
    return file.is_file() and MODULE_FIXTURE.search(file.read_text(encoding="utf-8")) is not None


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

    return SharedFixtureScheduling(config, log)


@pytest.fixture(scope="session")
def kimi_exe() -> Path:
    """Path of the real kimi executable; skip (fail on CI) when it is not installed."""
    return need(find_kimi, "real agent")


@pytest.fixture
def kimi_run(kimi_exe, tmp_path):
    """Factory: `kimi_run(scenario)` or `kimi_run(scripts, session_id=...)` -> KimiRun."""
    runs: list[KimiRun] = []

    def make(scenario_or_scripts, session_id: str | None = None) -> KimiRun:
        scripts = getattr(scenario_or_scripts, "scripts", scenario_or_scripts)
        sid = session_id if session_id is not None else getattr(scenario_or_scripts, "session_id", None)
        run = KimiRun.create(scripts, session_id=sid, kimi=kimi_exe, tmp_root=tmp_path)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.cleanup()


@pytest.fixture(scope="session")
def mcp_peers() -> dict[str, Path]:
    """The MCP peers (.peers/mcp2, .peers/mcp1, mcp-server-time, mcp-server-git, git);
    skip (fail on CI) when one is not installed."""
    return need(find_mcp_peers, "MCP peer")


@pytest.fixture(scope="session")
def acp_python() -> Path:
    """The interpreter of the ACP client SDK venv (.peers/acp); skip (fail on CI) when missing."""
    return need(find_acp_python, "ACP client SDK")
