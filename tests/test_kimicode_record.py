"""Kimi Code CLI 2.1.0 (`<node22> <main.mjs> acp`, issue 29) recorded through the real
wire-proxy with default redaction into a real DuckDB file, driven by the official ACP SDK client,
its model our streaming server on 127.0.0.1 (tests/harness/kimicode_session.py): one session,
many assertions. Then `wire-replay --serve` of that recording in front of the same client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from tests.harness.acp import check_acp_scenario, run_acp_scenario
from tests.harness.kimicode import KimiCodeRun, find_kimicode
from tests.harness.kimicode_session import BASH_COMMAND, NOTES, SCENARIO, TURNS, record_kimicode
from tests.harness.peers import need
from wire_recorder.recorder.store import open_store

BIN = Path(sys.executable).parent


def _cli(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600, check=False)


@pytest.fixture(scope="module")
def kc(acp_python, tmp_path_factory):
    """(client result, model server, db, session row, frames) of one recorded session."""
    need(find_kimicode, "Kimi Code")
    tmp = tmp_path_factory.mktemp("kimicode")
    db = tmp / "kc.db"
    result, model = record_kimicode(db, tmp)
    with open_store(str(db), read_only=True) as store:
        (session,) = store.sessions()
        frames = store.frames(session["session_id"])
    return result, model, db, session, frames


def _payloads(frames, method=None, kind=None, direction=None):
    return [json.loads(f.payload) for f in frames
            if (method is None or f.method == method) and (kind is None or f.kind == kind)
            and (direction is None or f.direction == direction) and f.payload]


def _query(db: Path, sql: str) -> list[dict]:
    p = _cli("wire-query", str(db), sql, "-f", "ndjson")
    assert p.returncode == 0, p.stderr
    return [json.loads(x) for x in p.stdout.splitlines() if x.strip()]


def test_the_session_ran_and_every_frame_was_recorded(kc):
    result, model, _, session, frames = kc
    assert check_acp_scenario(SCENARIO, result) == []
    assert result.summary["initialize"]["agentInfo"] == {"name": "Kimi Code CLI", "version": "2.1.0"}
    assert len(model.requests) == len(TURNS)  # every answer of the script was asked for
    assert session["protocol"] == "acp" and session["exit_code"] == 0
    assert session["lost_frames"] == 0
    assert session["frame_count"] == len(result.received_lines()) + len(result.sent_lines())
    c2a = Counter((f.kind, f.method) for f in frames if f.direction == "c2a")
    assert c2a[("request", "session/prompt")] == 2
    a2c = Counter(f.method for f in frames if f.direction == "a2c" and f.kind == "request")
    assert a2c == {"session/request_permission": 1, "terminal/create": 1,
                   "terminal/wait_for_exit": 1, "terminal/output": 1, "terminal/release": 1,
                   "fs/read_text_file": 4}  # notes.txt, then the three AGENTS.md probes
    assert result.files["out.txt"] == "hi\n"


def test_relayed_bytes_are_exact(kc):
    result, _, _, _, frames = kc
    assert b"".join(f.raw + b"\n" for f in frames if f.direction == "a2c") == result.raw_in
    assert b"".join(f.raw + b"\n" for f in frames if f.direction == "c2a") == result.raw_out


def test_default_redaction_keeps_the_terminal_command_and_plain_env(kc):
    """Redaction is on by default; terminal/create's env list (NO_COLOR, TERM, SHELL=/bin/bash,
    ...) holds nothing secret, so nothing in the frame changes: not the env values, and not
    `command: /bin/bash` (which a masked SHELL value used to drag along)."""
    _, _, _, session, frames = kc
    assert session["redaction"] and "env-headers" in session["redaction"]
    (create,) = _payloads(frames, "terminal/create", "request")
    assert create["command"] == "/bin/bash"
    assert create["args"][0] == "-c" and create["args"][1].endswith(BASH_COMMAND)
    assert {e["name"]: e["value"] for e in create["env"]}["SHELL"] == "/bin/bash"
    assert not [f for f in frames if f.payload and "REDACTED:" in f.payload]


def test_tool_calls_are_named_from_the_first_title_with_their_arguments(kc):
    _, _, db, _, _ = kc
    rows = _query(db, "SELECT tool_call_id, tool_name, arguments, status, approval, title "
                      "FROM tool_calls ORDER BY seq")
    assert [(r["tool_call_id"], r["tool_name"], json.loads(r["arguments"]), r["status"],
             r["approval"]) for r in rows] == [
        ("1:call_bash_1", "Bash", {"command": BASH_COMMAND}, "completed", "approve_once"),
        ("1:call_read_1", "Read", {"path": "notes.txt"}, "completed", None),
    ]
    assert rows[0]["title"] == f"Running: {BASH_COMMAND}"  # the later title, kept as title


def test_agents_md_probes_are_expected_misses_not_errors(kc):
    _, _, db, _, _ = kc
    reads = _query(db, "SELECT subject, outcome FROM requests WHERE type = 'fs/read_text_file' "
                       "ORDER BY seq")
    assert [r["outcome"] for r in reads] == ["answered"] + ["expected_miss"] * 3
    assert all(r["subject"].lower().endswith("agents.md") for r in reads[1:])
    assert _query(db, "SELECT source, message FROM errors") == []
    perm = _query(db, "SELECT tool_name, outcome FROM requests "
                      "WHERE type = 'session/request_permission'")
    assert perm == [{"tool_name": "Bash", "outcome": "approve_once"}]


def test_usage_update_after_the_result_gives_each_turn_its_context(kc):
    """usage_update comes after the prompt's result (the first after the next prompt went out):
    it belongs to the prompt answered before it. `used` is the last model call's tokens."""
    _, _, db, _, _ = kc
    rows = _query(db, "SELECT turn, context_tokens, max_context_tokens FROM token_usage "
                      "ORDER BY seq")
    assert [(r["turn"], r["context_tokens"], r["max_context_tokens"]) for r in rows] == [
        (1, 900 + 5, 100000), (2, 1200 + 8, 100000)]
    turns = _query(db, "SELECT turn, status, tool_calls, approvals FROM turns ORDER BY turn")
    assert [(t["turn"], t["status"], t["tool_calls"], t["approvals"]) for t in turns] == [
        (1, "finished", 0, 0), (2, "finished", 2, 1)]


