"""Analysis views and commands, checked against sessions recorded from the real kimi.

Every expected number is recomputed here from the recorded frames (tests/harness/analysis.py),
never typed in, so a wrong view fails whatever the agent printed.
"""

from __future__ import annotations

import json
import os
import threading

import duckdb
import pytest

from tests.harness import analysis as harness
from tests.harness.analysis import SUBAGENT_ERRORS, expected_from_frames, frames_of, record, run_cli
from wire_recorder.analysis.sources import open_workspace


def _rows(ws, sql, params=()):
    cur = ws.con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def test_views_match_recorded_frames(recorded):
    folder, runs = recorded
    for name, run in runs.items():
        session, frames = frames_of(run.db)
        exp = expected_from_frames(frames)
        sid = session["session_id"]
        with open_workspace([run.db]) as ws:
            turns = _rows(ws, "SELECT * FROM turns WHERE session_id = ? ORDER BY turn", [sid])
            assert len(turns) == len(exp["turns"]), name
            for got, want in zip(turns, exp["turns"], strict=True):
                assert got["total_tokens"] == want["tokens"], (name, got["turn"])
                assert got["steps"] == want["steps"], (name, got["turn"])
                assert got["tool_calls"] == want["tool_calls"], (name, got["turn"])
                assert got["status"] == want["status"] and got["status_source"] == "response", name
            # token sums equal the StatusUpdate sums, also per step and per row
            tu = _rows(ws, "SELECT agent_id, message_id, total FROM token_usage WHERE session_id = ? "
                           "ORDER BY seq", [sid])
            assert [(r["agent_id"], r["message_id"], r["total"]) for r in tu] == exp["token_rows"], name
            steps_sum = ws.con.execute("SELECT sum(total_tokens + subagent_tokens) FROM steps "
                                       "WHERE session_id = ?", [sid]).fetchone()[0] or 0
            assert steps_sum == sum(t["tokens"] for t in exp["turns"]), name
            # a tool call's duration is the gap between its ToolCall and ToolResult
            calls = _rows(ws, "SELECT * FROM tool_calls WHERE session_id = ?", [sid])
            assert len(calls) == len(exp["calls"]), name
            for c in calls:
                want = exp["calls"][(c["agent_id"] or "", c["tool_call_id"])]
                assert c["tool_name"] == want["name"]
                if want["end"] is None:
                    assert c["duration_ms"] is None and c["finished_at"] is None, (name, c)
                else:
                    assert c["duration_ms"] == pytest.approx((want["end"] - want["start"]) / 1e6, abs=1e-6)
            # an approval's wait is the gap between the request and the client's answer
            reqs = _rows(ws, "SELECT * FROM requests WHERE session_id = ?", [sid])
            assert {r["request_id"] for r in reqs} == set(exp["requests"]), name
            for r in reqs:
                want = exp["requests"][r["request_id"]]
                assert r["type"] == want["type"]
                if want["answer_mono"] is None:
                    assert r["wait_ms"] is None and r["resolved_by"] in ("agent", None), (name, r)
                else:
                    # a client answering within microseconds can be recorded first: the wait is then 0
                    gap = max(0, want["answer_mono"] - want["mono"]) / 1e6
                    assert r["wait_ms"] == pytest.approx(gap, abs=1e-6)
                    assert r["resolved_by"] == "client"
                if r["type"] == "ApprovalRequest":
                    call = [c for c in calls if c["tool_call_id"] == r["tool_call_id"]
                            and (c["agent_id"] or None) == r["agent_id"]]
                    assert len(call) == 1 and call[0]["approval_requested"], (name, r)
                    assert call[0]["approval_wait_ms"] == r["wait_ms"]
                    assert call[0]["approval"] == r["outcome"]


