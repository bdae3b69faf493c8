"""One rule for the work dir of a replay (docs/replay.md, "Work dir"): the live dir (`--cwd`,
else a fresh copy of the snapshot, else the current dir) stands for the recorded one, in what is
sent to the agent (an ACP client's `session/new` cwd) and in the pinned model's paths; the
recorded dir missing on the runner is normal. Against the real `kimi acp`, recorded through the
real wire-proxy with the official ACP SDK client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sample_sessions.acp_scenarios import ACP_SCENARIOS
from tests.harness.acp import AcpRun
from wire_recorder.replay.recording import load
from wire_recorder.replay.workdir import recorded_workdir

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def acp_db(tmp_path_factory, acp_recordings) -> str:
    """acp_tools recorded through wire-proxy (once per test run: tests/harness/acp_recordings.py),
    a copy of it here; its work dir is deleted afterwards."""
    rec = acp_recordings.get("acp_tools")
    assert rec.problems == []
    assert not os.path.exists(rec.result.context["workdir"])
    return rec.copy_to(tmp_path_factory.mktemp("acp-rule"), "acp")


def test_acp_replay_from_a_copy_of_the_work_dir_is_green_without_cwd(acp_db, kimi_exe,
                                                                      tmp_path):
    rec = load(acp_db)
    gone = recorded_workdir(rec)
    assert gone and not os.path.exists(gone)  # what session/new named, missing here
    sc = ACP_SCENARIOS["acp_tools"]
    # a faithful copy of the work dir at another path, the replay run from inside it
    with AcpRun.create(sc.scripts, sc.files, kimi=kimi_exe, tmp_root=tmp_path) as run:
        proc = subprocess.run([str(BIN / "wire-replay"), acp_db, "--json", "--frame-timeout",
                               "120", "--", *run.argv()], env=run.env(), cwd=run.workdir,
                              capture_output=True, text=True, timeout=900)
        written = (run.workdir / "summary.txt").read_text()
    assert "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], report["divergences"]
    assert report["stats"]["requests_matched"] == 9
    # kimi was given the live dir in session/new, and wrote where the replay runs
    assert written == "Notes: alpha, beta, gamma.\n"
