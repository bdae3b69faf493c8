"""ACP replay against the real agent: `kimi acp` (scripted echo LLM) re-run from recordings made
through the real proxy with the official ACP SDK client. Session ids, tool call ids and the work
dir differ between the recording and the replay; the replay must pass anyway, and fail, naming
the first divergence, when the agent's script changes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from sample_sessions.acp_scenarios import ACP_SCENARIOS
from tests.harness.acp import AcpRun, check_acp_scenario, run_acp_scenario
from wire_recorder.recorder.store import open_store
from wire_recorder.replay.driver import ReplayOptions, replay_session
from wire_recorder.replay.recording import load

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SAMPLE = ROOT / "sample_sessions" / "acp_tools.jsonl"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, acp_recordings) -> str:
    """A fresh recording of acp_tools through wire-proxy (once per test run:
    tests/harness/acp_recordings.py), a copy of it here."""
    rec = acp_recordings.get("acp_tools")
    assert rec.problems == []
    return rec.copy_to(tmp_path_factory.mktemp("acp"), "acp")


def fresh_run(kimi_exe, name: str = "acp_tools") -> AcpRun:
    sc = ACP_SCENARIOS[name]
    return AcpRun.create(sc.scripts, sc.files, kimi=kimi_exe)


def live_session_ids(result) -> set[str]:
    out = set()
    for f in result.frames:
        if f.direction == "a2c":
            obj = orjson.loads(f.raw)
            sid = (obj.get("result") or {}).get("sessionId") if isinstance(obj, dict) else None
            if sid:
                out.add(sid)
    return out


@pytest.mark.parametrize("source", ["sample", "fresh"])
def test_acp_session_replays_against_a_fresh_agent(source, recorded, kimi_exe):
    path = str(SAMPLE) if source == "sample" else recorded
    rec = load(path)
    assert rec.protocol == "acp"
    recorded_sid = next(m.payload["sessionId"] for m in rec.msgs
                        if m.kind == "response" and isinstance(m.payload, dict)
                        and "sessionId" in m.payload)
    with fresh_run(kimi_exe) as run:
        result = replay_session(rec, run.argv(), env=run.env(), cwd=str(run.workdir))
        written = (run.workdir / "summary.txt").read_text()
    assert result.ok, [d.headline() for d in result.divergences]
    # every agent->client request was answered from the recording: 3 permissions, 4 terminal/*,
    # fs read and write
    assert result.stats["requests_matched"] == result.stats["recorded_requests"] == 9
    live_sids = live_session_ids(result)
    assert live_sids and recorded_sid not in live_sids  # a new session id, mapped for the client
    assert result.stats["values_rewritten"] == 1
    sent = b"".join(f.raw for f in result.frames if f.direction == "c2a")
    assert recorded_sid.encode() not in sent and live_sids.pop().encode() in sent
    assert rec.cwd.encode() not in sent  # the recorded work dir became the live one
    # the recorded client wrote summary.txt; the replay did too (kimi stats it afterwards)
    assert result.stats["files_written"] == 1 and written == "Notes: alpha, beta, gamma.\n"


def test_cli_exit_0_against_a_fresh_agent(recorded, kimi_exe):
    with fresh_run(kimi_exe) as run:
        proc = subprocess.run([str(BIN / "wire-replay"), recorded, "--cwd", str(run.workdir), "--",
                               *run.argv()], env=run.env(), capture_output=True, text=True,
                              timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the agent MATCHES the recording" in proc.stdout and "9/9 requests matched" in proc.stdout


def test_changed_script_fails_naming_the_first_divergence(recorded, kimi_exe):
    # --live-llm: the agent's own (changed) model, not the one pinned to the recording
    with fresh_run(kimi_exe, "acp_tools_changed") as run:
        proc = subprocess.run([str(BIN / "wire-replay"), recorded, "--live-llm", "--cwd",
                               str(run.workdir), "--",
                               *run.argv()], env=run.env(), capture_output=True, text=True,
                              timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first = next(line for line in proc.stdout.splitlines() if line.startswith("first divergence"))
    assert "turn 1" in first and "echo hello from the terminal" in first \
        and "echo goodbye from the terminal" in first
    assert "no recorded request matches session/request_permission" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_acp_recording_keys_pending_requests_by_direction(recorded):
    """Client and agent both count ids from 0: the client's answer to agent request 0 and the
    agent's answer to client request 0 must pair with the right requests."""
    rec = load(recorded)
    both = {m.rpc_id for m in rec.msgs if m.kind == "request" and m.direction == "c2a"} & \
        {m.rpc_id for m in rec.msgs if m.kind == "request" and m.direction == "a2c"}
    assert 0 in both
    for req_i, ans_i in rec.answers.items():
        req, ans = rec.msgs[req_i], rec.msgs[ans_i]
        assert (req.direction, ans.direction) == ("a2c", "c2a") and req.rpc_id == ans.rpc_id
    assert len(rec.answers) == 9
    with open_store(recorded, read_only=True) as store:
        (session,) = store.sessions()
        assert not [f for f in store.frames(session["session_id"]) if f.anomaly]


def test_sdk_client_against_serve(tmp_path, acp_python):
    """Client under test: the official ACP SDK client talks to `wire-replay --serve` standing in
    for kimi. Its own checks pass (permissions, terminal output, the file read and written), and
    the serve checked its 9 answers against the recorded ones."""
    report = tmp_path / "serve.json"
    sc = ACP_SCENARIOS["acp_tools"]
    result = run_acp_scenario(sc, acp_python=acp_python,
                              agent=[str(BIN / "wire-replay"), str(SAMPLE), "--serve", "--report",
                                     str(report)])
    assert result.exit_code == 0 and check_acp_scenario(sc, result) == []
    r = orjson.loads(report.read_bytes())
    assert r["ok"] and r["stats"]["answers_checked"] == 9, r["divergences"]


def test_on_unmatched_reject_declines_a_permission_the_recording_lacks(recorded, kimi_exe):
    with fresh_run(kimi_exe, "acp_tools_changed") as run:
        result = replay_session(recorded, run.argv(), env=run.env(), cwd=str(run.workdir),
                                options=ReplayOptions(on_unmatched="reject", frame_timeout=20,
                                                     live_llm=True))
    sent = [orjson.loads(f.raw) for f in result.frames if f.direction == "c2a"]
    rejects = [m for m in sent if m.get("result") == {"outcome": {"outcome": "selected",
                                                                  "optionId": "reject"}}]
    assert rejects  # the adapter's way to decline: the permission's reject_once option
    assert not result.ok and result.first.kind in ("changed", "extra", "missing")
    assert result.stopped is None  # it went on instead of stopping at the unmatched request