def test_scenario_specific_facts(recorded):
    """What each scenario is about shows up in the right column."""
    folder, runs = recorded
    dbs = [r.db for r in runs.values()]
    with open_workspace(dbs) as ws:
        def one(sql):
            return _rows(ws, sql)

        by_tag = {r["command"]: r["session_id"] for r in one("SELECT session_id, command FROM sessions")}
        sid = {n: next(s for c, s in by_tag.items() if f'"{runs[n].name}"' in c or
                       f'"wr-{n.replace("_", "-")}"' in c) for n in ("cancel_turn",)}
        cancel = one(f"SELECT * FROM requests WHERE session_id = '{sid['cancel_turn']}'")
        assert [(r["outcome"], r["resolved_by"]) for r in cancel] == [("reject", "agent")]
        assert one(f"SELECT status FROM turns WHERE session_id = '{sid['cancel_turn']}'") == [{"status": "cancelled"}]
        ext = one("SELECT * FROM tool_calls WHERE external")
        assert len(ext) == 1 and ext[0]["tool_name"] == "lookup_weather" and ext[0]["external_outcome"] == "ok"
        assert ext[0]["external_wait_ms"] is not None and ext[0]["external_wait_ms"] >= 0
        # streamed arguments are re-assembled
        streamed = one("SELECT arguments FROM tool_calls WHERE tool_call_id = 'call-2' AND arguments LIKE '%step two%'")
        assert [json.loads(r["arguments"]) for r in streamed] == [{"command": "echo step two"}]
        # subagent: its tool call is attributed to the parent call and counted
        agent = one("SELECT * FROM tool_calls WHERE tool_name = 'Agent'")[0]
        nested = one("SELECT * FROM tool_calls WHERE parent_tool_call_id = 'call-a'")
        assert [n["tool_call_id"] for n in nested] == ["sub-call-1"] and nested[0]["approval"] == "approve"
        assert agent["subagent_tool_calls"] == 1 and agent["subagent_events"] >= 8
        sub_tokens = one("SELECT sum(total) AS t FROM token_usage WHERE parent_tool_call_id = 'call-a'")[0]["t"]
        assert agent["subagent_tokens"] == sub_tokens > 0
        sub_turns = one("SELECT * FROM turns WHERE session_id IN (SELECT session_id FROM tool_calls "
                        "WHERE tool_name = 'Agent') ORDER BY turn")
        assert [t["status"] for t in sub_turns] == ["finished", "finished", "error"]
        assert sub_turns[0]["subagent_tokens"] == sub_tokens and sub_turns[1]["retries"] == 1
        assert sub_turns[2]["error_code"] == -32003
        steps = one(f"SELECT * FROM steps WHERE session_id = '{sub_turns[0]['session_id']}' ORDER BY seq")
        assert [s["retried"] for s in steps] == [False, False, True, False]
        assert [s["interrupted"] for s in steps] == [False, False, False, True]
        errs = one(f"SELECT * FROM errors WHERE session_id = '{sub_turns[0]['session_id']}' AND source = 'jsonrpc'")
        assert [(e["code"], e["related"], e["turn"]) for e in errs] == [(-32003, "prompt", 3)]
        hooks = one("SELECT outcome FROM requests WHERE type = 'HookRequest' ORDER BY seq")
        assert [h["outcome"] for h in hooks] == ["allow", "block"]
        q = one("SELECT outcome FROM requests WHERE type = 'QuestionRequest'")
        assert q == [{"outcome": "answered"}]


def test_kimi_log_import_matches_proxy_recording(recorded, tmp_path):
    folder, runs = recorded
    logs = [r.kimi_log for r in runs.values()]
    assert all(logs), "kimi wrote no wire.jsonl"
    db = str(tmp_path / "imported.db")
    p = run_cli("wire-import", *logs, "--db", db)
    assert p.returncode == 0, p.stderr
    with open_workspace([db]) as imp, open_workspace([r.db for r in runs.values()]) as rec:
        names = {r["session_id"] for r in _rows(imp, "SELECT session_id FROM sessions")}
        # kimi names its log folder after its session id (-S in every scenario)
        kimi_id = {}
        for r in _rows(rec, "SELECT session_id, command FROM sessions"):
            argv = json.loads(r["command"])
            kimi_id[r["session_id"]] = argv[argv.index("-S") + 1]
        assert names == set(kimi_id.values())
        queries = {
            "turns": "SELECT turn, user_input, status, steps, tool_calls, subagent_tool_calls, "
                     "retries, input_other, output, input_cache_read, input_cache_creation, "
                     "total_tokens, subagent_tokens FROM turns WHERE session_id = ? ORDER BY turn",
            "steps": "SELECT turn, step, input_other, output, input_cache_read, input_cache_creation, "
                     "total_tokens, subagent_tokens, message_id, context_tokens, tool_calls, "
                     "interrupted, retries FROM steps WHERE session_id = ? ORDER BY turn, step",
            "tool_calls": "SELECT turn, step, tool_call_id, tool_name, arguments, is_error, output_chars, "
                          "message, agent_id, parent_tool_call_id, subagent_tool_calls, subagent_tokens "
                          "FROM tool_calls WHERE session_id = ? ORDER BY turn, step, agent_id NULLS FIRST, tool_call_id",
            "token_usage": "SELECT turn, step, agent_id, message_id, input_other, output, input_cache_read, "
                           "input_cache_creation, total, context_tokens, context_usage FROM token_usage "
                           "WHERE session_id = ? ORDER BY turn, step, agent_id NULLS FIRST, message_id",
        }
        for proxy_sid, ksid in kimi_id.items():
            for view, sql in queries.items():
                a = _rows(rec, sql, [proxy_sid])
                b = _rows(imp, sql, [ksid])
                assert a == b, (ksid, view)
                assert a or view != "turns"
            # what the log cannot know: no client answers, no approvals
            assert _rows(imp, "SELECT count(*) AS n FROM requests WHERE session_id = ? AND resolved_by "
                              "IS NOT NULL", [ksid]) == [{"n": 0}]
        inferred = _rows(imp, "SELECT DISTINCT status_source FROM turns")
        assert inferred == [{"status_source": "inferred"}]


