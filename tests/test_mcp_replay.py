"""MCP replay both ways, with real peers in both protocol eras:

* server under test: `wire-replay REC -- SERVER` plays the recorded client against a fresh server
  process, re-serving the recorded answers to its sampling/roots/elicitation requests (handshake
  era) and re-sending the 2026-07-28 retries with the *live* requestState;
* client under test: the real SDK client talks to `wire-replay REC --serve`, which stands in for
  the server and checks what the client sends.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sample_sessions.mcp_scenarios import MCP_SCENARIOS
from tests.harness.mcp import DEMO_SERVER, check_mcp_scenario, run_mcp_scenario
from tests.harness.recording import proxy_prefix
from wire_recorder.replay.recording import load

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SAMPLES = ROOT / "sample_sessions"
DEMOS = {  # scenario -> venv of its server
    "mcp_demo_2026": "mcp2", "mcp_demo_2025": "mcp1", "mcp_demo_2025_v2": "mcp2",
    "mcp_fallback": "mcp1",
}


def demo_server(venv: str) -> list[str]:
    return [str(ROOT / ".peers" / venv / "bin" / "python"), str(DEMO_SERVER)]


def replay_cli(*args: str, cwd: str | None = None) -> tuple[int, dict]:
    proc = subprocess.run([str(BIN / "wire-replay"), "--json", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory, mcp_peers) -> dict[str, str]:
    """Each demo scenario recorded now through wire-proxy, one DB each."""
    out = {}
    for name in DEMOS:
        db = str(tmp_path_factory.mktemp(name) / f"{name}.db")
        sc = MCP_SCENARIOS[name]
        result = run_mcp_scenario(sc, proxy_prefix(name, db))
        assert check_mcp_scenario(sc, result) == [], name
        out[name] = db
    return out


@pytest.mark.parametrize("source", ["sample", "fresh"])
@pytest.mark.parametrize("name", list(DEMOS))
def test_server_under_test_replays(name, source, fresh):
    path = str(SAMPLES / f"{name}.jsonl") if source == "sample" else fresh[name]
    rec = load(path)
    assert rec.protocol == "mcp"
    code, report = replay_cli(path, "--", *demo_server(DEMOS[name]))
    assert code == 0 and report["ok"], report["divergences"]
    stats = report["stats"]
    if name == "mcp_demo_2026":
        # no server->client requests in this era; the three input_required round trips went
        # through because the retries carried the live server's requestState, not the recorded
        assert stats["recorded_requests"] == 0 and stats["values_rewritten"] == 3
    else:
        assert stats["requests_matched"] == stats["recorded_requests"] == 3  # sampling, roots, elicitation


def test_recorded_request_state_is_what_a_fresh_server_rejects(fresh):
    """Why the rewrite matters: the same replay with the recorded requestState sent verbatim
    makes the fresh server fail the retries (its key is per process)."""
    rec = load(fresh["mcp_demo_2026"])
    states = [m.payload["requestState"] for m in rec.msgs
              if m.kind == "response" and isinstance(m.payload, dict) and "requestState" in m.payload]
    assert len(states) == 3
    from wire_recorder.replay.driver import ReplayOptions, _AgentReplay
    from wire_recorder.replay.engine import AgentEngine

    class VerbatimEngine(AgentEngine):
        def _learn_values(self, live):  # keep the recorded values
            pass

    class Verbatim(_AgentReplay):
        engine_class = VerbatimEngine

    result = Verbatim(rec, demo_server("mcp2"), None, None, ReplayOptions().validate()).run()
    assert not result.ok
    assert result.first.kind == "changed" and "tools/call" not in result.first.message \
        and "response" in result.first.message


@pytest.mark.parametrize("name", list(DEMOS))
def test_client_under_test_against_serve(name, tmp_path, fresh):
    sc = MCP_SCENARIOS[name]
    report = tmp_path / "serve.json"
    served = dataclasses.replace(
        sc, server=lambda run: [str(BIN / "wire-replay"), fresh[name], "--serve", "--report", str(report)])
    result = run_mcp_scenario(served)
    # the client got the recorded server's answers: its own checks pass except the roots text,
    # which the recorded server built from the recorded client's (scratch) root
    problems = check_mcp_scenario(served, result)
    assert result.exit_code == 0 and all(p.startswith("client_roots") for p in problems), problems
    assert result.summary["callbacks"]["sampling"] == 1
    assert result.summary["callbacks"]["roots"] == 1
    assert result.summary["callbacks"]["elicitation"] == 1
    r = json.loads(report.read_text())
    assert r["mode"] == "serve" and r["ok"], r["divergences"]
    if name != "mcp_demo_2026":
        assert r["stats"]["answers_checked"] == 3  # the client's sampling/roots/elicitation answers


def test_serve_reports_a_changed_client(tmp_path, fresh):
    sc = MCP_SCENARIOS["mcp_demo_2025"]
    report = tmp_path / "serve.json"
    calls = [dataclasses.replace(c, arguments={"a": 2, "b": 4}) if c.tool == "add" else c
             for c in sc.calls]
    served = dataclasses.replace(
        sc, calls=calls,
        server=lambda run: [str(BIN / "wire-replay"), fresh["mcp_demo_2025"], "--serve", "--report",
                            str(report)])
    run_mcp_scenario(served)
    r = json.loads(report.read_text())
    assert not r["ok"]
    first = r["first_divergence"]
    assert "tools/call add" in first["message"] and any("arguments.b: 3 → 4" in d for d in first["details"])


def test_mcp_server_time_and_git_replay(tmp_path, mcp_peers):
    for name in ("mcp_time", "mcp_git"):
        db = str(tmp_path / f"{name}.db")
        sc = MCP_SCENARIOS[name]
        result = run_mcp_scenario(sc, proxy_prefix(name, db), keep=True)  # git: keep the repo
        try:
            assert check_mcp_scenario(sc, result) == []
            # the recording is our own: its stored server command may run
            code, report = replay_cli(db, "--recorded-command", cwd=result.context["work"])
            assert code == 0 and report["ok"], report["divergences"]
        finally:
            import shutil

            shutil.rmtree(result.context["root"], ignore_errors=True)


@pytest.mark.parametrize("name", ["mcp_demo_2025", "mcp_demo_2026"])
def test_recorded_work_dir_becomes_the_live_one_in_served_answers(name, tmp_path, mcp_peers):
    """The recorded client's root was its work dir; replayed with --cwd elsewhere, the roots it
    re-serves (a roots/list answer, or inputResponses in a retry) name the live dir, and the
    server's echo of it still compares equal."""
    from wire_recorder.replay.driver import replay_session

    live = tmp_path / "elsewhere"
    live.mkdir()
    rec = load(str(SAMPLES / f"{name}.jsonl"))
    result = replay_session(rec, demo_server(DEMOS[name]), cwd=str(live))
    assert result.ok, [d.headline() for d in result.divergences]
    sent = b"".join(f.raw for f in result.frames if f.direction == "c2a")
    got = b"".join(f.raw for f in result.frames if f.direction == "a2c")
    assert live.as_uri().encode() in sent and rec.cwd.encode() not in sent
    assert live.as_uri().encode() in got  # the server's client_roots result


