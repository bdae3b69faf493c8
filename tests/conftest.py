"""Shared fixtures: the real kimi peer and scratch runs for it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # sample_sessions/ is not an installed package
    sys.path.insert(0, str(ROOT))

from wire_recorder.recorder.kimi_peer import KimiRun, PeerMissing, find_kimi  # noqa: E402


def _peer(find, what: str):
    """find() -> the peer; skip when it is missing, fail under CI (where it must be there)."""
    try:
        return find()
    except PeerMissing as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{what} missing on CI: {e.one_line()}")
        pytest.skip(e.one_line())


@pytest.fixture(scope="session")
def kimi_exe() -> Path:
    """Path of the real kimi executable; skip (fail on CI) when it is not installed."""
    return _peer(find_kimi, "real agent")


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
    from sample_sessions.mcp_scenarios import find_mcp_peers

    return _peer(find_mcp_peers, "MCP peer")


@pytest.fixture(scope="session")
def acp_python() -> Path:
    """The interpreter of the ACP client SDK venv (.peers/acp); skip (fail on CI) when missing."""
    from sample_sessions.acp_scenarios import find_acp_python

    return _peer(find_acp_python, "ACP client SDK")