def test_query_cli_over_glob_and_formats(recorded):
    folder, runs = recorded
    glob_arg = os.path.join(str(folder), "*.db")
    sql = "select tool_name, count(*), median(duration_ms) from tool_calls group by 1"
    p = run_cli("wire-query", glob_arg, sql)
    assert p.returncode == 0, p.stderr
    assert "Shell" in p.stdout and "median(duration_ms)" in p.stdout
    with open_workspace([r.db for r in runs.values()]) as ws:
        want = dict(ws.con.execute("select tool_name, count(*) from tool_calls group by 1").fetchall())
    p = run_cli("wire-query", glob_arg, "select tool_name, count(*) as n from tool_calls group by 1",
                "--format", "json")
    assert {r["tool_name"]: r["n"] for r in json.loads(p.stdout)} == want
    p = run_cli("wire-query", glob_arg, "select tool_name, count(*) as n from tool_calls group by 1 order by 1",
                "--format", "csv")
    lines = p.stdout.strip().splitlines()
    assert lines[0] == "tool_name,n" and len(lines) == len(want) + 1
    p = run_cli("wire-query", glob_arg, "select count(*) as n from sessions", "--format", "markdown")
    assert p.stdout.splitlines()[0] == "| n |" and p.stdout.splitlines()[2] == f"| {len(runs)} |"


