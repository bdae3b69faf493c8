"""The analysis views, wire-show and wire-stats on ACP and MCP sessions.

Sessions: the recorded samples (sample_sessions/acp_tools.jsonl, mcp_*.jsonl) and fresh ones
recorded here through the real wire-proxy between the real peers (kimi acp with the ACP SDK
client; the MCP SDK client and demo server in both eras). Every expected number is recomputed in
Python straight from the frames, never typed in. Files are named like the aliases of the view
SQL (`p.db`, `e.db`, `f.db`): DuckDB names a file's catalog after its stem.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import orjson
import pytest

from tests.harness.analysis import run_cli
from wire_recorder.analysis.importers import import_files
from wire_recorder.analysis.sources import open_workspace
from wire_recorder.analysis.views import (
    VIEW_NAMES,
    VIEWS_VERSION,
    install_views,
    refresh,
    sql_texts,
)
from wire_recorder.recorder.store import open_store

SAMPLES = Path(__file__).resolve().parents[1] / "sample_sessions"
WIRE_PROXY = str(Path(sys.executable).parent / "wire-proxy")
MCP_SAMPLES = ["mcp_demo_2026", "mcp_demo_2025", "mcp_demo_2025_v2", "mcp_fallback", "mcp_time",
               "mcp_git"]
INPUT_METHODS = ("tools/call", "prompts/get", "resources/read")


def _rows(con, sql, params=()):
    cur = con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _p(f):
    return orjson.loads(f.payload) if f.payload else {}


def _ms(a: int, b: int) -> float:
    return max(b - a, 0) / 1e6


# -- facts recomputed from the frames ---------------------------------------------------------------
def answers(frames) -> dict[int, object]:
    """request seq -> its answer frame: the first response or error after it going the *other*
    way with the same id (ids count per direction); an answer recorded just before its request
    (the relay writes first, records after) when there is none after it."""
    rpc = [f for f in frames if f.direction in ("c2a", "a2c") and f.rpc_id is not None]
    out: dict[int, object] = {}
    taken: set[int] = set()
    for i, r in enumerate(rpc):
        if r.kind != "request":
            continue
        other = "a2c" if r.direction == "c2a" else "c2a"
        later = next((a for a in rpc[i + 1:] if a.kind in ("response", "error")
                      and a.direction == other and a.rpc_id == r.rpc_id and a.seq not in taken), None)
        if later is None:
            later = next((a for a in reversed(rpc[:i]) if a.kind in ("response", "error")
                          and a.direction == other and a.rpc_id == r.rpc_id and a.seq not in taken), None)
        if later is not None:
            out[r.seq] = later
            taken.add(later.seq)
    return out


def expected_acp(frames) -> dict:
    ans = answers(frames)
    turns, calls, requests = [], {}, []
    turn = None
    for f in frames:
        p = _p(f)
        if f.direction == "c2a" and f.kind == "request" and f.method == "session/prompt":
            turn = len(turns) + 1
            a = ans.get(f.seq)
            turns.append({"turn": turn, "prompt_id": f.rpc_id,
                          "text": "\n".join(b["text"] for b in p["prompt"] if b["type"] == "text"),
                          "ms": _ms(f.mono_ns, a.mono_ns) if a else None,
                          "stop": _p(a).get("stopReason") if a else None})
        elif f.method == "session/update" and f.msg_type in ("tool_call", "tool_call_update"):
            u = p["update"]
            if f.msg_type == "tool_call":
                calls[u["toolCallId"]] = {"turn": turn, "start": f.mono_ns, "end": None,
                                          "status": u.get("status"), "title": u.get("title")}
            else:
                c = calls[u["toolCallId"]]
                if u.get("status"):
                    if c["end"] is None and u["status"] in ("completed", "failed"):
                        c["end"] = f.mono_ns
                    c["status"] = u["status"]
        if f.direction == "a2c" and f.kind == "request":
            a = ans.get(f.seq)
            requests.append({"request_id": f.rpc_id, "type": f.method, "turn": turn,
                             "wait": _ms(f.mono_ns, a.mono_ns) if a else None,
                             "answer": _p(a) if a else None, "params": p})
    return {"turns": turns, "calls": calls, "requests": requests}


def expected_mcp(frames) -> dict:
    """Logical tool calls (a 2026-07-28 call spans its input_required rounds) and the server's
    requests, both as JSON-RPC requests and inside input_required results."""
    ans = answers(frames)
    chains, by_state, requests = [], {}, []
    for f in frames:
        if f.direction == "c2a" and f.kind == "request" and f.method == "tools/call":
            p, a = _p(f), ans.get(f.seq)
            prev = by_state.pop(p.get("requestState"), None) if p.get("requestState") else None
            if prev is None:
                chain = {"id": f.rpc_id, "name": p["name"], "args": p.get("arguments"),
                         "start": f.mono_ns, "rounds": 0, "input_wait": 0.0}
                chains.append(chain)
            else:
                chain, asked_mono, asks = prev
                chain["input_wait"] += _ms(asked_mono, f.mono_ns)
                for key, ask in asks.items():
                    requests.append({"request_id": key, "type": ask["method"], "via": "input_required",
                                     "wait": _ms(asked_mono, f.mono_ns), "tool_call_id": chain["id"],
                                     "answer": p["inputResponses"].get(key)})
            result = _p(a) if a else None
            chain["answer"], chain["kind"] = result, a.kind if a else None
            chain["end"] = a.mono_ns if a else None
            if a is not None and a.kind == "response" and result.get("resultType") == "input_required":
                chain["rounds"] += 1
                by_state[result["requestState"]] = (chain, a.mono_ns, result["inputRequests"])
        if f.direction == "a2c" and f.kind == "request":
            a = ans.get(f.seq)
            requests.append({"request_id": f.rpc_id, "type": f.method, "via": "request",
                             "wait": _ms(f.mono_ns, a.mono_ns) if a else None, "tool_call_id": None,
                             "answer": _p(a) if a else None})
    return {"calls": chains, "requests": requests}


# -- checks shared by samples and fresh recordings -------------------------------------------------
def check_acp_session(ws, sid: str, frames) -> dict:
    exp = expected_acp(frames)
    turns = _rows(ws.con, "SELECT * FROM turns WHERE session_id = ? ORDER BY turn", [sid])
    assert [t["protocol"] for t in turns] == ["acp"] * len(exp["turns"])
    for got, want in zip(turns, exp["turns"], strict=True):
        assert (got["turn"], got["prompt_id"], got["user_input"]) == \
            (want["turn"], want["prompt_id"], want["text"])
        assert got["duration_ms"] == pytest.approx(want["ms"], abs=1e-6)
        assert got["response_ms"] == got["duration_ms"]
        assert got["stop_reason"] == want["stop"]
        assert got["status"] == {"end_turn": "finished"}.get(want["stop"], want["stop"])
        assert got["status_source"] == "response" and got["steps"] is None
        assert got["tool_calls"] == sum(c["turn"] == want["turn"] for c in exp["calls"].values())
        assert got["approvals"] == sum(r["turn"] == want["turn"] and r["type"] == "session/request_permission"
                                       for r in exp["requests"])

    calls = {c["tool_call_id"]: c for c in
             _rows(ws.con, "SELECT * FROM tool_calls WHERE session_id = ?", [sid])}
    assert set(calls) == set(exp["calls"])
    perms = {r["params"]["toolCall"]["toolCallId"]: r for r in exp["requests"]
             if r["type"] == "session/request_permission"}
    for cid, want in exp["calls"].items():
        got = calls[cid]
        assert got["protocol"] == "acp" and got["turn"] == want["turn"]
        assert got["status"] == want["status"] and got["is_error"] == (want["status"] == "failed")
        assert got["title"] == want["title"] and got["tool_name"] == want["title"].split(":")[0]
        assert got["duration_ms"] == pytest.approx((want["end"] - want["start"]) / 1e6, abs=1e-6)
        perm = perms.get(cid)
        assert got["approval_requested"] == (perm is not None)
        if perm:
            assert got["approval"] == perm["answer"]["outcome"]["optionId"]
            assert got["approval_wait_ms"] == pytest.approx(perm["wait"], abs=1e-6)

    reqs = _rows(ws.con, "SELECT * FROM requests WHERE session_id = ? ORDER BY seq", [sid])
    assert [(r["request_id"], r["type"], r["turn"]) for r in reqs] == \
        [(r["request_id"], r["type"], r["turn"]) for r in exp["requests"]]
    for got, want in zip(reqs, exp["requests"], strict=True):
        assert got["protocol"] == "acp" and got["via"] == "request" and got["resolved_by"] == "client"
        assert got["wait_ms"] == pytest.approx(want["wait"], abs=1e-6)
        assert json.loads(got["answer"]) == want["answer"]
    return {"turns": turns, "calls": calls, "requests": reqs}


def check_mcp_session(ws, sid: str, frames) -> dict:
    exp = expected_mcp(frames)
    assert _rows(ws.con, "SELECT * FROM turns WHERE session_id = ?", [sid]) == []  # MCP has no turns
    calls = _rows(ws.con, "SELECT * FROM tool_calls WHERE session_id = ? ORDER BY seq", [sid])
    assert [(c["tool_call_id"], c["tool_name"]) for c in calls] == [(c["id"], c["name"]) for c in exp["calls"]]
    for got, want in zip(calls, exp["calls"], strict=True):
        assert got["protocol"] == "mcp" and got["turn"] is None
        assert json.loads(got["arguments"]) == want["args"]
        assert got["duration_ms"] == pytest.approx((want["end"] - want["start"]) / 1e6, abs=1e-6)
        assert got["input_rounds"] == want["rounds"]
        assert got["input_wait_ms"] == pytest.approx(want["input_wait"], abs=1e-6)
        is_error = want["kind"] == "error" or bool(want["answer"].get("isError"))
        assert got["is_error"] == is_error
        assert got["status"] == ("failed" if is_error else "completed")
    reqs = _rows(ws.con, "SELECT * FROM requests WHERE session_id = ? ORDER BY seq, request_id", [sid])
    def key(r):
        return (r["via"], r["type"], str(r["request_id"]))

    assert sorted(map(key, reqs)) == sorted(map(key, exp["requests"]))
    want_by_key = {key(r): r for r in exp["requests"]}
    for got in reqs:
        want = want_by_key[key(got)]
        assert got["protocol"] == "mcp" and got["tool_call_id"] == want["tool_call_id"]
        assert got["wait_ms"] == pytest.approx(want["wait"], abs=1e-6)
        assert json.loads(got["answer"]) == want["answer"]
        assert got["outcome"] == (want["answer"].get("action") if got["type"] == "elicitation/create"
                                  else "answered")
    return {"calls": calls, "requests": reqs}


# -- fixtures -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    """Every ACP and MCP sample imported into one DB named `e.db` (a view alias once)."""
    db = str(tmp_path_factory.mktemp("samples") / "e.db")
    import_files([str(SAMPLES / f"{n}.jsonl") for n in ["acp_tools", *MCP_SAMPLES]], db)
    with open_store(db, read_only=True) as store:
        sessions = {s["name"]: s for s in store.sessions()}
        frames = {name: store.frames(s["session_id"]) for name, s in sessions.items()}
    return db, sessions, frames


@pytest.fixture(scope="module")
def fresh(acp_recordings, mcp_peers, tmp_path_factory):
    """Fresh recordings through the real wire-proxy, side by side: kimi acp (acp_tools, once per
    test run: tests/harness/acp_recordings.py) copied to `p.db`, and the MCP demo in both eras
    into `f.db`."""
    from sample_sessions.mcp_scenarios import MCP_SCENARIOS
    from tests.harness.mcp import check_mcp_scenario, run_mcp_scenario
    from tests.harness.recording import proxy_prefix

    tmp = tmp_path_factory.mktemp("fresh")
    acp_db, mcp_db = str(tmp / "p.db"), str(tmp / "f.db")

    def acp():
        rec = acp_recordings.get("acp_tools")
        rec.copy_to(tmp, "p")
        return rec.problems

    def mcp():
        problems = []
        for name in ("mcp_demo_2026", "mcp_demo_2025"):
            result = run_mcp_scenario(MCP_SCENARIOS[name], proxy_prefix(name, mcp_db))
            problems += check_mcp_scenario(MCP_SCENARIOS[name], result)
        return problems

    with ThreadPoolExecutor(2) as ex:
        a, m = ex.submit(acp), ex.submit(mcp)
        problems = a.result() + m.result()
    assert not problems, problems
    out = {}
    for db in (acp_db, mcp_db):
        with open_store(db, read_only=True) as store:
            for s in store.sessions():
                out[s["name"]] = (db, s, store.frames(s["session_id"]))
    return out


# -- ACP ------------------------------------------------------------------------------------------
def test_acp_sample_views_match_frames(samples):
    db, sessions, frames = samples
    sid = sessions["acp_tools"]["session_id"]
    with open_workspace([db]) as ws:
        got = check_acp_session(ws, sid, frames["acp_tools"])
        errs = _rows(ws.con, "SELECT * FROM errors WHERE session_id = ?", [sid])
        odd = _rows(ws.con, "SELECT * FROM anomalies WHERE session_id = ?", [sid])
    calls, reqs = got["calls"].values(), got["requests"]
    assert len(calls) == 4
    assert Counter(c["status"] for c in calls) == {"completed": 3, "failed": 1}
    assert Counter(c["tool_name"] for c in calls) == {"Shell": 2, "ReadFile": 1, "WriteFile": 1}
    perms = [r for r in reqs if r["type"] == "session/request_permission"]
    assert [(r["outcome"], r["turn"]) for r in perms] == [("approve", 1), ("approve", 1), ("reject", 2)]
    assert [c["approval"] for c in sorted(calls, key=lambda c: c["seq"]) if c["approval_requested"]] == \
        ["approve", "approve", "reject"]
    failed = [c for c in calls if c["is_error"]][0]
    assert failed["approval"] == "reject" and "rejected by the user" in failed["message"]
    assert {r["type"] for r in reqs} == {"session/request_permission", "terminal/create",
                                         "terminal/wait_for_exit", "terminal/output",
                                         "terminal/release", "fs/read_text_file", "fs/write_text_file"}
    # id 2 is live both ways: the prompt (client -> agent) and terminal/wait_for_exit (agent ->
    # client); each is paired with the answer going the other way
    assert got["turns"][0]["prompt_id"] == "2"
    assert [r["subject"] for r in reqs if r["request_id"] == "2"] == ["term-1"]
    assert errs == [] and odd == []


def test_acp_fresh_recording_into_p_db(fresh):
    db, session, frames = fresh["acp_tools"]
    assert Path(db).name == "p.db" and session["protocol"] == "acp"
    with open_workspace([db]) as ws:
        got = check_acp_session(ws, session["session_id"], frames)
    assert Counter(c["status"] for c in got["calls"].values()) == {"completed": 3, "failed": 1}
    assert [r["outcome"] for r in got["requests"] if r["type"] == "session/request_permission"] == \
        ["approve", "approve", "reject"]
    # the views analysis stores in the file (catalog `p`) when the loader closes the session
    # (analysis/stored_views.py) give the same rows
    con = duckdb.connect(db, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchone()[0] > 0
    finally:
        con.close()
    assert not refresh(db)  # the current set is there already
    con = duckdb.connect(db, read_only=True)
    try:
        stored = _rows(con, "SELECT tool_call_id, status, duration_ms FROM tool_calls ORDER BY seq")
        assert con.execute("SELECT value FROM meta WHERE key = 'analysis_views'").fetchone() == \
            (VIEWS_VERSION,)
    finally:
        con.close()
    assert stored == [{k: c[k] for k in ("tool_call_id", "status", "duration_ms")}
                      for c in sorted(got["calls"].values(), key=lambda c: c["seq"])]


# -- MCP ------------------------------------------------------------------------------------------
def test_mcp_sample_views_match_frames(samples):
    db, sessions, frames = samples
    with open_workspace([db]) as ws:
        got = {n: check_mcp_session(ws, sessions[n]["session_id"], frames[n]) for n in MCP_SAMPLES}
        fallback = _rows(ws.con, "SELECT * FROM errors WHERE session_id = ? AND source = 'jsonrpc'",
                         [sessions["mcp_fallback"]["session_id"]])
        assert sorted(r["protocol"] for r in _rows(ws.con, "SELECT DISTINCT protocol FROM tool_calls")) == \
            ["acp", "mcp"]
    # 2026-07-28: one logical call per tool, three of them with an input_required round each,
    # whose inputRequests are the server's requests, answered by the retries' inputResponses
    modern = got["mcp_demo_2026"]
    assert [(c["tool_name"], c["input_rounds"]) for c in modern["calls"]] == \
        [("add", 0), ("ask_llm", 1), ("client_roots", 1), ("confirm", 1)]
    assert all(c["input_wait_ms"] > 0 for c in modern["calls"] if c["input_rounds"])
    assert [(r["type"], r["via"], r["outcome"]) for r in modern["requests"]] == [
        ("sampling/createMessage", "input_required", "answered"),
        ("roots/list", "input_required", "answered"),
        ("elicitation/create", "input_required", "accept")]
    for r in modern["requests"]:
        call = [c for c in modern["calls"] if c["tool_call_id"] == r["tool_call_id"]][0]
        assert r["wait_ms"] == pytest.approx(call["input_wait_ms"], abs=1e-6)
    # the handshake era: the same tools, the server's requests are JSON-RPC requests
    for name in ("mcp_demo_2025", "mcp_demo_2025_v2", "mcp_fallback"):
        assert [(r["type"], r["via"]) for r in got[name]["requests"]] == [
            ("sampling/createMessage", "request"), ("roots/list", "request"), ("elicitation/create", "request")]
        assert all(c["input_rounds"] == 0 for c in got[name]["calls"])
    failed = [c for c in got["mcp_time"]["calls"] if c["is_error"]]
    assert len(failed) == 1 and "Invalid timezone" in failed[0]["message"]
    assert [(e["code"], e["related"], e["protocol"]) for e in fallback] == [(-32602, "server/discover", "mcp")]


def test_mcp_fresh_recordings_into_f_db(fresh):
    for name in ("mcp_demo_2026", "mcp_demo_2025"):
        db, session, frames = fresh[name]
        assert Path(db).name == "f.db"
        with open_workspace([db]) as ws:
            got = check_mcp_session(ws, session["session_id"], frames)
        assert len(got["calls"]) == 4 and len(got["requests"]) == 3
        assert sum(c["input_rounds"] for c in got["calls"]) == (3 if name.endswith("2026") else 0)


# -- anomalies, invalid frames, reused ids ----------------------------------------------------------
def _transcript(path: Path, protocol: str, lines: list[tuple]) -> str:
    head = {"wire_transcript": 1, "session": {"session_id": f"synthetic-{protocol}", "name": path.stem,
                                              "started_at": "2026-01-01T00:00:00", "protocol": protocol,
                                              "mono_start_ns": 1_000_000_000}}
    out = [orjson.dumps(head)]
    for i, (d, what) in enumerate(lines):
        key = "frame" if not isinstance(what, str) else "text"
        out.append(orjson.dumps({"dir": d, key: what, "t_ms": float(i + 1)}))
    path.write_bytes(b"\n".join(out) + b"\n")
    return str(path)


def _req(i, method, params=None):
    return {"jsonrpc": "2.0", "id": i, "method": method, **({"params": params} if params is not None else {})}


def _res(i, result):
    return {"jsonrpc": "2.0", "id": i, "result": result}


def test_anomalies_and_invalid_frames_are_visible(tmp_path):
    tr = _transcript(tmp_path / "odd.jsonl", "acp", [
        ("c2a", _req(0, "initialize", {"protocolVersion": 1})),
        ("a2c", _res(0, {"protocolVersion": 1})),
        ("c2a", _req(1, "session/prompt", {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]})),
        ("a2c", _req(1, "fs/read_text_file", {"sessionId": "s", "path": "/a"})),  # id 1 both ways: fine
        ("a2c", _req(1, "fs/read_text_file", {"sessionId": "s", "path": "/b"})),  # reused while pending
        ("c2a", _res(1, {"content": "b"})),
        ("c2a", _res(1, {"content": "a"})),
        ("c2a", _req(7, "prompt", {"user_input": "a Wire method"})),             # another protocol's
        ("a2c", [1, 2]),                                                        # a batch
        ("a2c", "not json"),
        ("a2c", _res(1, {"stopReason": "end_turn"})),
    ])
    db = str(tmp_path / "odd.db")
    import_files([tr], db)
    with open_workspace([db]) as ws:
        odd = _rows(ws.con, "SELECT * FROM anomalies ORDER BY seq")
        errs = _rows(ws.con, "SELECT source, turn, protocol FROM errors ORDER BY seq")
        reqs = _rows(ws.con, "SELECT subject, answer::VARCHAR AS answer FROM requests ORDER BY seq")
        turns = _rows(ws.con, "SELECT turn, status, duration_ms FROM turns")
    assert [(o["kind"], o["turn"], o["protocol"]) for o in odd] == \
        [("request", 1, "acp"), ("request", 1, "acp"), ("invalid", 1, "acp"), ("invalid", 1, "acp")]
    assert "reused" in odd[0]["problem"] and "wire method" in odd[1]["problem"]
    assert "batch" in odd[2]["problem"] and "not JSON" in odd[3]["problem"]
    assert [e["source"] for e in errs] == ["anomaly", "anomaly", "invalid_frame", "invalid_frame"]
    # an answer goes with the latest request with its id still open: both get one
    assert reqs == [{"subject": "/a", "answer": '{"content":"a"}'}, {"subject": "/b", "answer": '{"content":"b"}'}]
    assert turns == [{"turn": 1, "status": "finished", "duration_ms": 8.0}]
    p = run_cli("wire-show", db)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("anomaly (") == 2 and "reused" in p.stdout and "is a wire method" in p.stdout
    assert "answered fs/read_text_file after 1 ms: 1 chars" in p.stdout  # /b: answered first
    assert "answered fs/read_text_file after 3 ms: 1 chars" in p.stdout  # /a
    assert p.stdout.count("invalid a2c frame") == 2 and "2 anomalies" in p.stdout


def test_ids_reused_after_an_answer_pair_with_the_next_answer(tmp_path):
    tr = _transcript(tmp_path / "reuse.jsonl", "mcp", [
        ("c2a", _req(5, "tools/call", {"name": "a", "arguments": {}})),
        ("a2c", _req(5, "ping")),                                # the server's id 5: the other way
        ("c2a", _res(5, {})),
        ("a2c", _res(5, {"content": [{"type": "text", "text": "one"}], "isError": False})),
        ("c2a", _req(5, "tools/call", {"name": "b", "arguments": {}})),  # reused once answered
        ("a2c", {"jsonrpc": "2.0", "id": 5, "error": {"code": -32000, "message": "boom"}}),
    ])
    db = str(tmp_path / "reuse.db")
    import_files([tr], db)
    with open_workspace([db]) as ws:
        calls = _rows(ws.con, "SELECT tool_name, duration_ms, status, is_error, message FROM tool_calls ORDER BY seq")
        reqs = _rows(ws.con, "SELECT type, wait_ms, outcome FROM requests")
        errs = _rows(ws.con, "SELECT source, related FROM errors")
        odd = _rows(ws.con, "SELECT * FROM anomalies")
    assert calls == [{"tool_name": "a", "duration_ms": 3.0, "status": "completed", "is_error": False, "message": None},
                     {"tool_name": "b", "duration_ms": 1.0, "status": "error", "is_error": True, "message": "boom"}]
    assert reqs == [{"type": "ping", "wait_ms": 1.0, "outcome": "answered"}]
    assert errs == [{"source": "jsonrpc", "related": "tools/call"}] and odd == []


# -- catalog names --------------------------------------------------------------------------------
def _name_classes() -> dict[str, tuple]:
    """Every name used before a dot in the view SQL (common and every protocol's part), and the
    struct columns read with brackets, each with how the SQL uses it: as the head of a chain of
    3+ parts (`x.y.z`, which DuckDB reads as catalog.table.column when `x` is the file's
    catalog), before a dot, before a bracket, as a view's name."""
    chain3: set[str] = set()
    dotted: set[str] = set()
    bracket: set[str] = set()
    for sql in sql_texts():
        code = re.sub(r"--[^\n]*", "", sql)
        code = re.sub(r"'[^']*'", "''", code)
        chain3 |= set(re.findall(r"\b([A-Za-z_]\w*)\s*\.\s*[A-Za-z_]\w*\s*\.\s*[A-Za-z_\[]", code))
        dotted |= set(re.findall(r"\b([A-Za-z_]\w*)\s*\.\s*[A-Za-z_]", code))
        bracket |= set(re.findall(r"\b([A-Za-z_]\w*)\s*\[", code))
    return {n: (n in chain3, n in dotted, n in bracket, n in VIEW_NAMES)
            for n in dotted | bracket}


def test_views_work_in_files_named_like_their_aliases(samples, tmp_path):
    """DuckDB takes a file's stem as its catalog name, and reads `x.y.z` as catalog.table.column
    when `x` is the file's catalog (an attached one does not count): `p.db` broke recording once
    (`p.function.name`, p a struct column). Binding every view costs ~0.5 s a file, so each
    name that heads a chain of 3+ parts gets its own file, and of the other names (before a
    dot, before a bracket, a view's name) one per way the SQL uses them; so do the names that
    broke or are special to DuckDB."""
    db, _, _ = samples
    classes = _name_classes()
    assert {"frames", "wire_calls", "turn_of", "status"} <= set(classes)
    # querying plans every view again (seconds a file): the name that broke and every name that
    # could be read as a catalog get it; binding at install already meets a catalog misread
    queried = {"p"} | {n for n, c in classes.items() if c[0]}
    names = queried | {"frames", "sessions", "main", "temp"}
    for c in set(classes.values()):
        names.add(min(n for n, k in classes.items() if k == c))
    with open_workspace([db]) as ws:
        want = {v: ws.con.execute(f"SELECT count(*), sum(hash(seq)) FROM {v}").fetchone()
                for v in VIEW_NAMES if not v.startswith("wr_")}
    def check(name: str) -> None:
        copy = tmp_path / f"{name}.db"
        shutil.copyfile(db, copy)
        con = duckdb.connect(str(copy))
        try:
            install_views(con)  # what wire-import does to the file it writes: binds every view
            views = list(want) if name in queried else []
            got = {v: con.execute(f"SELECT count(*), sum(hash(seq)) FROM {v}").fetchone() for v in views}
        finally:
            con.close()
        assert got == {v: want[v] for v in views}, name

    with ThreadPoolExecutor(2) as ex:
        list(ex.map(check, sorted(names)))
    # and through the commands: an import into a file named like an alias
    p = run_cli("wire-import", str(SAMPLES / "mcp_demo_2026.jsonl"), "--db", str(tmp_path / "tc.db"), "-q")
    assert p.returncode == 0, p.stderr


def test_sql_files_are_named_after_views():
    """Files are found by name: a protocol's file named after no view would be silently left
    out, so every one must be a view's part (or its macros, or wire-diff's tool outputs)."""
    root = Path(__file__).resolve().parents[1]
    known = {"macros", *VIEW_NAMES}
    assert {p.stem for p in (root / "analysis" / "sql").glob("*.sql")} == known | {"comments"}
    parts = {p.relative_to(root).as_posix() for p in (root / "recorder" / "protocols").glob("*/*.sql")}
    assert parts and all(Path(p).stem in known | {"tool_outputs"} for p in parts), parts
    assert "recorder/protocols/acp/tool_calls.sql" in parts


def test_sql_has_no_chained_json_arrows():
    """A view stored by DuckDB 2 with a chained arrow (`x->'a'->>'b'`) fails in DuckDB 1.4
    ("Malformed JSON ... Input: a"), which reads recordings too; one JSONPath (`x->>'$.a.b'`)
    works in both."""
    step = r"->>?\s*(?:'[^']*'|\d+)"
    for sql in sql_texts():
        code = re.sub(r"--[^\n]*", "", sql)
        assert not re.search(rf"->\s*(?:'[^']*'|\d+)\s*{step}", code), code


def test_stored_views_and_columns_are_described(samples):
    """A file analysis wrote explains itself in any DuckDB: every view people query and each
    of its columns (and the recorder's tables) has a comment."""
    db, _, _ = samples
    con = duckdb.connect(db, read_only=True)
    try:
        bare = con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = "
            "current_database() AND NOT starts_with(table_name, 'wr_') AND table_name NOT IN "
            "('meta', 'workdir_files') AND comment IS NULL").fetchall()
        views = dict(con.execute("SELECT view_name, comment FROM duckdb_views() "
                                 "WHERE NOT internal AND NOT starts_with(view_name, 'wr_')").fetchall())
    finally:
        con.close()
    assert bare == []
    assert set(views) == {"turns", "steps", "token_usage", "tool_calls", "requests", "errors",
                          "anomalies", "llm_calls"} and all(views.values()), views