def test_cancelled_call_recorded_analysed_and_replayed_both_ways(tmp_path, mcp_peers):
    """mcp 2.3 client gives up on a slow call at its first progress: notifications/cancelled,
    which the server never answers; then another call. Recorded through the proxy, the views
    say `cancelled`; the recording replays against a fresh server and in front of the client."""
    from wire_recorder.analysis.sources import open_workspace
    from wire_recorder.recorder.store import open_store

    sc = MCP_SCENARIOS["mcp_cancel"]
    db = str(tmp_path / "cancel.db")
    result = run_mcp_scenario(sc, proxy_prefix("mcp_cancel", db))
    with open_store(db, read_only=True) as store:
        (session,) = store.sessions()
        frames = store.frames(session["session_id"])
    assert check_mcp_scenario(sc, result, frames) == []
    with open_workspace([db]) as ws:
        calls = ws.con.execute("SELECT tool_name, status, message, duration_ms IS NOT NULL "
                               "FROM tool_calls ORDER BY seq").fetchall()
    assert calls == [("wait", "cancelled", "caller cancelled", True), ("add", "completed", None, True)]
    server = [*demo_server("mcp2"), "--with-wait"]
    for path in (str(SAMPLES / "mcp_cancel.jsonl"), db):
        code, report = replay_cli(path, "--", *server)
        assert code == 0 and report["ok"], report["divergences"]
    report_path = tmp_path / "serve.json"
    served = dataclasses.replace(
        sc, server=lambda run: [str(BIN / "wire-replay"), db, "--serve", "--report", str(report_path)])
    served_result = run_mcp_scenario(served)
    assert check_mcp_scenario(served, served_result) == []
    r = json.loads(report_path.read_text())
    assert r["ok"], r["divergences"]
