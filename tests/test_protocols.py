"""Protocol adapters and the per-session classifier: detection, types, anomalies, the registry
(an entry-point group), and that a fourth protocol is one package and one entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wire_recorder.recorder import protocols
from wire_recorder.recorder.classify import Classifier

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


@pytest.mark.parametrize("ask, answer, version", [
    # a Wire client offering 1.7: kimi-cli 1.51.0 answers with the 1.10 it speaks
    ({"method": "initialize", "params": {"protocol_version": "1.7"}},
     {"result": {"protocol_version": "1.10", "server": {"name": "Kimi Code CLI"}}}, "1.10"),
    ({"method": "initialize", "params": {"protocolVersion": 2}},
     {"result": {"protocolVersion": 1, "agentCapabilities": {}}}, "1"),
    ({"method": "initialize", "params": {"protocolVersion": "2025-11-25"}},
     {"result": {"protocolVersion": "2025-06-18", "capabilities": {}}}, "2025-06-18"),
    ({"method": "server/discover", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}},
     {"result": {"supportedVersions": ["2026-07-28"], "capabilities": {}}}, "2026-07-28"),
    # an error answer settles nothing: the offer stays
    ({"method": "initialize", "params": {"protocol_version": "1.7"}},
     {"error": {"code": -32600, "message": "no"}}, "1.7"),
])
def test_the_stored_version_is_the_agents_answer_not_the_clients_offer(ask, answer, version):
    c = Classifier()
    c(j({"jsonrpc": "2.0", "id": 0, **ask}), "c2a")
    c(j({"jsonrpc": "2.0", "id": 7, "result": {"protocol_version": "9", "protocolVersion": "9"}}), "a2c")
    c(j({"jsonrpc": "2.0", "id": 0, **answer}), "a2c")
    assert c.version == version


def test_mcp_fallback_and_back_stores_the_servers_answer():
    """server/discover refused, initialize offering 2025-11-25 answered with 2025-06-18 (an older
    server): the session speaks 2025-06-18, not the last offer."""
    c = Classifier()
    c(j({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}), "c2a")
    c(j({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Invalid"}}), "a2c")
    c(j({"jsonrpc": "2.0", "id": 2, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25"}}), "c2a")
    assert c.version == "2025-11-25"
    c(j({"jsonrpc": "2.0", "id": 2, "result": {"protocolVersion": "2025-06-18"}}), "a2c")
    c(j({"jsonrpc": "2.0", "method": "notifications/initialized"}), "c2a")
    c(j({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}), "c2a")
    assert (c.protocol, c.version) == ("mcp", "2025-06-18")


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


def test_in_tree_adapters_register_in_detection_order():
    packages = sorted(p.parent.name for p in (ROOT / "recorder" / "protocols").glob("*/__init__.py"))
    assert packages == ["acp", "mcp", "wire"]
    # in-tree first, in a fixed order (wire's tells are the most specific), then any others
    assert protocols.names()[:3] == list(protocols.IN_TREE) == ["wire", "acp", "mcp"]
    assert protocols.get("nonsense") is protocols.GENERIC
    # sessions stored before the protocol column are Wire sessions
    assert protocols.for_session(None) is protocols.get("wire")


def test_the_in_tree_adapters_need_no_distribution_metadata():
    """From a source tree without an install (or with unreadable metadata), the in-tree
    adapters are still there, in order; unreadable metadata is one warning, not a crash."""
    script = r'''
import importlib.metadata as md, json, sys
mode = sys.argv[1]
def entry_points(**kw):
    if mode == "raise":
        raise OSError("metadata unreadable")
    return []
md.entry_points = entry_points
from wire_recorder.recorder import protocols
print(json.dumps(protocols.names()))
'''
    for mode in ("none", "raise"):
        out = subprocess.run([sys.executable, "-c", script, mode], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == ["wire", "acp", "mcp"]
        assert ("entry points unreadable" in out.stderr) == (mode == "raise")


# A fourth protocol, shipped by a third party: one package and one entry point, nothing else.
LSP_ADAPTER = '''
from wire_recorder.recorder.protocols.base import Adapter


class Lsp(Adapter):
    name = "lsp"
    title = "Language Server Protocol"
    agent_role = "server"
    client_methods = frozenset({"initialize", "initialized", "textDocument/hover", "shutdown"})
    agent_methods = frozenset({"window/showMessageRequest", "window/logMessage"})
    agent_request_methods = frozenset({"window/showMessageRequest"})
    anchor_methods = frozenset({"initialize", "textDocument/hover"})
    matchers = {"lsp_message": (lambda r: r.get("message"), "showMessageRequest: its message")}
    default_match_on = ("method", "lsp_message")

    def detect(self, method, params, direction):
        if method == "initialize" and isinstance(params, dict) and "processId" in params:
            return ("lsp", None)
        return None

    def describe(self, kind, method, msg_type, payload):
        if method == "window/showMessageRequest":
            return f"server asks {payload.get('message')!r}"
        return None


ADAPTER = Lsp()
'''

LSP_SESSION = [
    {"dir": "c2a", "frame": {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": 1}}},
    {"dir": "a2c", "frame": {"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {}}}},
    {"dir": "c2a", "frame": {"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover",
                             "params": {"position": {"line": 1}}}},
    {"dir": "a2c", "frame": {"jsonrpc": "2.0", "id": 7, "method": "window/showMessageRequest",
                             "params": {"message": "Reload?"}}},
    {"dir": "c2a", "frame": {"jsonrpc": "2.0", "id": 7, "result": {"title": "yes"}}},
    {"dir": "a2c", "frame": {"jsonrpc": "2.0", "id": 2, "result": {"contents": "int x"}}},
    {"dir": "a2c", "frame": {"jsonrpc": "2.0", "method": "window/logMessage", "params": {"message": "done"}}},
]

# the server under test when the recording is replayed; MESSAGE is what it asks the client
LSP_SERVER = '''
import json, sys

def send(obj):
    sys.stdout.write(json.dumps(obj) + "\\n")
    sys.stdout.flush()

for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "initialize":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"capabilities": {}}})
    elif msg.get("method") == "textDocument/hover":
        hover = msg["id"]
        send({"jsonrpc": "2.0", "id": 7, "method": "window/showMessageRequest",
              "params": {"message": sys.argv[1]}})
    elif msg.get("id") == 7 and "result" in msg:
        send({"jsonrpc": "2.0", "id": hover, "result": {"contents": "int x"}})
        send({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"message": "done"}})
'''


def test_a_fourth_protocol_is_one_package_and_one_entry_point(tmp_path):
    """A third party's LSP adapter: one package beside a dist-info that declares it in the
    `wire_recorder.protocols` group (what `pip install` of its wheel leaves), and a broken entry
    point beside it. Without touching any file of this tree, the adapter is registered after the
    in-tree ones, detects and classifies its sessions, labels them for replay's reports, adds its
    matcher, and wire-show and wire-replay handle its recordings; the broken one is skipped with
    a warning."""
    site = tmp_path / "site"
    (site / "lsp_adapter").mkdir(parents=True)
    (site / "lsp_adapter" / "__init__.py").write_text(LSP_ADAPTER)
    dist = site / "lsp_adapter-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lsp-adapter\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[wire_recorder.protocols]\nlsp = lsp_adapter:ADAPTER\nbroken = no_such_module:ADAPTER\n")
    transcript = tmp_path / "lsp.jsonl"
    lines = [{"wire_transcript": 1, "session": {"session_id": "lsp-1", "command": ["lsp-server"]}}]
    lines += [dict(x, t_ms=float(i + 1)) for i, x in enumerate(LSP_SESSION)]
    transcript.write_text("".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines))
    server = tmp_path / "server.py"
    server.write_text(LSP_SERVER)
    env = dict(os.environ, PYTHONPATH=str(site), COLUMNS="200")
    bin_dir = Path(sys.executable).parent

    def run(*argv):
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)

    script = r'''
import json
from wire_recorder.recorder import protocols
from wire_recorder.replay.labels import describe
from wire_recorder.replay.matchers import MATCHERS
from wire_recorder.replay.recording import parse_msg
lsp = protocols.get("lsp")
ask = parse_msg(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "window/showMessageRequest",
                            "params": {"message": "Reload?"}}).encode(), "a2c", adapter=lsp)
print(json.dumps([protocols.names(), describe(ask), "lsp_message" in MATCHERS,
                  protocols.detect("initialize", {"processId": 1}, "c2a")]))
'''
    out = run(sys.executable, "-c", script)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [["wire", "acp", "mcp", "lsp"], "server asks 'Reload?'", True,
                                      ["lsp", None]]
    assert "protocol adapter 'broken'" in out.stderr and "skipped" in out.stderr

    q = run(str(bin_dir / "wire-query"), str(transcript), "-f", "json",
            "SELECT s.protocol, bool_and(f.known) AS known FROM frames f JOIN sessions s USING "
            "(session_id) WHERE f.direction IN ('c2a', 'a2c') GROUP BY ALL")
    assert q.returncode == 0, q.stderr
    assert json.loads(q.stdout) == [{"protocol": "lsp", "known": True}]

    show = run(str(bin_dir / "wire-show"), str(transcript))
    assert show.returncode == 0, show.stderr
    assert "protocol lsp" in show.stdout
    assert "window/showMessageRequest server asks 'Reload?'" in show.stdout
    assert "client answered window/showMessageRequest after 1 ms" in show.stdout
    assert "< textDocument/hover" in show.stdout

    same = run(str(bin_dir / "wire-replay"), str(transcript), "--", sys.executable, str(server), "Reload?")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "MATCHES" in same.stdout
    other = run(str(bin_dir / "wire-replay"), str(transcript), "--", sys.executable, str(server), "Quit?")
    assert other.returncode == 1, other.stdout + other.stderr
    assert "expected server asks 'Reload?', got server asks 'Quit?'" in other.stdout
    assert "differs in lsp_message" in other.stdout


def test_string_and_number_ids_are_different_ids():
    c = Classifier("mcp")
    assert c(j({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), "c2a").anomaly is None
    assert c(j({"jsonrpc": "2.0", "id": "1", "method": "tools/list"}), "c2a").anomaly is None
    c(j({"jsonrpc": "2.0", "id": "1", "result": {}}), "a2c")  # answers "1" only
    assert "reused" in c(j({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), "c2a").anomaly
