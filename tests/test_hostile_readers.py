"""Readers treat recordings as untrusted input (issue 12, item 6).

Text from a recording is never interpreted on the way to the terminal or a report: rich markup
(`[/]`, `[link=...]`, `[red]`), terminal control sequences and HTML are shown as the text they
are. A corrupt input (a DB cut short, bytes flipped, foreign tables, a schema version that is not
a number, seven kinds of malformed transcript) is one line on stderr and exit 2 for every
reader, never a traceback.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pytest

BIN = Path(sys.executable).parent
SAMPLES = Path(__file__).resolve().parents[1] / "sample_sessions"

LINK = "[link=https://example.invalid]x[/link]"
EVIL = (f"[/] {LINK} [red]FAKE[/red] [bold :smile: "
        "\x1b]8;;https://example.invalid\x07ESC\x1b]8;;\x07 <script>alert(1)</script>")
OSC8 = "\x1b]8;"  # the start of a terminal hyperlink


def _rpc(**kw):
    return {"jsonrpc": "2.0", **kw}


def _header(protocol: str, version: str) -> dict:
    return {"wire_transcript": 2, "session": {
        "name": "n" + EVIL, "command": ["cmd" + EVIL, EVIL], "cwd": "/tmp/" + EVIL,
        "protocol": protocol, "protocol_version": version, "tags": {"k" + EVIL: EVIL}}}


def _event(type_: str, payload: dict) -> dict:
    return {"dir": "a2c", "frame": _rpc(method="event", params={"type": type_, "payload": payload})}


TRANSCRIPTS = {
    "wire": [
        _header("wire", "1.10[/]"),
        {"dir": "c2a", "frame": _rpc(id="i", method="initialize",
                                     params={"protocol_version": "1.10[/]" + EVIL})},
        {"dir": "a2c", "frame": _rpc(id="i", result={"protocol_version": "1.10[/]",
                                                     "server": {"name": EVIL, "version": EVIL}})},
        {"dir": "c2a", "frame": _rpc(id="p", method="prompt", params={"user_input": EVIL})},
        _event("TurnBegin", {"user_input": EVIL}),
        _event("StepBegin", {"n": EVIL}),
        _event("ContentPart", {"type": "text", "text": EVIL}),
        _event("ToolCall", {"type": "function", "id": EVIL,
                            "function": {"name": "tool" + EVIL, "arguments": EVIL}}),
        {"dir": "a2c", "frame": _rpc(method="request", id="r1", params={
            "type": "ApprovalRequest", "payload": {"id": "r1", "tool_call_id": EVIL, "sender": EVIL,
                                                   "action": EVIL, "description": EVIL,
                                                   "agent_id": EVIL}})},
        {"dir": "c2a", "frame": _rpc(id="r1", result={"request_id": "r1",
                                                      "response": "approve" + EVIL,
                                                      "feedback": EVIL})},
        _event("ToolResult", {"tool_call_id": EVIL,
                              "return_value": {"is_error": True, "output": EVIL, "message": EVIL}}),
        _event("StatusUpdate", {"token_usage": {"input_other": EVIL, "output": 3},
                                "context_usage": EVIL}),
        _event("StepRetry", {"wait_s": EVIL, "error_type": EVIL}),
        _event(EVIL, {}),
        {"dir": "c2a", "frame": _rpc(id="x", method="m" + EVIL, params={})},
        {"dir": "stderr", "text": "Error: " + EVIL},
        _event("TurnEnd", {}),
        {"dir": "a2c", "frame": _rpc(id="p", error={"code": EVIL, "message": EVIL})},
    ],
    "acp": [
        _header("acp", "1[/]"),
        {"dir": "c2a", "frame": _rpc(id=0, method="initialize", params={"protocolVersion": EVIL})},
        {"dir": "a2c", "frame": _rpc(id=0, result={"protocolVersion": EVIL,
                                                   "agentInfo": {"name": EVIL, "version": EVIL}})},
        {"dir": "c2a", "frame": _rpc(id=1, method="session/new", params={"cwd": EVIL,
                                                                          "mcpServers": []})},
        {"dir": "a2c", "frame": _rpc(id=1, result={"sessionId": EVIL})},
        {"dir": "c2a", "frame": _rpc(id=2, method="session/prompt", params={
            "sessionId": EVIL, "prompt": [{"type": "text", "text": EVIL}]})},
        {"dir": "a2c", "frame": _rpc(method="session/update", params={"sessionId": EVIL, "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": EVIL}}})},
        {"dir": "a2c", "frame": _rpc(method="session/update", params={"sessionId": EVIL, "update": {
            "sessionUpdate": "tool_call", "toolCallId": EVIL, "title": EVIL, "kind": "execute",
            "status": "pending", "rawInput": {"c": EVIL}}})},
        {"dir": "a2c", "frame": _rpc(id=7, method="session/request_permission", params={
            "sessionId": EVIL, "toolCall": {"toolCallId": EVIL, "title": EVIL},
            "options": [{"optionId": EVIL, "name": EVIL, "kind": "allow_once"}]})},
        {"dir": "c2a", "frame": _rpc(id=7, result={"outcome": {"outcome": "selected",
                                                               "optionId": EVIL}})},
        {"dir": "a2c", "frame": _rpc(method="session/update", params={"sessionId": EVIL, "update": {
            "sessionUpdate": "tool_call_update", "toolCallId": EVIL, "status": EVIL,
            "title": EVIL}})},
        {"dir": "a2c", "frame": _rpc(method="session/update", params={"sessionId": EVIL, "update": {
            "sessionUpdate": "plan", "entries": [{"status": EVIL, "content": EVIL}]}})},
        {"dir": "a2c", "frame": _rpc(method="x/" + EVIL, params={})},
        {"dir": "stderr", "text": "Traceback " + EVIL},
        {"dir": "a2c", "frame": _rpc(id=2, result={"stopReason": EVIL})},
    ],
    "mcp": [
        _header("mcp", "2025-06-18[/]"),
        {"dir": "c2a", "frame": _rpc(id=0, method="initialize", params={
            "protocolVersion": EVIL, "capabilities": {},
            "clientInfo": {"name": EVIL, "version": EVIL}})},
        {"dir": "a2c", "frame": _rpc(id=0, result={"protocolVersion": EVIL, "capabilities": {},
                                                   "serverInfo": {"name": EVIL, "version": EVIL}})},
        {"dir": "c2a", "frame": _rpc(method="notifications/initialized")},
        {"dir": "c2a", "frame": _rpc(id=1, method="tools/list", params={})},
        {"dir": "a2c", "frame": _rpc(id=1, result={"tools": [{"name": EVIL,
                                                              "inputSchema": {"type": "object"}}]})},
        {"dir": "c2a", "frame": _rpc(id=2, method="tools/call", params={"name": EVIL,
                                                                         "arguments": {"a": EVIL}})},
        {"dir": "a2c", "frame": _rpc(method="notifications/progress", params={
            "progressToken": 1, "progress": EVIL, "total": EVIL, "message": EVIL})},
        {"dir": "a2c", "frame": _rpc(method="notifications/message", params={"level": EVIL,
                                                                              "data": EVIL})},
        {"dir": "a2c", "frame": _rpc(id=2, result={"content": [{"type": "text", "text": EVIL}],
                                                   "isError": True})},
        {"dir": "stderr", "text": EVIL},
    ],
}

# a terminal as rich sees one: colours, and hyperlinks would be written
TERMINAL = {"FORCE_COLOR": "1", "COLUMNS": "160", "TERM": "xterm-256color"}


def _run(argv: list, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    import os

    full = {**os.environ, **(env or {})}
    full.pop("NO_COLOR", None)
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env=full, **kw)


@pytest.fixture(scope="module")
def hostile_dbs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("hostile")
    dbs = {}
    for proto, lines in TRANSCRIPTS.items():
        src = d / f"evil_{proto}.jsonl"
        src.write_text("".join(json.dumps(x) + "\n" for x in lines))
        db = d / f"evil_{proto}.db"
        res = _run([BIN / "wire-import", src, "--db", db, "-q"])
        assert res.returncode == 0, res.stderr
        dbs[proto] = db
    return dbs


def _assert_literal(out: str) -> None:
    assert OSC8 not in out  # no hyperlink reached the terminal
    assert "\x1b]" not in out and "\x07" not in out
    assert LINK in out  # the markup is shown as the text it is
    assert "[red]FAKE[/red]" in out


@pytest.mark.parametrize("proto", ["wire", "acp", "mcp"])
def test_markup_from_the_wire_is_text_in_wire_show(hostile_dbs, proto):
    res = _run([BIN / "wire-show", hostile_dbs[proto]], env=TERMINAL)
    assert res.returncode == 0, res.stderr
    assert "\x1b[" in res.stdout  # colours are on: the terminal is real to rich
    _assert_literal(res.stdout)
    assert "[/]" in res.stdout and "[bold :smile:" in res.stdout
    assert "␛]8;;https://example.invalid" in res.stdout  # the recorded ESC, made visible
    assert ("1.10[/]" if proto == "wire" else "[/]") in res.stdout.splitlines()[0]


@pytest.mark.parametrize("proto", ["wire", "acp", "mcp"])
def test_markup_from_the_wire_is_text_in_wire_stats_and_query(hostile_dbs, proto):
    res = _run([BIN / "wire-stats", hostile_dbs[proto]], env=TERMINAL)
    assert res.returncode == 0, res.stderr
    assert OSC8 not in res.stdout and "\x1b]" not in res.stdout
    res = _run([BIN / "wire-query", hostile_dbs[proto],
                "SELECT name, tags, protocol_version, command FROM sessions"], env=TERMINAL)
    assert res.returncode == 0, res.stderr
    assert OSC8 not in res.stdout and "\x1b]" not in res.stdout
    assert "[red]FA" in res.stdout  # cells fold; the tag is shown, not applied
    res = _run([BIN / "wire-query", hostile_dbs[proto], "--max-cell", "400",
                "SELECT method, msg_type, raw FROM frames WHERE method IS NOT NULL"], env=TERMINAL)
    assert res.returncode == 0, res.stderr
    assert OSC8 not in res.stdout and "\x1b]" not in res.stdout


def test_html_report_escapes_recorded_text(hostile_dbs, tmp_path):
    out = tmp_path / "r.html"
    res = _run([BIN / "wire-show", hostile_dbs["wire"], "--html", out])
    assert res.returncode == 0, res.stderr
    html = out.read_text()
    assert "<script>alert(1)</script>" not in html
    assert "alert(1)" in html  # shown, as text


# -- corrupt inputs ---------------------------------------------------------------------------
HEAD = json.dumps({"wire_transcript": 2, "session": {"name": "x", "protocol": "wire",
                                                     "command": ["x"]}})
BAD_TRANSCRIPTS = {
    "empty.jsonl": b"",
    "header_not_object.jsonl": b"[1, 2]\n",
    "header_without_session.jsonl": b'{"wire_transcript": 2}\n',
    "frame_is_array.jsonl": (HEAD + "\n[1, 2]\n").encode(),
    "frame_unknown_dir.jsonl": (HEAD + '\n{"dir": "sideways", "frame": {}}\n').encode(),
    "frame_text_wrong_type.jsonl": (HEAD + '\n{"dir": "c2a", "text": 5}\n').encode(),
    "binary_garbage.jsonl": bytes(range(256)) * 8,
    # issue 28: a header value of the wrong type
    "mono_start_not_a_number.jsonl": (HEAD[:-2] + ', "mono_start_ns": "x"}}\n'
                                      '{"dir": "c2a", "frame": {"jsonrpc": "2.0"}}\n').encode(),
}
BAD_DBS = ["cut_in_half.db", "foreign_tables.db", "schema_not_a_number.db", "bytes_flipped.db",
           "schema5_foreign_tables.db"]


@pytest.fixture(scope="module")
def corrupt(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("corrupt")
    ok = d / "ok.db"
    res = _run([BIN / "wire-import", SAMPLES / "approve_shell.jsonl", "--db", ok, "-q"])
    assert res.returncode == 0, res.stderr
    data = ok.read_bytes()
    files = {}
    for name, body in BAD_TRANSCRIPTS.items():
        (d / name).write_bytes(body)
        files[name] = d / name
    (d / "cut_in_half.db").write_bytes(data[: len(data) // 2])
    con = duckdb.connect(str(d / "foreign_tables.db"))
    con.execute("CREATE TABLE invoices (id INTEGER, total DOUBLE)")
    con.close()
    shutil.copy(ok, d / "schema_not_a_number.db")
    con = duckdb.connect(str(d / "schema_not_a_number.db"))
    con.execute("UPDATE meta SET value = 'abc' WHERE key = 'schema_version'")
    con.close()
    # our table names and a current schema version, another program's columns (issue 28)
    con = duckdb.connect(str(d / "schema5_foreign_tables.db"))
    con.execute("CREATE TABLE meta (key VARCHAR, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '5')")
    con.execute("CREATE TABLE frames (a INTEGER)")
    con.execute("CREATE TABLE sessions (b INTEGER)")
    con.execute("INSERT INTO frames VALUES (1)")
    con.execute("INSERT INTO sessions VALUES (1)")
    con.close()
    flipped = bytearray(data)
    # 64 bytes flipped in every block past the file's three header pages, whatever the block
    # size: the catalog's blocks among them, wherever DuckDB put them (a fixed offset missed
    # them once the file got smaller)
    for block in range(3 * 4096, len(flipped), 4096):
        for i in range(block + 16, min(block + 80, len(flipped))):
            flipped[i] ^= 0xFF
    (d / "bytes_flipped.db").write_bytes(bytes(flipped))
    for name in BAD_DBS:
        files[name] = d / name
    files["out"] = d
    return files


def _commands(path: Path, out: Path) -> list[tuple[str, list]]:
    return [("wire-show", [path]), ("wire-stats", [path]),
            ("wire-query", [path, "SELECT count(*) FROM frames"]),
            ("wire-export", [path, "-o", out / f"{path.name}.export.jsonl"]),
            ("wire-import", [path, "--db", out / f"{path.name}.imported.db", "-q"]),
            ("wire-check", [path]),
            ("wire-replay", [path, "--serve"])]


@pytest.mark.parametrize("name", [*BAD_TRANSCRIPTS, *BAD_DBS])
def test_corrupt_input_is_one_line_and_exit_2(corrupt, name):
    path = corrupt[name]
    jobs = _commands(path, corrupt["out"])
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda j: (j[0], _run([BIN / j[0], *j[1]])), jobs))
    for prog, res in results:
        where = f"{prog} {name}: rc={res.returncode} stderr={res.stderr!r}"
        assert "Traceback" not in res.stderr, where
        assert res.returncode == 2, where
        lines = res.stderr.splitlines()
        assert len(lines) == 1 and res.stderr.endswith("\n"), where
        assert lines[0].startswith(f"{prog}: "), where
        if name == "bytes_flipped.db" and prog != "wire-import":
            assert "in use" not in lines[0] and "damaged" in lines[0], where
