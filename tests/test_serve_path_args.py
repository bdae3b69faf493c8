"""`wire-replay --serve` in front of the unchanged real MCP client, for a session of the real
mcp-server-git started with an absolute path argument (`--repository DIR`), recorded through the
real wire-proxy: the client run again from a fresh scratch dir (another path, the same layout)
names its own repository, which the stand-in masks as the recorded one: green. A client that
names another path is red, and the report shows where the two differ, never "expected X, got X"
(long scratch paths cut both labels alike)."""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sample_sessions.mcp_scenarios import MCP_SCENARIOS, make_git_repo
from tests.harness.mcp import McpRun, check_mcp_scenario, run_mcp_scenario
from tests.harness.recording import proxy_prefix
from wire_recorder.recorder.handoff import wait_for_loaders

BIN = Path(sys.executable).parent
# a bound, not a budget: the client waits this long on a busy machine
GIT = dataclasses.replace(MCP_SCENARIOS["mcp_git"], timeout=300.0)


@pytest.fixture(scope="module")
def long_tmp(tmp_path_factory) -> Iterator[Path]:
    """Scratch dirs under a long path, so that a label cut at 50 characters shows no part of
    what differs between two runs."""
    base = tmp_path_factory.mktemp("a-scratch-folder-with-a-rather-long-name-for-labels")
    old, tempfile.tempdir = tempfile.tempdir, str(base)
    try:
        yield base
    finally:
        tempfile.tempdir = old


class _InnerRun(McpRun):
    """A run with its repository inside the work dir (`work/gitrepo`), not beside it."""

    @property
    def repo(self) -> Path:
        return self.root / "work" / "gitrepo"


def _scenario(layout: str) -> dict:
    if layout == "beside":
        return {}
    return {
        "setup": lambda run: make_git_repo(_InnerRun(run.root)),
        "server": lambda run: [*GIT.server(_InnerRun(run.root))],
        "calls": [dataclasses.replace(c, arguments=(lambda run, c=c: c.args(_InnerRun(run.root))))
                  for c in GIT.calls],
    }


@pytest.fixture(scope="module")
def recorded(long_tmp, mcp_peers) -> dict[str, str]:
    out = {}
    for layout in ("beside", "inside"):
        sc = dataclasses.replace(GIT, **_scenario(layout))
        db = str(long_tmp / f"git-{layout}.db")
        result = run_mcp_scenario(sc, proxy_prefix("mcp_git", db))
        assert check_mcp_scenario(sc, result) == [], layout
        wait_for_loaders(db, limit=600)
        out[layout] = db
    return out


def _serve(db: str, sc, tmp: Path) -> dict:
    report = tmp / "serve.json"
    served = dataclasses.replace(sc, server=lambda run: [str(BIN / "wire-replay"), db, "--serve",
                                                         "--report", str(report)])
    result = run_mcp_scenario(served)
    assert result.exit_code is not None, result.stderr
    return json.loads(report.read_text())


@pytest.mark.parametrize("layout", ["beside", "inside"])
def test_serve_of_a_git_session_is_green_with_the_unchanged_client(recorded, layout, tmp_path):
    sc = dataclasses.replace(GIT, **_scenario(layout))
    r = _serve(recorded[layout], sc, tmp_path)
    assert r["ok"], r["divergences"]


def test_a_client_naming_another_path_is_red_and_shows_where(recorded, tmp_path):
    calls = [dataclasses.replace(GIT.calls[0], arguments=lambda run: {
        "repo_path": str(run.repo / "elsewhere")})] + GIT.calls[1:]
    r = _serve(recorded["beside"], dataclasses.replace(GIT, calls=calls), tmp_path)
    assert not r["ok"]
    first = r["divergences"][0]
    assert "git_status" in first["message"], first
    assert any("repo_path: <path> → <path>/elsewhere" in d for d in first["details"]), first
    for d in r["divergences"]:
        msg = d["message"]
        head, sep, tail = msg.rpartition(", got ")
        assert not (sep and head.endswith(" " + tail)), msg  # never "expected X, got X"
    assert "differs in params.arguments.repo_path" in first["message"], first["message"]