def test_stored_views_equal_workspace_views(samples):
    """The views stored in a file (every protocol part on) and the workspace's (parts for
    protocols absent from the inputs left out) give the same rows."""
    db, sessions, _ = samples
    with open_workspace([db]) as ws, open_workspace([str(SAMPLES / "acp_tools.jsonl")]) as acp_only:
        con = duckdb.connect(db, read_only=True)
        try:
            for v in ("turns", "tool_calls", "requests", "errors", "anomalies"):
                q = f"SELECT * EXCLUDE (session_id) FROM {v} ORDER BY ALL"
                assert con.execute(q).fetchall() == ws.con.execute(q).fetchall(), v
                sid = sessions["acp_tools"]["session_id"]
                q = f"SELECT * EXCLUDE (session_id) FROM {v} WHERE session_id = '{sid}' ORDER BY ALL"
                assert acp_only.con.execute(q).fetchall() == ws.con.execute(q).fetchall(), v
        finally:
            con.close()


# -- wire-show and wire-stats -----------------------------------------------------------------------
def test_show_acp_and_mcp(samples):
    db, sessions, _ = samples
    out = {}
    for name in ("acp_tools", "mcp_demo_2026", "mcp_demo_2025", "mcp_time"):
        p = run_cli("wire-show", db, "--session", sessions[name]["session_id"], "--width", "200")
        assert p.returncode == 0, p.stderr
        out[name] = p.stdout
    acp = out["acp_tools"]
    for needle in ("── turn 1 > prompt Look around, read notes.txt and write a summary.",
                   "text Let me look at the environment first.", "thinking Now read the notes file.",
                   "tool Shell: echo hello from the terminal", "permission: approve after",
                   "permission: reject after", "✓ ReadFile: notes.txt", "✗ Shell: rm -rf build failed",
                   "── turn 2 ended: end_turn", "client answered terminal/output",
                   "total: 2 turns, 4 tool calls (1 failed), 3 permission requests"):
        assert needle in acp, needle
    modern = out["mcp_demo_2026"]
    for needle in ("tool ask_llm #4", "input required by ask_llm (round 1): sampling/createMessage",
                   "↻ retry ask_llm #5", "✓ ask_llm", "(1 input round): llm said: 42",
                   "3 input_required rounds"):
        assert needle in modern, needle
    assert "sampling/createMessage \"What is 6 x 7?\"" in out["mcp_demo_2025"]
    assert "client answered elicitation/create" in out["mcp_demo_2025"]
    assert "✗ convert_time failed" in out["mcp_time"]