def test_stats_cli_numbers(recorded):
    folder, runs = recorded
    dbs = [r.db for r in runs.values()]
    p = run_cli("wire-stats", *dbs, "--format", "json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    total = 0
    for r in runs.values():
        _, frames = frames_of(r.db)
        total += sum(t["tokens"] for t in expected_from_frames(frames)["turns"])
    assert s["overview"]["total_tokens"] == total and s["overview"]["sessions"] == len(runs)
    with open_workspace(dbs) as ws:
        read, inp = ws.con.execute("select sum(input_cache_read), sum(input_other + input_cache_read + "
                                   "input_cache_creation) from turns").fetchone()
        n_calls = ws.con.execute("select count(*) from tool_calls where tool_name = 'Shell'").fetchone()[0]
        waits = [r[0] for r in ws.con.execute("select wait_ms from requests where type = 'ApprovalRequest' "
                                              "and outcome = 'approve' and resolved_by = 'client'").fetchall()]
    assert s["overview"]["cache_hit_ratio"] == round(read / inp, 4)
    shell = [t for t in s["slowest tools"] if t["tool"] == "Shell"][0]
    assert shell["calls"] == n_calls
    appr = [r for r in s["approvals and other requests (wait = request to client answer)"]
            if r["type"] == "ApprovalRequest" and r["outcome"] == "approve" and r["by"] == "client"][0]
    assert appr["count"] == len(waits) and appr["max_wait_ms"] == round(max(waits), 1)
    p = run_cli("wire-stats", runs["multi_step"].db)
    assert p.returncode == 0 and "tokens per turn" in p.stdout and "slowest tools" in p.stdout


def test_show_timeline(recorded):
    run = recorded[1][SUBAGENT_ERRORS.name]
    p = run_cli("wire-show", run.db, "--width", "60")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    for needle in ("turn 1", "step 2", "tool Agent", "subagent", "approval: approve after",
                   "retry 2/3", "step interrupted", "-32003", "cache hit ratio"):
        assert needle in out, needle
    _, frames = frames_of(run.db)
    total = sum(t["tokens"] for t in expected_from_frames(frames)["turns"])
    assert f"tokens: {total:,} =" in out


def test_follow_live_recording(kimi_exe, tmp_path):
    """wire-show --follow prints the session while wire-proxy is still recording it."""
    from wire_recorder.analysis.show import follow

    lines: list[str] = []
    box = {}

    def run():
        box["rec"] = record("multi_step", str(tmp_path), kimi=kimi_exe)

    t = threading.Thread(target=run)
    t.start()
    try:
        how = follow(str(tmp_path / "multi_step.db"), None, lines.append, wait_s=30)
    finally:
        t.join(120)
    assert how in ("ended", "spool removed"), how
    text = "\n".join(lines)
    assert "turn 1" in text and "prompt finished" in text and "✓ Shell" in text
    assert "tokens 1,540" in text  # msg-1: 1200 + 40 + 300
    assert not box["rec"].problems


def test_transcript_and_parquet_round_trips(recorded, tmp_path):
    folder, runs = recorded
    run = runs[SUBAGENT_ERRORS.name]
    tr = str(tmp_path / "s.jsonl")
    assert run_cli("wire-export", run.db, "-o", tr).returncode == 0
    p = run_cli("wire-import", tr, "--db", str(tmp_path / "back.db"))
    assert p.returncode == 0, p.stderr
    jl = str(tmp_path / "s.frames.jsonl")
    assert run_cli("wire-export", run.db, "--format", "jsonl", "-o", jl).returncode == 0
    pq = str(tmp_path / "pq")
    p = run_cli("wire-export", *[r.db for r in runs.values()], "--format", "parquet", "--out", pq)
    assert p.returncode == 0, p.stderr
    days = os.listdir(os.path.join(pq, "frames"))
    assert days and all(d.startswith("day=") for d in days)
    sql = ("SELECT count(*), sum(total_tokens), sum(steps) FROM turns")
    with open_workspace([run.db]) as a, open_workspace([str(tmp_path / "back.db")]) as b:
        assert a.con.execute(sql).fetchall() == b.con.execute(sql).fetchall()
        n_frames = a.con.execute("select count(*) from frames").fetchone()[0]
    with open(jl) as f:
        recs = [json.loads(line) for line in f]
    assert len(recs) == n_frames and recs[0]["seq"] == 1
    with open_workspace([r.db for r in runs.values()]) as a, open_workspace([pq]) as b:
        q = "SELECT session_id, turn, total_tokens, status FROM turns ORDER BY 1, 2"
        assert a.con.execute(q).fetchall() == b.con.execute(q).fetchall()
    # any engine: plain DuckDB over the folder, partitioned by day
    con = duckdb.connect()
    n = con.execute(f"SELECT count(*) FROM read_parquet('{pq}/frames/**/*.parquet', hive_partitioning = true) "
                    "WHERE day IS NOT NULL").fetchone()[0]
    assert n == sum(frames_of(r.db)[1].__len__() for r in runs.values())


# -- bad input: one clear line, non-zero exit, no traceback --------------------------------------------
def _one_line_failure(p, *needles):
    assert p.returncode != 0
    err = p.stderr.strip()
    assert "Traceback" not in p.stderr and len(err.splitlines()) == 1, p.stderr
    for n in needles:
        assert n in err, err


def test_bad_inputs(recorded, tmp_path):
    folder, runs = recorded
    good = runs["multi_step"].db
    notdb = tmp_path / "notes.db"
    notdb.write_text("hello, not a database\n")
    _one_line_failure(run_cli("wire-query", str(notdb), "select 1"), "not a DuckDB file")
    _one_line_failure(run_cli("wire-stats", str(notdb)), "not a DuckDB file")
    newer = tmp_path / "newer.db"
    con = duckdb.connect(str(newer))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '99')")
    con.close()
    _one_line_failure(run_cli("wire-query", str(newer), "select 1"), "newer wire-recorder")
    _one_line_failure(run_cli("wire-show", str(newer)), "newer wire-recorder")
    _one_line_failure(run_cli("wire-query", good, "select nope from turns"), "SQL error")
    _one_line_failure(run_cli("wire-query", str(tmp_path / "none-*.db"), "select 1"), "no files match")
    _one_line_failure(run_cli("wire-stats", str(tmp_path / "missing.db")), "no such file")
    log = runs["multi_step"].kimi_log
    data = open(log, "rb").read()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) - 40])  # the last record loses its end
    _one_line_failure(run_cli("wire-import", str(cut), "--db", str(tmp_path / "cut.db")),
                      "not valid JSON", "truncated")
    tr = tmp_path / "t.jsonl"
    assert run_cli("wire-export", good, "-o", str(tr)).returncode == 0
    lines = tr.read_bytes().split(b"\n")
    lines[3] = lines[3][:25]
    tr.write_bytes(b"\n".join(lines))
    _one_line_failure(run_cli("wire-import", str(tr), "--db", str(tmp_path / "t.db")), "t.jsonl:4:")
    _one_line_failure(run_cli("wire-show", good, "--session", "nope"), "no session matching")