def test_wire_stats_names_bash_and_read_and_shows_the_tokens(kc):
    _, _, db, _, _ = kc
    p = _cli("wire-stats", str(db), "-f", "json")
    assert p.returncode == 0, p.stderr
    stats = json.loads(p.stdout)
    tools = {(r["protocol"], r["tool"]) for r in stats["slowest tools"]}
    assert tools == {("acp", "Bash"), ("acp", "Read")}
    ctx = stats["context per turn (tokens used of the window)"]
    assert [(r["turn"], r["used"], r["size"]) for r in ctx] == [(1, 905, 100000), (2, 1208, 100000)]
    assert stats["overview"]["context_tokens"] == 1208 and stats["errors"] == []
    text = _cli("wire-stats", str(db)).stdout
    assert "context: 1,208 of 100,000 tokens" in text and "errors: none" in text


def test_wire_show_names_the_agent_and_its_version(kc):
    _, _, db, _, _ = kc
    p = _cli("wire-show", str(db))
    assert p.returncode == 0, p.stderr
    assert "initialize: Kimi Code CLI 2.1.0" in p.stdout
    assert "tool Bash" in p.stdout and "tool Read" in p.stdout
    assert "context: 1208 of 100000 tokens used" in p.stdout
    assert p.stdout.count("not found (expected") == 3 and "with an error" not in p.stdout