def test_stats_per_protocol(samples):
    db, _, _ = samples
    p = run_cli("wire-stats", db, "--format", "json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    protos = s["overview"]["protocols"]
    with open_workspace([db]) as ws:
        for proto in ("acp", "mcp"):
            n, errs, rounds = ws.con.execute(
                "SELECT count(*), count(*) FILTER (WHERE is_error), coalesce(sum(input_rounds), 0) "
                "FROM tool_calls WHERE protocol = ?", [proto]).fetchone()
            assert (protos[proto]["tool_calls"], protos[proto]["tool_errors"],
                    protos[proto]["input_rounds"]) == (n, errs, rounds)
            assert protos[proto]["requests"] == ws.con.execute(
                "SELECT count(*) FROM requests WHERE protocol = ?", [proto]).fetchone()[0]
        shell = ws.con.execute("SELECT max(duration_ms) FROM tool_calls WHERE protocol = 'acp' "
                               "AND tool_name = 'Shell'").fetchone()[0]
    assert protos["acp"]["sessions"] == 1 and protos["acp"]["turns"] == 2
    assert protos["mcp"]["sessions"] == len(MCP_SAMPLES) and protos["mcp"]["input_rounds"] == 3
    tools = {(t["protocol"], t["tool"]): t for t in s["slowest tools"]}
    assert tools[("acp", "Shell")]["calls"] == 2 and tools[("acp", "Shell")]["errors"] == 1
    assert tools[("acp", "Shell")]["max_ms"] == pytest.approx(shell, abs=0.051)
    assert tools[("mcp", "ask_llm")]["input_rounds"] == 1
    reqs = s["approvals and other requests (wait = request to client answer)"]
    perms = {r["outcome"]: r["count"] for r in reqs if r["type"] == "session/request_permission"}
    assert perms == {"approve": 2, "reject": 1}
    assert {r["via"] for r in reqs if r["protocol"] == "mcp"} == {"request", "input_required"}
    text = run_cli("wire-stats", db).stdout
    assert "protocols: acp 1 session(s), 2 turns, 4 tool calls (1 failed" in text
    assert "3 input_required rounds" in text


def test_views_over_no_sessions_and_mixed_protocols(samples, tmp_path):
    """A workspace installs only the parts its protocols need: none at all, one, or several."""
    empty = str(tmp_path / "empty.db")
    open_store(empty).close()
    wire = str(SAMPLES / "multi_step.jsonl")
    db, _, _ = samples
    for specs in ([empty], [wire], [db], [db, wire]):
        with open_workspace(specs) as ws:
            for v in VIEW_NAMES:
                ws.con.execute(f"SELECT count(*) FROM {v}").fetchone()
            protos = {r[0] for r in ws.con.execute("SELECT DISTINCT protocol FROM tool_calls").fetchall()}
            assert protos == {p for s in specs for p in
                              ({"wire"} if s == wire else {"acp", "mcp"} if s == db else set())}


# -- the views stay linear in frames, whatever the ids -------------------------------------------------
def write_sessions(db: str, sessions: list[tuple[str, str, list[tuple]]],
                   names: dict[str, str] | None = None) -> None:
    """Sessions ((id, protocol, frames)) of generated frames ((direction, message or stderr
    bytes[, ms])), classified by the loader's own code, 1 ms apart unless ms says when."""
    from wire_recorder.recorder.classify import Extracted, classify
    from wire_recorder.recorder.model import frame_row, wall_ts

    t0 = 1_790_000_000 * 10**9
    with open_store(db) as store:
        for sid, protocol, frames in sessions:
            rows = []
            for i, (direction, msg, *at) in enumerate(frames, start=1):
                raw = msg if isinstance(msg, bytes) else orjson.dumps(msg)
                ns = int(at[0] * 10**6) if at else i * 10**6
                ex = Extracted("stderr") if direction == "stderr" else classify(raw, direction,
                                                                               protocol)
                rows.append(frame_row(sid, i, wall_ts(t0 + ns), ns, direction, raw, True, ex))
            store.insert_frames(rows)
            store.upsert_session({"session_id": sid, "name": (names or {}).get(sid),
                                  "protocol": protocol, "started_at": wall_ts(t0),
                                  "source": "proxy", "mono_start_ns": 0,
                                  "frame_count": sum(f[0] in ("c2a", "a2c") for f in frames)})


def _ev(t, payload):
    return {"jsonrpc": "2.0", "method": "event", "params": {"type": t, "payload": payload}}


def reused_id_sessions(db: str, turns: int) -> int:
    """A Wire client that gives every prompt the id "1" and an agent whose every external tool
    request has the id "ext"; an ACP session whose every request in both directions is id 7;
    an MCP session whose every call has id 3 and needs one input round, all with the state
    "s". Returns the frame count."""
    wire: list[tuple[str, object]] = []
    for t in range(turns):
        wire += [("c2a", {"jsonrpc": "2.0", "method": "prompt", "id": "1",
                          "params": {"user_input": f"turn {t}"}}),
                 ("a2c", _ev("TurnBegin", {"user_input": f"turn {t}"})),
                 ("a2c", _ev("StepBegin", {"n": 1})),
                 ("a2c", _ev("ToolCall", {"type": "function", "id": "ext", "function": {
                     "name": "lookup", "arguments": "{}"}})),
                 ("a2c", {"jsonrpc": "2.0", "method": "request", "id": "ext", "params": {
                     "type": "ToolCallRequest", "payload": {"id": "ext", "name": "lookup"}}}),
                 ("c2a", {"jsonrpc": "2.0", "id": "ext", "result": {
                     "tool_call_id": "ext", "return_value": {"is_error": False, "output": "x"}}}),
                 ("a2c", _ev("ToolResult", {"tool_call_id": "ext", "return_value": {
                     "is_error": False, "output": "x"}})),
                 ("a2c", _ev("TurnEnd", {})),
                 ("a2c", {"jsonrpc": "2.0", "id": "1", "result": {"status": "finished"}})]
    acp: list[tuple[str, object]] = []
    for _ in range(turns):
        acp += [("c2a", {"jsonrpc": "2.0", "method": "session/prompt", "id": 7,
                         "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}}),
                ("a2c", {"jsonrpc": "2.0", "method": "fs/read_text_file", "id": 7,
                         "params": {"sessionId": "s", "path": "/x"}}),
                ("c2a", {"jsonrpc": "2.0", "id": 7, "result": {"content": "x"}}),
                ("a2c", {"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "end_turn"}})]
    mcp: list[tuple[str, object]] = []
    for _ in range(turns):  # MCP 2026: every call needs input, every state is the same "s"
        call = {"name": "t", "arguments": {}}
        mcp += [("c2a", {"jsonrpc": "2.0", "method": "tools/call", "id": 3, "params": call}),
                ("a2c", {"jsonrpc": "2.0", "id": 3, "result": {
                    "resultType": "input_required", "requestState": "s",
                    "inputRequests": {"q": {"method": "roots/list", "params": {}}}}}),
                ("c2a", {"jsonrpc": "2.0", "method": "tools/call", "id": 3, "params": {
                    **call, "requestState": "s", "inputResponses": {"q": {"roots": []}}}}),
                ("a2c", {"jsonrpc": "2.0", "id": 3, "result": {
                    "content": [{"type": "text", "text": "ok"}]}})]
    write_sessions(db, [("wire-reused", "wire", wire), ("acp-reused", "acp", acp),
                        ("mcp-reused", "mcp", mcp)])
    return len(wire) + len(acp) + len(mcp)


def _max_rows(plan) -> int:
    """The most rows any operator of an EXPLAIN ANALYZE (JSON) plan produced."""
    if isinstance(plan, list):
        return max((_max_rows(p) for p in plan), default=0)
    if not isinstance(plan, dict):
        return 0
    own = max((int(plan.get(k) or 0) for k in ("operator_cardinality", "intermediate_rows",
                                                "cardinality")), default=0)
    kids = [v for k, v in plan.items() if isinstance(v, (list, dict))]
    return max([own] + [_max_rows(k) for k in kids])


def test_views_stay_linear_with_reused_ids(tmp_path):
    """Every answer pairs with its own request although all share one id, and no operator of
    any view's plan makes more rows than a few per frame (a join on the id alone made n²)."""
    db = str(tmp_path / "reused.db")
    turns = 1500
    n = reused_id_sessions(db, turns)
    from wire_recorder.analysis.views import MATERIALIZED, view_sql

    with open_workspace([db]) as ws:
        # the views, and the SQL of those the workspace computed into tables when it opened
        bodies = {v: v for v in ("turns", "requests", "tool_calls", "errors", "anomalies", "steps")}
        bodies |= {v: "(" + view_sql(v, temp=True).split("\n", 1)[1] + ")" for v in MATERIALIZED}
        for view, body in bodies.items():
            plan = ws.con.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM {body}"
                                  ).fetchall()[0][1]
            assert _max_rows(json.loads(plan)) <= 4 * n, view
        turns_rows = _rows(ws.con, "SELECT protocol, count(*) AS n, count(*) FILTER (WHERE "
                                   "status = 'finished' AND responded_at > started_at) AS done "
                                   "FROM turns GROUP BY 1 ORDER BY 1")
        assert turns_rows == [{"protocol": "acp", "n": turns, "done": turns},
                              {"protocol": "wire", "n": turns, "done": turns}]
        reqs = _rows(ws.con, "SELECT protocol, count(*) AS n, count(DISTINCT answered_at) AS a, "
                             "count(*) FILTER (WHERE answered_at > requested_at) AS after "
                             "FROM requests GROUP BY 1 ORDER BY 1")
        assert reqs == [{"protocol": "acp", "n": turns, "a": turns, "after": turns},
                        {"protocol": "mcp", "n": turns, "a": turns, "after": turns},
                        {"protocol": "wire", "n": turns, "a": turns, "after": turns}]
        calls = _rows(ws.con, "SELECT count(*) AS n, count(*) FILTER (WHERE input_rounds = 1 "
                              "AND status = 'completed') AS one_round FROM tool_calls "
                              "WHERE protocol = 'mcp'")
        assert calls == [{"n": turns, "one_round": turns}]


def test_a_stderr_dump_is_one_error_and_urls_are_no_errors(tmp_path):
    dump = [b"1 validation error for Config", b"model", b"  Field required [type=missing]",
            b"    For further information visit https://errors.pydantic.dev/2.11/v/missing"]
    lines = [("stderr", b"fetching https://errors.example.dev/api/fail", 0)]
    lines += [("stderr", line, 1000 + i) for i, line in enumerate(dump)]
    lines += [("stderr", b"ERROR: boom", 5000), ("stderr", b"Error: again", 5050),
              ("stderr", b"see https://example.dev/error-codes", 9000)]
    db = str(tmp_path / "e.db")
    write_sessions(db, [("noisy", "wire", lines)])
    with open_workspace([db]) as ws:
        got = _rows(ws.con, "SELECT seq, message FROM errors WHERE source = 'stderr' ORDER BY seq")
    assert got == [{"seq": 2, "message": "\n".join(d.decode() for d in dump)},
                   {"seq": 6, "message": "ERROR: boom\nError: again"}]


def test_a_refused_replay_marks_no_history(tmp_path):
    """kimi refuses `replay` while a turn runs (-32000): the turn's frames around the refusal
    stay live; an answered replay's turn is history, numbered apart from the live ones."""
    def req(method, rid):
        return ("c2a", {"jsonrpc": "2.0", "method": method, "id": rid, "params": {}})

    usage = {"token_usage": {"input_other": 5, "output": 1, "input_cache_read": 0,
                             "input_cache_creation": 0}}
    frames = [("c2a", {"jsonrpc": "2.0", "method": "prompt", "id": "p1",
                       "params": {"user_input": "hi"}}),
              ("a2c", _ev("TurnBegin", {"user_input": "hi"})),
              req("replay", "r1"),
              ("a2c", {"jsonrpc": "2.0", "id": "r1", "error": {"code": -32000,
                                                             "message": "turn in progress"}}),
              ("a2c", _ev("StepBegin", {"n": 1})), ("a2c", _ev("StatusUpdate", usage)),
              ("a2c", _ev("TurnEnd", {})),
              ("a2c", {"jsonrpc": "2.0", "id": "p1", "result": {"status": "finished"}}),
              req("replay", "r2"),
              ("a2c", _ev("TurnBegin", {"user_input": "hi"})),
              ("a2c", _ev("StepBegin", {"n": 1})), ("a2c", _ev("StatusUpdate", usage)),
              ("a2c", _ev("TurnEnd", {})),
              ("a2c", {"jsonrpc": "2.0", "id": "r2", "result": {"status": "finished"}}),
              ("c2a", {"jsonrpc": "2.0", "method": "prompt", "id": "p2",
                       "params": {"user_input": "again"}}),
              ("a2c", _ev("TurnBegin", {"user_input": "again"})),
              ("a2c", _ev("StepBegin", {"n": 1})), ("a2c", _ev("StatusUpdate", usage)),
              ("a2c", _ev("TurnEnd", {})),
              ("a2c", {"jsonrpc": "2.0", "id": "p2", "result": {"status": "finished"}})]
    db = str(tmp_path / "r.db")
    write_sessions(db, [("replays", "wire", frames)])
    with open_workspace([db]) as ws:
        got = _rows(ws.con, "SELECT turn, history, steps, total_tokens, prompt_id, status_source "
                            "FROM turns ORDER BY seq")
        usage_rows = _rows(ws.con, "SELECT turn, history FROM token_usage ORDER BY seq")
    assert got == [
        {"turn": 1, "history": False, "steps": 1, "total_tokens": 6, "prompt_id": "p1",
         "status_source": "response"},
        {"turn": 1, "history": True, "steps": 1, "total_tokens": 6, "prompt_id": None,
         "status_source": "inferred"},
        {"turn": 2, "history": False, "steps": 1, "total_tokens": 6, "prompt_id": "p2",
         "status_source": "response"}]
    assert usage_rows == [{"turn": 1, "history": False}, {"turn": 1, "history": True},
                          {"turn": 2, "history": False}]


def test_a_session_of_no_known_protocol_shows_as_plain_json_rpc(tmp_path):
    """`wire-proxy -- cat` echoes the client's request: the agent's copy is a request too, shown
    as one (it was shown as a Wire frame, "None", before)."""
    from tests.harness.proxy import run_proxy

    db = str(tmp_path / "echo.db")
    res = run_proxy(["-q", "--db", db, "--", "cat"],
                    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1}}\n')
    assert res.returncode == 0
    p = run_cli("wire-show", db)
    assert p.returncode == 0, p.stderr
    assert "protocol unknown" in p.stdout and "None" not in p.stdout
    # the client's request, then the agent's copy (client_eof may come between them or after)
    assert re.search(r"s > ping \{\"n\":1\}\n(?:.*\n)? +\d+\.\d+s +ping\n", p.stdout), p.stdout
    assert "1 agent requests" in p.stdout