def test_only_stderr_lines_that_say_something_failed_are_errors(tmp_path):
    """kimi ends every session with "To resume this session: ..." on stderr: no error. A
    traceback written at once is one error, not one per line. All of it stays in frames."""
    import subprocess
    import sys

    from tests.harness.proxy import run_proxy

    db = str(tmp_path / "s.db")
    agent = ("import sys; sys.stderr.write('To resume this session: kimi -r x\\n'); "
             # one write, as a crashing agent dumps it: one read, one burst for the proxy
             "sys.stderr.write('Traceback (most recent call last):\\n  File \"a.py\", line 1\\n"
             "ValueError: bad\\n')")
    p = run_proxy(["-q", "--db", db, "--", sys.executable, "-c", agent])
    assert p.returncode == 0, p.stderr
    with open_workspace([db]) as ws:
        errors = [r["message"] for r in _rows(ws, "SELECT message FROM errors "
                                                  "WHERE source = 'stderr' ORDER BY seq")]
        logged = _rows(ws, "SELECT count(*) AS n FROM frames WHERE direction = 'stderr'")[0]["n"]
    assert len(errors) == 1 and "Traceback (most recent call last):" in errors[0], errors
    assert errors[0].endswith("ValueError: bad")
    assert logged == 4
    stats = subprocess.run([os.path.join(os.path.dirname(sys.executable), "wire-stats"), db],
                           capture_output=True, text=True, timeout=60)
    assert "errors: stderr 1" in stats.stdout, stats.stdout


# -- history re-sent by `replay` ---------------------------------------------------------------------
def _drive_with_replay(argv: list[str], env: dict, cwd: str, deadline_s: float = 120) -> list[dict]:
    """A Wire client: initialize (with an external tool), prompt, `replay`, prompt, EOF.
    Approvals are approved, external tool requests answered (the replayed one too: kimi
    ignores it). Returns the frames the client received."""
    import subprocess

    from sample_sessions.scenarios import WEATHER_RESULT, WEATHER_TOOL

    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    killer = threading.Timer(deadline_s, proc.kill)
    killer.start()
    got: list[dict] = []
    assert proc.stdin is not None and proc.stdout is not None

    def send(msg: dict) -> None:
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
        proc.stdin.flush()

    def until_answer(rid: str) -> dict:
        for line in proc.stdout:
            msg = json.loads(line)
            got.append(msg)
            if msg.get("method") == "request":
                kind, payload = msg["params"]["type"], msg["params"]["payload"]
                if kind == "ApprovalRequest":
                    send({"jsonrpc": "2.0", "id": msg["id"], "result": {
                        "request_id": msg["id"], "response": "approve"}})
                elif kind == "ToolCallRequest":
                    send({"jsonrpc": "2.0", "id": msg["id"], "result": {
                        "tool_call_id": payload["id"], "return_value": WEATHER_RESULT}})
            elif msg.get("id") == rid and "method" not in msg:
                return msg
        raise AssertionError(f"no answer to {rid}")

    try:
        send({"jsonrpc": "2.0", "method": "initialize", "id": "init-1", "params": {
            "protocol_version": "1.10", "external_tools": [WEATHER_TOOL]}})
        until_answer("init-1")
        send({"jsonrpc": "2.0", "method": "prompt", "id": "p-1",
              "params": {"user_input": "Weather, then list files"}})
        assert until_answer("p-1")["result"]["status"] == "finished"
        send({"jsonrpc": "2.0", "method": "replay", "id": "r-1", "params": {}})
        assert until_answer("r-1")["result"]["status"] == "finished"
        send({"jsonrpc": "2.0", "method": "prompt", "id": "p-2", "params": {"user_input": "Thanks"}})
        assert until_answer("p-2")["result"]["status"] == "finished"
        proc.stdin.close()
        proc.wait(60)
    finally:
        killer.cancel()
        proc.kill()
        proc.wait()
    return got


