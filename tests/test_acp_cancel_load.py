"""ACP session/cancel and session/load with the real peers: `kimi acp` (kimi-cli 1.51.0, scripted
echo LLM) and the official ACP SDK client, through the real proxy into a real DuckDB file, then
replayed against a fresh `kimi acp`.

acp_cancel: the client cancels the turn while a permission is pending (session/cancel, then the
permission answered `cancelled`). kimi's outcome depends on that order, so replay must keep it.
acp_load: a second agent process reopens the first one's session; replaying it needs the first
session replayed before it (the fresh agent has no such session otherwise).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from sample_sessions.acp_scenarios import ACP_SCENARIOS
from tests.harness.acp import AcpRun, check_acp_chain, run_acp_chain, run_acp_scenario
from tests.harness.replay import parallel
from wire_recorder.analysis.sources import open_workspace
from wire_recorder.analysis.stats import summarize
from wire_recorder.recorder.store import open_store
from wire_recorder.replay.driver import ReplayOptions, replay_session
from wire_recorder.replay.origins import find_origins
from wire_recorder.replay.recording import load

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SAMPLES = ROOT / "sample_sessions"


def _record(name: str, tmp: Path, kimi_exe, acp_python) -> tuple[str, list[dict]]:
    db = str(tmp / f"{name}.db")
    sc = ACP_SCENARIOS[name]
    results = run_acp_chain(sc, [str(BIN / "wire-proxy"), "-q", "--db", db, "--name", name, "--"],
                            kimi=kimi_exe, acp_python=acp_python)
    assert check_acp_chain(sc, results) == []
    with open_store(db, read_only=True) as store:
        sessions = store.sessions()
    assert len(sessions) == len(results)
    return db, sessions


def _c2a(result) -> list:
    return [orjson.loads(f.raw) for f in result.frames if f.direction == "c2a"]


def _run(kimi_exe, name: str) -> AcpRun:
    sc = ACP_SCENARIOS[name]
    return AcpRun.create(sc.scripts, sc.files, kimi=kimi_exe)


# -- cancel ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cancel_db(tmp_path_factory, kimi_exe, acp_python) -> str:
    db, sessions = _record("acp_cancel", tmp_path_factory.mktemp("cancel"), kimi_exe, acp_python)
    return db


def test_cancel_is_recorded_in_the_order_the_client_sent_it(cancel_db):
    rec = load(cancel_db)
    c2a = [m.method or ("answer", m.rpc_id) for m in rec.msgs if m.direction == "c2a"]
    assert c2a[2:5] == ["session/prompt", "session/cancel", ("answer", 0)]
    with open_workspace([cancel_db]) as ws:
        turns = ws.con.execute("SELECT turn, status, stop_reason FROM turns ORDER BY turn").fetchall()
        calls = ws.con.execute("SELECT status, approval FROM tool_calls WHERE turn = 1").fetchall()
        plan = ws.con.execute("SELECT turn, tool_name, status FROM tool_calls WHERE turn = 2").fetchall()
    assert turns == [(1, "cancelled", "cancelled"), (2, "finished", "end_turn")]
    # failed when kimi took the permission answer before the cancel, else cancelled with the
    # turn (its last update said in_progress)
    assert calls in ([("failed", "cancelled")], [("cancelled", "cancelled")])
    assert plan == [(2, "SetTodoList", "completed")]  # the session goes on after the cancel


@pytest.mark.parametrize("source", ["sample", "fresh"])
def test_cancel_replays_with_the_permission_answer_held_behind_the_cancel(source, cancel_db,
                                                                          kimi_exe):
    path = str(SAMPLES / "acp_cancel.jsonl") if source == "sample" else cancel_db
    with _run(kimi_exe, "acp_cancel") as run:
        result = replay_session(load(path), run.argv(), env=run.env(), cwd=str(run.workdir))
    assert result.ok, [d.headline() for d in result.divergences]
    # kimi answered the permission with the recorded `cancelled` only after the cancel went out:
    # answered first, the cancel would find no turn running and the prompt would end end_turn
    assert result.stats["answers_held"] == 1
    sent = _c2a(result)
    order = [m.get("method") or ("answer", m.get("id")) for m in sent]
    assert order.index("session/cancel") + 1 == order.index(("answer", 0))
    responses = [orjson.loads(f.raw) for f in result.frames if f.direction == "a2c"]
    stops = [m["result"]["stopReason"] for m in responses
             if isinstance(m.get("result"), dict) and "stopReason" in m["result"]]
    assert stops == ["cancelled", "end_turn"]


# -- load -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def load_db(tmp_path_factory, kimi_exe, acp_python) -> tuple[str, list[dict]]:
    return _record("acp_load", tmp_path_factory.mktemp("load"), kimi_exe, acp_python)


def test_load_session_is_recorded_with_its_history_marked(load_db):
    db, (first, second) = load_db
    with open_workspace([db]) as ws:
        rows = ws.con.execute("SELECT session_id, turn, status, history FROM tool_calls "
                              "ORDER BY session_id, seq").fetchall()
        summary = summarize(ws)
    # the reopened session replays the first session's Shell call (no turn: before any prompt),
    # then runs its own
    assert rows == [(first["session_id"], 1, "completed", False),
                    (second["session_id"], None, "completed", True),
                    (second["session_id"], 1, "completed", False)]
    assert summary.overview["protocols"]["acp"]["tool_calls"] == 2  # the replayed one ran earlier
    show = subprocess.run([str(BIN / "wire-show"), db, "--session", second["session_id"]],
                          capture_output=True, text=True, timeout=60)
    assert show.returncode == 0, show.stderr
    assert "history tool_call Shell: ls | wc -l" in show.stdout
    assert "1 tool calls" in show.stdout.splitlines()[-1]


def test_origin_of_a_load_session_is_found_in_the_same_db(load_db):
    db, (first, second) = load_db
    found = find_origins(load(db, second["session_id"]))
    assert [r.session_id for r in found.chain] == [first["session_id"]] and not found.notes
    assert not find_origins(load(db, first["session_id"])).chain  # session/new needs nothing


def test_the_file_of_a_reopened_session_needs_no_session_option(load_db, kimi_exe):
    """Two sessions in the file, the first only the second's origin: the second is the one
    replayed (its origin first), without --session."""
    db, (first, second) = load_db
    assert load(db).session_id == second["session_id"]
    with _run(kimi_exe, "acp_load") as run:
        env = run.env()
        res = subprocess.run(
            [str(BIN / "wire-replay"), db, "--cwd", str(run.workdir),
             "--env", f"HOME={env['HOME']}",
             "--env", f"KIMI_SCRIPTED_ECHO_SCRIPTS={env['KIMI_SCRIPTED_ECHO_SCRIPTS']}",
             "--", *run.argv()], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"replayed first: session {first['session_id']}" in res.stdout, res.stdout


def test_an_exported_reopened_session_carries_its_origin_and_replays_alone(load_db, kimi_exe,
                                                                           tmp_path):
    """wire-export of the reopened session writes NAME.origin.jsonl beside its transcript (where
    wire-replay looks), so the exported file replays green on its own."""
    db, (first, second) = load_db
    out = tmp_path / "reopened.jsonl"
    exp = subprocess.run([str(BIN / "wire-export"), db, "--session", second["session_id"],
                          "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert exp.returncode == 0, exp.stderr
    origin = tmp_path / "reopened.origin.jsonl"
    assert origin.is_file(), "no origin file written beside the export"
    methods = {m.method for m in load(str(origin)).msgs}  # (a transcript's id is its file name)
    assert "session/new" in methods and "session/load" not in methods
    assert origin.stat().st_mode & 0o777 == 0o600
    first_only = tmp_path / "first.jsonl"  # a session that reopens nothing gets no origin file
    subprocess.run([str(BIN / "wire-export"), db, "--session", first["session_id"], "-o",
                    str(first_only)], check=True, capture_output=True, timeout=120)
    assert not (tmp_path / "first.origin.jsonl").exists()
    with _run(kimi_exe, "acp_load") as run:
        env = run.env()
        res = subprocess.run(
            [str(BIN / "wire-replay"), str(out), "--cwd", str(run.workdir),
             "--env", f"HOME={env['HOME']}",
             "--env", f"KIMI_SCRIPTED_ECHO_SCRIPTS={env['KIMI_SCRIPTED_ECHO_SCRIPTS']}",
             "--", *run.argv()], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "replayed first: session reopened.origin" in res.stdout, res.stdout


def test_load_session_replays_after_its_origin(load_db, kimi_exe):
    db, (first, second) = load_db
    rec = load(db, second["session_id"])
    recorded_sid = next(m.obj["params"]["sessionId"] for m in rec.msgs
                        if m.method == "session/load")
    with _run(kimi_exe, "acp_load") as run:
        result = replay_session(rec, run.argv(), env=run.env(), cwd=str(run.workdir))
    assert result.ok, [d.headline() for d in result.divergences]
    assert [o.recording.session_id for o in result.origins] == [first["session_id"]]
    assert result.origins[0].ok
    # session/load asked for the session the origin's replay created, not the recorded one
    live_sid = next(orjson.loads(f.raw)["result"]["sessionId"] for f in result.origins[0].frames
                    if f.direction == "a2c" and b'"sessionId"' in f.raw and b'"result"' in f.raw)
    (load_req,) = [m for m in _c2a(result) if m.get("method") == "session/load"]
    assert load_req["params"]["sessionId"] == live_sid != recorded_sid
    assert result.stats["requests_matched"] == 5  # permission and terminal/* after the load


def test_cli_load_sample_needs_its_origin(kimi_exe, tmp_path):
    sample, origin = SAMPLES / "acp_load.jsonl", SAMPLES / "acp_load.origin.jsonl"

    def moved(how: str) -> Path:  # no reopened.origin.jsonl beside it
        path = tmp_path / how / "reopened.jsonl"
        path.parent.mkdir()
        path.write_bytes(sample.read_bytes())
        return path

    def replay(case: tuple[str, Path, list[str]]):
        how, path, extra = case
        with _run(kimi_exe, "acp_load") as run:
            env = run.env()
            return how, subprocess.run(
                [str(BIN / "wire-replay"), str(path), "--cwd", str(run.workdir), *extra,
                 "--env", f"HOME={env['HOME']}",
                 "--env", f"KIMI_SCRIPTED_ECHO_SCRIPTS={env['KIMI_SCRIPTED_ECHO_SCRIPTS']}",
                 "--", *run.argv()], capture_output=True, text=True, timeout=300)

    # side by side, each in its own scratch HOME and folder (kimi's start-up mostly waits)
    runs = dict(parallel(replay, [("beside", sample, []), ("alone", moved("alone"), []),
                                  ("--origin", moved("origin"), ["--origin", str(origin)])]))
    # without it the fresh agent has no such session: the note says why and what to do
    alone = runs.pop("alone")
    assert alone.returncode == 1, alone.stdout + alone.stderr
    assert "no --origin was given" in alone.stdout and "-32602" in alone.stdout
    for how, res in runs.items():
        assert res.returncode == 0, (how, res.stdout + res.stderr)
        assert "replayed first: session" in res.stdout and ": matches" in res.stdout


def test_cli_origin_must_exist():
    res = subprocess.run([str(BIN / "wire-replay"), str(SAMPLES / "acp_load.jsonl"),
                          "--origin", "/nonexistent/x.db", "--", "true"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "--origin /nonexistent/x.db: no such file" in res.stderr


def test_cancel_race_won_the_other_way_is_no_divergence(tmp_path, kimi_exe):
    """kimi reports the cancelled call failed only when the permission answer beats the cancel
    inside it. A recording where the cancel won (no final update) replays against a kimi where
    it may lose: that update after session/cancel is tolerated, and counted."""
    lines = (SAMPLES / "acp_cancel.jsonl").read_bytes().splitlines(keepends=True)
    failed = [ln for ln in lines if b'"tool_call_update"' in ln and b'"failed"' in ln]
    assert len(failed) == 1
    edited = tmp_path / "acp_cancel_won.jsonl"
    edited.write_bytes(b"".join(ln for ln in lines if ln not in failed))
    with _run(kimi_exe, "acp_cancel") as run:
        result = replay_session(load(str(edited)), run.argv(), env=run.env(),
                                cwd=str(run.workdir))
    assert result.ok, [d.headline() for d in result.divergences]
    live_failed = sum(1 for f in result.frames if f.direction == "a2c"
                      and b'"tool_call_update"' in f.raw and b'"failed"' in f.raw)
    assert result.stats.get("cut_short_frames_tolerated", 0) == live_failed


@pytest.mark.parametrize("name", ["acp_cancel", "acp_load"])
def test_sdk_client_against_serve(name, tmp_path, acp_python):
    """Client under test: the ACP SDK client against `wire-replay --serve` standing in for kimi:
    it cancels at the served permission request (acp_cancel), or reopens the recorded session
    and gets its history served (acp_load); its answers match the recorded ones."""
    sample = SAMPLES / f"{name}.jsonl"
    rec = load(str(sample))
    sc = ACP_SCENARIOS[name]
    step, load_sid = sc, None
    if sc.then is not None:
        step = sc.then
        load_sid = next(m.obj["params"]["sessionId"] for m in rec.msgs if m.method == "session/load")
    report = tmp_path / "serve.json"
    result = run_acp_scenario(step, acp_python=acp_python, load_session=load_sid,
                              agent=[str(BIN / "wire-replay"), str(sample), "--serve", "--report",
                                     str(report)])
    assert result.exit_code == 0 and check_acp_chain(step, [result]) == []
    r = orjson.loads(report.read_bytes())
    assert r["ok"], r["divergences"]
    assert r["stats"]["answers_checked"] == len(rec.answers) == (1 if name == "acp_cancel" else 5)


def test_cli_origin_that_is_no_recording_is_one_line(tmp_path):
    moved = tmp_path / "reopened.jsonl"
    moved.write_bytes((SAMPLES / "acp_load.jsonl").read_bytes())
    res = subprocess.run([str(BIN / "wire-replay"), str(moved), "--origin", str(ROOT / "README.md"),
                          "--", "true"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "looking for the session that created" in res.stderr and "README.md is not a DuckDB" in res.stderr


def test_a_diverging_origin_fails_the_replay_and_is_reported(load_db, kimi_exe):
    """The agent changed: the session replayed first already differs. The run fails, and the
    text, JSON and JUnit reports say that the origin diverged, and where."""
    from tests.harness.kimi_peer import msg_id, script, shell, text, think, usage
    from wire_recorder.replay import report as rp

    db, (first, second) = load_db
    changed = [script(msg_id("msg-1"), usage(100, 10), think("Count them with the shell."),
                      text("Let me count them all."), shell("call-shell-1", "ls | wc -l")),
               *ACP_SCENARIOS["acp_load"].scripts[1:]]
    with AcpRun.create(changed, ACP_SCENARIOS["acp_load"].files, kimi=kimi_exe) as run:
        result = replay_session(load(db, second["session_id"]), run.argv(), env=run.env(),
                                cwd=str(run.workdir),
                                options=ReplayOptions(live_llm=True))  # the changed scripts
    (origin,) = result.origins
    assert not origin.ok and not result.ok and result.exit_code == 1
    assert "Let me count them all." in str(origin.first.got)
    text_report = rp.render_text(result)
    assert f"replayed first: session {first['session_id']}" in text_report
    assert "DIVERGED: turn 1: expected agent_message_chunk" in text_report
    as_json = orjson.loads(rp.render_json(result))
    assert as_json["ok"] is False and as_json["origins"][0]["ok"] is False
    # had the session itself matched, the origin alone fails it, and says so
    import dataclasses

    alone = dataclasses.replace(result, divergences=[])
    assert not alone.ok and rp.title(alone).endswith("DIVERGED (in a session replayed before it)")
    assert f'message="in origin session {first["session_id"]}: turn 1'.encode() in \
        rp.render_junit([alone])