def test_ui_header_names_the_agent_and_its_version(kc):
    from wire_recorder.analysis.sources import open_workspace
    from wire_recorder.analysis.ui.data import agent_of, session_data

    _, _, db, session, _ = kc
    with open_workspace([str(db)]) as ws:
        data, _ = session_data(ws, session["session_id"])
    assert data["session"]["agent"] == "Kimi Code CLI 2.1.0"
    assert agent_of(session["command"]) == "@moonshot-ai/kimi-code"  # the index's column
    assert data["tokens"] == []  # context fill is no per-step token count to chart


def test_pinned_model_answers_come_back_from_the_recording(kc):
    """What replay's pinned model reads (the adapter's llm_calls): the four answers the server
    gave, tool calls under their model ids with their streamed arguments, and the model list
    from configOptions."""
    from wire_recorder.replay.agents.kimi import derive
    from wire_recorder.replay.recording import load

    _, _, db, _, _ = kc
    got = derive(load(str(db)))
    calls = got["calls"]
    assert [c["problem"] for c in calls] == [None] * 4
    tool_calls = [(p["id"], p["name"]) for c in calls for p in c["parts"] if p["type"] == "tool_call"]
    assert tool_calls == [("call_bash_1", "Bash"), ("call_read_1", "Read")]
    args = ["".join(p.get("arguments") or p.get("arguments_part") or "" for p in c["parts"]
                    if p["type"] in ("tool_call", "tool_call_part")) for c in calls]
    assert [json.loads(a) if a else None for a in args] == [
        None, {"command": BASH_COMMAND}, {"path": "notes.txt"}, None]
    assert got["model"]["models"] == [{"id": "m", "name": "stream-model-1"}]


