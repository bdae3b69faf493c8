"""Bad input on ACP and MCP sessions, through the real proxy with real peers: a JSON array (batch)
line, a frame of another protocol than the session's, and a request id reused while pending.
Each is relayed untouched, recorded, flagged and reported; nothing crashes downstream (show,
query, replay)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.harness.acp import AcpRun
from tests.harness.proxy import BIN, WIRE_PROXY, stream_of
from wire_recorder.recorder.store import open_store

ROOT = Path(__file__).resolve().parents[1]


def line(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


INIT = line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "bad-input-test", "version": "1"}}})
INITIALIZED = line({"jsonrpc": "2.0", "method": "notifications/initialized"})
BATCH = line([{"jsonrpc": "2.0", "id": 5, "method": "tools/list"}])
WIRE_PROMPT = line({"jsonrpc": "2.0", "id": "p-1", "method": "prompt",
                    "params": {"user_input": "hello"}})
CALL = line({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
    "name": "convert_time", "arguments": {"source_timezone": "UTC", "time": "12:00",
                                          "target_timezone": "Asia/Tokyo"}}})
LIST = line({"jsonrpc": "2.0", "id": 8, "method": "tools/list"})


@pytest.fixture(scope="module")
def mcp_bad(tmp_path_factory, mcp_peers):
    db = str(tmp_path_factory.mktemp("bad") / "bad.db")
    server = str(ROOT / ".peers" / "mcp2" / "bin" / "mcp-server-time")
    # id 7 twice in one write: the second is recorded while the first is unanswered
    client = INIT + INITIALIZED + BATCH + WIRE_PROMPT + CALL + CALL + LIST
    proc = subprocess.Popen([WIRE_PROXY, "--wait", "60", "--db", db, "--", server,
                             "--local-timezone", "UTC"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write(client)
    proc.stdin.flush()
    got = b""
    # initialize, prompt (an error), 7, 7, 8: keep stdin open until all are in (a server cancels
    # what is in flight when its input closes)
    for _ in range(5):
        got += proc.stdout.readline()
    proc.stdin.close()
    rest, err = proc.stdout.read(), proc.stderr.read()
    proc.wait(timeout=60)
    return db, client, subprocess.CompletedProcess(proc.args, proc.returncode, got + rest, err)


def test_mcp_bad_input_is_relayed_recorded_and_reported(mcp_bad):
    db, client, proc = mcp_bad
    assert proc.returncode == 0, proc.stderr
    # relayed untouched: the server got exactly the client's bytes, the client the server's
    assert stream_of(db, "c2a") == client
    assert stream_of(db, "a2c") == proc.stdout
    answers = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [a.get("id") for a in answers].count(7) == 2  # the server answered both id-7 calls
    assert 8 in [a.get("id") for a in answers]  # and went on after the bad lines
    with open_store(db, read_only=True) as store:
        (session,) = store.sessions()
        assert session["protocol"] == "mcp" and session["protocol_version"] == "2025-11-25"
        frames = [f for f in store.frames(session["session_id"]) if f.direction == "c2a"]
    by_raw = {}
    for f in frames:
        by_raw.setdefault(f.raw + b"\n", []).append(f)
    (batch,) = by_raw[BATCH]
    assert batch.kind == "invalid" and "batch" in batch.parse_error
    (prompt,) = by_raw[WIRE_PROMPT]
    assert prompt.kind == "request" and prompt.known is False
    assert prompt.anomaly == "prompt is a wire method, in a mcp session"
    first, second = by_raw[CALL]
    assert first.anomaly is None
    assert "request id 7 reused" in second.anomaly
    (lst,) = by_raw[LIST]
    assert lst.anomaly is None
    # reported on the proxy's stderr, in one line, with where to look
    report = [x for x in proc.stderr.decode().splitlines() if "against the protocol" in x]
    assert len(report) == 1 and "1 not JSON-RPC" in report[0] and "2 against the protocol" in report[0]
    assert "wire-show" in report[0]


def test_bad_mcp_recording_reads_and_replays_without_crashing(mcp_bad):
    db, _, _ = mcp_bad
    for cmd in (["wire-show", db], ["wire-stats", db],
                ["wire-query", db, "SELECT count(*) FROM frames WHERE anomaly IS NOT NULL"]):
        p = subprocess.run([str(BIN / cmd[0]), *cmd[1:]], capture_output=True, timeout=60)
        assert p.returncode == 0 and b"Traceback" not in p.stderr, (cmd, p.stderr)
    server = str(ROOT / ".peers" / "mcp2" / "bin" / "mcp-server-time")
    p = subprocess.run([str(BIN / "wire-replay"), "--json", db, "--", server, "--local-timezone", "UTC"],
                       capture_output=True, timeout=120)
    assert b"Traceback" not in p.stderr, p.stderr
    report = json.loads(p.stdout)
    # the same bad input, sent again byte for byte, gets the same answers
    assert p.returncode == 0 and report["ok"], report["divergences"]
    assert report["stats"]["sent"] == 7


def test_kimi_acp_crashing_on_a_batch_line_is_relayed_and_recorded(tmp_path, kimi_exe):
    """kimi acp exits 1 on a JSON array line; the proxy passes that on and keeps the frames."""
    db = str(tmp_path / "acp-batch.db")
    init = line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    batch = line([{"jsonrpc": "2.0", "id": 1, "method": "session/new",
                   "params": {"cwd": str(tmp_path), "mcpServers": []}}])
    with AcpRun.create([], kimi=kimi_exe) as run:
        proc = subprocess.Popen([WIRE_PROXY, "--wait", "60", "--db", db, "--", *run.argv()],
                                env=run.env(),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdin.write(init)
        proc.stdin.flush()
        first = proc.stdout.readline()  # the initialize answer, before the bad line
        proc.stdin.write(batch)
        proc.stdin.flush()
        proc.stdin.close()
        out, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(timeout=60)
    assert json.loads(first)["id"] == 0 and b'"agentInfo"' in first
    assert proc.returncode == 1, err  # kimi's own exit code, passed on
    assert stream_of(db, "c2a") == init + batch and stream_of(db, "a2c") == first + out
    with open_store(db, read_only=True) as store:
        (session,) = store.sessions()
        assert session["protocol"] == "acp" and session["exit_code"] == 1
        bad = [f for f in store.frames(session["session_id"]) if f.kind == "invalid"]
    assert len(bad) == 1 and bad[0].raw + b"\n" == batch and "batch" in bad[0].parse_error
    assert b"not JSON-RPC" in err