def test_replayed_history_is_marked_and_not_counted(kimi_exe, tmp_path):
    """kimi re-sends a session's history when the client asks for `replay`: the views mark it
    and leave it out, so they equal those of kimi's own log of the same run (which does not
    hold replayed frames); wire-stats and wire-show count it nowhere."""
    import shutil

    from tests.harness.kimi_peer import KimiRun, msg_id, script, shell, text, tool_call, usage

    scripts = [
        script(msg_id("m-1"), usage(300, 20, 100), text("Checking."),
               tool_call("call-w1", "lookup_weather", {"city": "Paris"}), shell("call-s1", "echo hi")),
        script(msg_id("m-2"), usage(400, 30, 200), text("Sunny, and the folder is listed.")),
        script(msg_id("m-3"), usage(500, 10, 300), text("You are welcome.")),
    ]
    run = KimiRun.create(scripts, session_id="wr-replayed", kimi=kimi_exe, tmp_root=tmp_path)
    db = str(tmp_path / "replayed.db")
    got = _drive_with_replay([str(harness.BIN / "wire-proxy"), "--db", db, "--name", "replayed",
                              "--", *run.argv()], run.env(), str(run.workdir))
    # the agent did re-send turn 1, its requests with their original ids
    assert [m["params"]["type"] for m in got if m.get("params", {}).get("type") == "TurnBegin"] == \
        ["TurnBegin"] * 3
    assert sum(m.get("id") == "call-w1" and m.get("method") == "request" for m in got) == 2
    log = tmp_path / "kimi-log" / "wr-replayed" / "wire.jsonl"
    log.parent.mkdir(parents=True)
    shutil.copyfile(next(run.home.glob(".kimi/sessions/*/wr-replayed/wire.jsonl")), log)
    imported = str(tmp_path / "imported.db")
    assert run_cli("wire-import", str(log), "--db", imported).returncode == 0
    views = {
        "turns": "turn, user_input, status, steps, tool_calls, subagent_tool_calls, retries, "
                 "input_other, output, input_cache_read, input_cache_creation, total_tokens",
        "steps": "turn, step, total_tokens, message_id, context_tokens, tool_calls, interrupted",
        "tool_calls": "turn, step, tool_call_id, tool_name, arguments, is_error, output_chars, "
                      "external, agent_id",
        "token_usage": "turn, step, agent_id, message_id, input_other, output, input_cache_read, "
                       "input_cache_creation, total, context_tokens",
        "requests": "turn, step, request_id, type, subject",
    }
    with open_workspace([db]) as rec, open_workspace([imported]) as imp:
        for view, cols in views.items():
            # kimi's log holds no approvals (they travel outside the turn)
            odd = " AND type <> 'ApprovalRequest'" if view == "requests" else ""
            live = f"SELECT {cols} FROM {view} WHERE NOT history{odd} ORDER BY ALL"
            assert _rows(rec, live) == _rows(imp, live), view
            assert _rows(imp, f"SELECT count(*) AS n FROM {view} WHERE history") == [{"n": 0}]
        # the history is there, marked: turn 1 once more, with its calls and tokens
        hist = _rows(rec, "SELECT turn, status, total_tokens FROM turns WHERE history")
        first = _rows(rec, "SELECT turn, status, total_tokens FROM turns WHERE NOT history "
                           "AND turn = 1")
        assert hist == first and hist[0]["total_tokens"] > 0
        assert _rows(rec, "SELECT tool_call_id FROM tool_calls WHERE history ORDER BY 1") == \
            [{"tool_call_id": "call-s1"}, {"tool_call_id": "call-w1"}]
        assert _rows(rec, "SELECT name, count(*) AS n FROM turns GROUP BY 1") == \
            [{"name": "replayed", "n": 3}]
        want_tokens = imp.con.execute("SELECT sum(total_tokens) FROM turns").fetchone()[0]
    stats = json.loads(run_cli("wire-stats", db, "--format", "json").stdout)["overview"]
    assert (stats["turns"], stats["total_tokens"]) == (2, want_tokens)
    assert stats["protocols"]["wire"]["tool_calls"] == 2
    show = run_cli("wire-show", db, "--session", "replayed").stdout
    assert "history" in show and f"tokens: {want_tokens:,} =" in show
    assert "total: 2 turns" in show and "2 tool calls" in show