def test_transcript_has_no_machine_path_of_the_agent(kc, tmp_path):
    """initialize's answer names main.mjs by its absolute path (terminal-auth): exported from
    outside the checkout, it becomes ${agent}, and reads back as a stand-in."""
    _, _, db, _, _ = kc
    out = tmp_path / "kc.jsonl"
    p = _cli("wire-export", str(db), "-o", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    _, main = find_kimicode()
    assert str(main) not in text and str(main.parent) not in text
    assert '"command":"${agent}/main.mjs"' in text


def test_serve_of_the_default_recording_is_green_in_front_of_the_client(kc, tmp_path):
    """`wire-replay kc.db --serve` stands in for Kimi Code: the unchanged ACP SDK client runs
    the same scenario against it (its terminal runs the recorded /bin/bash command) and the
    serve checks each of the client's answers against the recorded ones."""
    _, _, db, _, _ = kc
    report = tmp_path / "serve.json"
    run = KimiCodeRun.create(None, {"notes.txt": NOTES}, tmp_root=tmp_path)
    try:
        result = run_acp_scenario(SCENARIO, run=run,  # type: ignore[arg-type]
                                  agent=[str(BIN / "wire-replay"), str(db), "--serve",
                                         "--report", str(report)])
    finally:
        run.cleanup()
    r = orjson.loads(report.read_bytes())
    assert r["ok"], r["divergences"]
    assert result.exit_code == 0 and check_acp_scenario(SCENARIO, result) == []
    assert r["stats"]["answers_checked"] == 9
    create = [q for p in result.prompts for q in p["requests"] if q["method"] == "terminal/create"]
    assert create[0]["params"]["command"] == "/bin/bash"


SAMPLE = Path(__file__).resolve().parents[1] / "sample_sessions" / "kimicode_tools.jsonl"


def test_golden_sample_reads_as_the_live_recording(kc):
    """sample_sessions/kimicode_tools.jsonl (sample_sessions/record_kimicode.py) holds the same
    exchange as a fresh recording: the same methods and update kinds (usage_update races with
    the next prompt: counted, not ordered), and the same views; it names no machine path."""
    from wire_recorder.recorder.transcript import read_transcript

    _, _, db, _, frames = kc
    _, sample = read_transcript(str(SAMPLE))

    def shape(fs):
        return [(f.direction, f.kind, f.method, f.msg_type) for f in fs
                if f.direction in ("c2a", "a2c") and f.msg_type != "available_commands_update"]

    assert Counter(shape(sample)) == Counter(shape(frames))
    text = SAMPLE.read_text()
    assert "/tmp/" not in text and str(Path.home()) + "/" not in text
    q = "SELECT tool_name, arguments, status, approval FROM tool_calls ORDER BY seq"
    assert _query(SAMPLE, q) == _query(db, q)


@dataclass
class _Scratch:
    """What run_acp_scenario needs of a scratch folder when no agent runs (a serve)."""

    root: Path

    @property
    def workdir(self) -> Path:
        return self.root / "work"

    @property
    def home(self) -> Path:
        return self.root / "home"

    def argv(self, **_: object) -> list[str]:
        return []

    def agent_env(self) -> dict[str, str]:
        return {"HOME": str(self.root / "home"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    def env(self, base: object = None) -> dict[str, str]:
        return {**os.environ, **self.agent_env()}

    def cleanup(self) -> None:
        pass


def test_serve_of_the_golden_sample_is_green(acp_python, tmp_path):
    """The sample needs no Kimi Code to serve: the ACP SDK client against `wire-replay
    kimicode_tools.jsonl --serve`, in a work dir laid out as the recorded one."""
    report = tmp_path / "serve.json"
    run = _Scratch(tmp_path / "run")
    (run.root / "home").mkdir(parents=True)
    run.workdir.mkdir()
    (run.workdir / "notes.txt").write_text(NOTES)
    result = run_acp_scenario(SCENARIO, run=run,  # type: ignore[arg-type]
                              agent=[str(BIN / "wire-replay"), str(SAMPLE), "--serve",
                                     "--report", str(report)])
    r = orjson.loads(report.read_bytes())
    assert r["ok"], r["divergences"]
    assert check_acp_scenario(SCENARIO, result) == [] and result.files["out.txt"] == "hi\n"


def test_env_list_of_terminal_create_masks_only_what_looks_secret():
    """Kimi Code's terminal/create env list with a secret added the way a user's set-up would
    (a token by name, a token-shaped value): those two are masked; SHELL=/bin/bash and the
    others stay, and `/bin/bash` as the command is never touched."""
    from wire_recorder.recorder.redact import PLACEHOLDER_RE, Redactor

    r = Redactor.from_config("/", env={})  # the defaults, as wire-proxy has them
    env = [{"name": "NO_COLOR", "value": "1"}, {"name": "TERM", "value": "dumb"},
           {"name": "GIT_TERMINAL_PROMPT", "value": "0"}, {"name": "SHELL", "value": "/bin/bash"},
           {"name": "GITHUB_TOKEN", "value": "not-random-but-named"},
           {"name": "EXTRA", "value": "Zq8xW2vB7nM4kL9pR3tYa1"}]
    msg = {"jsonrpc": "2.0", "id": 1, "method": "terminal/create", "params": {
        "sessionId": "session_1", "command": "/bin/bash",
        "args": ["-c", f"cd '/w' && {BASH_COMMAND}"], "env": env, "cwd": "/w",
        "outputByteLimit": 4194304}}
    got = json.loads(r.redact_bytes(json.dumps(msg, separators=(",", ":")).encode()))
    values = {e["name"]: e["value"] for e in got["params"]["env"]}
    assert PLACEHOLDER_RE.fullmatch(values.pop("GITHUB_TOKEN").encode())
    assert PLACEHOLDER_RE.fullmatch(values.pop("EXTRA").encode())
    assert values == {"NO_COLOR": "1", "TERM": "dumb", "GIT_TERMINAL_PROMPT": "0", "SHELL": "/bin/bash"}
    assert got["params"]["command"] == "/bin/bash" and got["params"]["args"] == msg["params"]["args"]
