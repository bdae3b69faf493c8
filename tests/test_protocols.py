"""Protocol adapters and the per-session classifier: detection, types, anomalies, and that a
fourth protocol is one new file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wire_recorder.recorder import protocols
from wire_recorder.recorder.frames import Classifier

ROOT = Path(__file__).resolve().parents[1]


def j(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@pytest.mark.parametrize("first, protocol, version", [
    ({"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": {"protocol_version": "1.1"}}, "wire", "1.1"),
    ({"jsonrpc": "2.0", "id": "p", "method": "prompt", "params": {"user_input": "x"}}, "wire", None),
    ({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}, "acp", "1"),
    ({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/"}}, "acp", None),
    ({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}, "mcp", "2025-11-25"),
    ({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}, "mcp", "2026-07-28"),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, "mcp", None),
])
def test_protocol_is_detected_from_the_first_telling_frame(first, protocol, version):
    c = Classifier()
    c(b"garbage first", "c2a")  # not telling
    assert c.protocol is None
    ex = c(j(first), "c2a")
    assert (c.protocol, c.version) == (protocol, version)
    assert ex.known is True and ex.anomaly is None


def test_mcp_version_comes_from_initialize_after_a_discover_fallback():
    c = Classifier()
    c(j({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}), "c2a")
    c(j({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Invalid"}}), "a2c")
    c(j({"jsonrpc": "2.0", "id": 2, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25"}}), "c2a")
    assert (c.protocol, c.version) == ("mcp", "2025-11-25")


def test_types_and_payloads_per_protocol():
    acp = Classifier("acp")
    ex = acp(j({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": "t"}}}), "a2c")
    assert (ex.kind, ex.method, ex.msg_type, ex.known) == ("notification", "session/update", "tool_call", True)
    assert json.loads(ex.payload)["update"]["toolCallId"] == "t"
    wire = Classifier("wire")
    ex = wire(j({"jsonrpc": "2.0", "method": "event", "params": {
        "type": "StepBegin", "payload": {"n": 1}}}), "a2c")
    assert (ex.msg_type, json.loads(ex.payload), ex.known) == ("StepBegin", {"n": 1}, True)
    mcp = Classifier("mcp")
    ex = mcp(j({"jsonrpc": "2.0", "id": 3, "method": "sampling/createMessage", "params": {}}), "a2c")
    assert (ex.kind, ex.known, ex.msg_type) == ("request", True, None)
    ex = mcp(j({"jsonrpc": "2.0", "id": 3, "method": "made/up", "params": {}}), "a2c")
    assert ex.known is False and ex.anomaly is not None  # unknown, and id 3 is still pending


def test_ids_are_pending_per_direction():
    """ACP counts ids from 0 on both sides: the same id pending in both directions is normal."""
    c = Classifier("acp")
    assert c(j({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}), "c2a").anomaly is None
    assert c(j({"jsonrpc": "2.0", "id": 0, "method": "fs/read_text_file", "params": {}}), "a2c").anomaly is None
    c(j({"jsonrpc": "2.0", "id": 0, "result": {}}), "a2c")  # answers the client's 0
    again = c(j({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}), "c2a")
    assert again.anomaly is None  # the client's 0 was answered: reusing it is fine
    twice = c(j({"jsonrpc": "2.0", "id": 0, "method": "session/new", "params": {}}), "c2a")
    assert "request id 0 reused" in twice.anomaly and "c2a" in twice.anomaly


def test_foreign_and_batch_frames_are_flagged():
    c = Classifier("acp")
    ex = c(j({"jsonrpc": "2.0", "method": "event", "params": {"type": "TurnBegin", "payload": {}}}), "a2c")
    assert ex.anomaly == "event is a wire method, in a acp session" and ex.known is False
    ex = c(j({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}), "a2c")
    assert ex.anomaly == "notifications/message is a mcp method, in a acp session"
    ex = c(j([{"jsonrpc": "2.0", "id": 1, "method": "session/new"}]), "c2a")
    assert ex.kind == "invalid" and "batch" in ex.parse_error
    # initialize belongs to every protocol: never foreign
    assert c(j({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {
        "protocol_version": "1.1"}}), "c2a").anomaly is None


def test_every_adapter_file_registers():
    files = sorted(p.parent.name for p in (ROOT / "recorder" / "protocols").glob("*/__init__.py"))
    assert sorted(protocols.names()) == files == ["acp", "mcp", "wire"]
    assert protocols.get("nonsense") is protocols.GENERIC


LSP_ADAPTER = '''
from .base import Adapter

class Lsp(Adapter):
    name = "lsp"
    client_methods = frozenset({"textDocument/hover", "shutdown", "exit"})
    agent_methods = frozenset({"window/showMessageRequest", "window/logMessage"})
    agent_request_methods = frozenset({"window/showMessageRequest"})
    anchor_methods = frozenset({"textDocument/hover"})

    def detect(self, method, params, direction):
        if method == "initialize" and isinstance(params, dict) and "processId" in params:
            return ("lsp", None)
        return None

ADAPTER = Lsp()
'''


def test_a_fourth_protocol_is_one_new_file(tmp_path):
    """Copy the recorder, add recorder/protocols/lsp.py, and nothing else: detection,
    classification and replay's view of the recording pick it up."""
    pkg = tmp_path / "wire_recorder"
    shutil.copytree(ROOT / "recorder", pkg / "recorder", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "replay", pkg / "replay", ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "recorder" / "protocols" / "lsp.py").write_text(LSP_ADAPTER)
    script = r'''
import json
from wire_recorder.recorder.frames import Classifier
from wire_recorder.replay.recording import parse_msg, session_adapter
c = Classifier()
init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": 1}}).encode()
c(init, "c2a")
ex = c(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "window/showMessageRequest", "params": {}}).encode(), "a2c")
class F:
    direction, raw = "c2a", init
a = session_adapter({}, [F()])
print(json.dumps([c.protocol, ex.known, a.name, sorted(a.anchor_methods)]))
'''
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["lsp", True, "lsp", ["textDocument/hover"]]


def test_string_and_number_ids_are_different_ids():
    c = Classifier("mcp")
    assert c(j({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), "c2a").anomaly is None
    assert c(j({"jsonrpc": "2.0", "id": "1", "method": "tools/list"}), "c2a").anomaly is None
    c(j({"jsonrpc": "2.0", "id": "1", "result": {}}), "a2c")  # answers "1" only
    assert "reused" in c(j({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), "c2a").anomaly
