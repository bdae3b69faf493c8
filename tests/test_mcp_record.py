"""Real MCP sessions over stdio (mcp 2.3 and 1.30 SDKs, mcp-server-time, mcp-server-git) through
the real wire-proxy into a real DuckDB file: the scenario checks pass, and the recorded frames show
what each protocol era implies (2026-07-28: server/discover, input_required + requestState, retries
with inputResponses; handshake era: initialize, server->client requests answered by the client;
fallback: discover answered with an error, then initialize)."""

from __future__ import annotations

import json

import pytest

from sample_sessions.mcp_scenarios import MCP_SCENARIOS
from tests.harness.mcp import check_mcp_scenario, run_mcp_scenario, wire_messages
from tests.harness.recording import proxy_prefix
from wire_recorder.recorder.store import open_store

MODERN, HANDSHAKE = "2026-07-28", "2025-11-25"
INPUT_METHODS = ["elicitation/create", "roots/list", "sampling/createMessage"]

# The exact frame sequence (direction, kind, method, id) of each scenario: both SDKs handle one
# request at a time here, so the order is fixed. Ids: mcp 2.x counts from 1, mcp 1.x from 0, on
# each side independently.
_C_REQ = lambda m, i: ("c2a", "request", m, str(i))  # noqa: E731
_A_REQ = lambda m, i: ("a2c", "request", m, str(i))  # noqa: E731
_C_RES = lambda i: ("c2a", "response", None, str(i))  # noqa: E731
_A_RES = lambda i: ("a2c", "response", None, str(i))  # noqa: E731
_PROGRESS = ("a2c", "notification", "notifications/progress", None)
_INITIALIZED = ("c2a", "notification", "notifications/initialized", None)


def _handshake_demo(first: int, server_first: int) -> list[tuple]:
    """initialize ... add (progress), ask_llm (sampling), client_roots (roots), confirm (elicitation)."""
    c, s = first, server_first
    seq = [_C_REQ("initialize", c), _A_RES(c), _INITIALIZED, _C_REQ("tools/list", c + 1), _A_RES(c + 1),
           _C_REQ("tools/call", c + 2), _PROGRESS, _A_RES(c + 2)]
    for k, method in enumerate(["sampling/createMessage", "roots/list", "elicitation/create"]):
        seq += [_C_REQ("tools/call", c + 3 + k), _A_REQ(method, s + k), _C_RES(s + k), _A_RES(c + 3 + k)]
    return seq


EXPECTED_SEQUENCE = {
    "mcp_demo_2026": [
        _C_REQ("server/discover", 1), _A_RES(1), _C_REQ("tools/list", 2), _A_RES(2),
        _C_REQ("tools/call", 3), _PROGRESS, _A_RES(3),
        *[x for i in (4, 6, 8) for x in (_C_REQ("tools/call", i), _A_RES(i),  # input_required
                                         _C_REQ("tools/call", i + 1), _A_RES(i + 1))],  # retry
    ],
    "mcp_demo_2025": _handshake_demo(0, 0),
    "mcp_demo_2025_v2": _handshake_demo(1, 1),
    "mcp_fallback": [_C_REQ("server/discover", 1), ("a2c", "error", None, "1"), *_handshake_demo(2, 0)],
    "mcp_time": [_C_REQ("server/discover", 1), _A_RES(1), _C_REQ("tools/list", 2), _A_RES(2),
                 _C_REQ("tools/call", 3), _A_RES(3), _C_REQ("tools/call", 4), _A_RES(4)],
}
EXPECTED_SEQUENCE["mcp_git"] = EXPECTED_SEQUENCE["mcp_time"]
# the client gives up on call 3 at its progress: a cancel and no answer to 3, then call 4
EXPECTED_SEQUENCE["mcp_cancel"] = [
    _C_REQ("server/discover", 1), _A_RES(1), _C_REQ("tools/list", 2), _A_RES(2),
    _C_REQ("tools/call", 3), _PROGRESS, ("c2a", "notification", "notifications/cancelled", None),
    _C_REQ("tools/call", 4), _PROGRESS, _A_RES(4)]

EXPECTED_VERSION = {"mcp_demo_2026": MODERN, "mcp_demo_2025": HANDSHAKE, "mcp_demo_2025_v2": HANDSHAKE,
                    "mcp_time": MODERN, "mcp_git": MODERN, "mcp_cancel": MODERN}


def expected_fields(msg) -> tuple:
    """(kind, method, rpc_id) derived independently of recorder.classify."""
    rid = msg.get("id")
    rid = None if rid is None else str(rid)
    if "method" in msg:
        return ("request" if "id" in msg else "notification", msg["method"], rid)
    return ("error" if "error" in msg else "response", None, rid)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, mcp_peers):
    """Every MCP scenario, recorded once through wire-proxy into one DB: name -> (result, session, frames)."""
    db = str(tmp_path_factory.mktemp("mcp") / "mcp.db")
    results = {name: run_mcp_scenario(sc, proxy_prefix(name, db)) for name, sc in MCP_SCENARIOS.items()}
    out = {}
    with open_store(db, read_only=True) as store:
        sessions = {s["name"]: s for s in store.sessions()}
        for name, result in results.items():
            session = sessions.get(name)
            out[name] = (result, session, store.frames(session["session_id"]) if session else [])
    return out


def _msgs(frames, direction=None):
    return [m for d, m in wire_messages(frames) if direction in (None, d)]


@pytest.mark.parametrize("name", list(MCP_SCENARIOS))
def test_session_recorded_and_checked(recorded, name):
    result, session, frames = recorded[name]
    assert session is not None, f"no session recorded; client stderr: {result.stderr[-800:]}"
    assert check_mcp_scenario(MCP_SCENARIOS[name], result, frames=frames) == []
    assert session["exit_code"] == 0 and session["end_reason"] == "agent_exit"
    wire = [f for f in frames if f.direction in ("c2a", "a2c")]
    assert session["frame_count"] == len(wire)
    for f in wire:  # one compact JSON-RPC message per line, fields extracted as the bytes say
        assert f.newline and b"\n" not in f.raw and not f.raw.endswith(b"\r")
        msg = json.loads(f.raw)
        assert isinstance(msg, dict) and msg["jsonrpc"] == "2.0"
        assert (f.kind, f.method, f.rpc_id) == expected_fields(msg)
        assert f.parse_error is None
        assert f.known is True and f.anomaly is None  # the MCP adapter knows every method seen here
    got = [(f.direction, f.kind, f.method, f.rpc_id) for f in wire]
    assert got == EXPECTED_SEQUENCE[name]


@pytest.mark.parametrize("name", list(MCP_SCENARIOS))
def test_stderr_relayed_and_recorded(recorded, name):
    """The server's stderr reaches the client (the SDK passes its own stderr) byte for byte and is
    recorded as stderr frames; our demo server and client are silent, mcp 1.30 answers
    server/discover with a pydantic dump, mcp-server-time logs the failed tool call."""
    result, _, frames = recorded[name]
    stderr = b"".join(f.raw + (b"\n" if f.newline else b"") for f in frames if f.direction == "stderr")
    assert stderr == result.stderr_bytes
    if name == "mcp_fallback":
        assert b"validation errors for ClientRequest" in stderr and b"server/discover" in stderr
    elif name == "mcp_time":
        assert stderr.startswith(b"Tool 'convert_time' failed:") and stderr.count(b"\n") == 1
    else:
        assert stderr == b""


@pytest.mark.parametrize("name", list(MCP_SCENARIOS))
def test_protocol_column(recorded, name):
    _, session, _ = recorded[name]
    assert session["protocol"] == "mcp"
    if name == "mcp_fallback":
        # The first frame (server/discover) offers 2026-07-28, the session then negotiates
        # 2025-11-25 through initialize: the server's answer is what is stored.
        assert session["protocol_version"] == HANDSHAKE
    else:
        assert session["protocol_version"] == EXPECTED_VERSION[name]


def test_2026_input_required_round_trips(recorded):
    """Each of ask_llm, client_roots, confirm: input_required with one input request and a
    requestState, then the same tools/call with a new id, that requestState and the client's
    fixed answer in inputResponses, answered with a complete result."""
    result, _, frames = recorded["mcp_demo_2026"]
    c2a, a2c = _msgs(frames, "c2a"), _msgs(frames, "a2c")
    assert all(m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN
               for m in c2a if "method" in m)
    assert not [m for m in a2c if "method" in m and "id" in m]  # no server->client requests
    results = {m["id"]: m["result"] for m in a2c if "result" in m}
    assert all(r["resultType"] == "complete" or r["resultType"] == "input_required" for r in results.values())
    calls = [m for m in c2a if m.get("method") == "tools/call"]
    asked = []
    answers = {
        "sampling/createMessage": {"role": "assistant", "content": {"type": "text", "text": "42"},
                                   "model": "test-model", "stopReason": "endTurn"},
        "roots/list": {"roots": [{"uri": result.context["work_uri"], "name": "demo-root"}]},
        "elicitation/create": {"action": "accept", "content": {"confirm": True, "note": "ok"}},
    }
    for call, retry in zip(calls, calls[1:], strict=False):
        r = results[call["id"]]
        if r["resultType"] != "input_required":
            continue
        ((key, request),) = r["inputRequests"].items()
        asked.append(request["method"])
        assert key.startswith("__main__:")  # the resolver's module:qualname
        assert r["requestState"].startswith("v1.")
        p = retry["params"]
        assert retry["id"] == call["id"] + 1
        assert p["name"] == call["params"]["name"] and p["arguments"] == call["params"]["arguments"]
        assert p["requestState"] == r["requestState"]
        assert p["inputResponses"] == {key: answers[request["method"]]}
        assert results[retry["id"]]["resultType"] == "complete"
    assert sorted(asked) == INPUT_METHODS
    sampling = next(m for m in a2c if "result" in m and "inputRequests" in m["result"]
                    and "sampling" in json.dumps(m["result"]["inputRequests"]))
    (req,) = sampling["result"]["inputRequests"].values()
    assert req["params"]["messages"][0]["content"]["text"] == "What is 6 x 7?"


@pytest.mark.parametrize("name", ["mcp_demo_2025", "mcp_demo_2025_v2", "mcp_fallback"])
def test_handshake_server_requests_answered(recorded, name):
    """initialize (+ notifications/initialized), then the server's own requests mid-call, each
    answered by the client with the same id and its fixed result; nothing of the 2026 era."""
    result, _, frames = recorded[name]
    c2a, a2c = _msgs(frames, "c2a"), _msgs(frames, "a2c")
    init = next(m for m in c2a if m.get("method") == "initialize")
    assert init["params"]["protocolVersion"] == HANDSHAKE
    assert init["params"]["capabilities"].keys() >= {"sampling", "roots", "elicitation"}
    server_requests = [m for m in a2c if "method" in m and "id" in m]
    assert sorted(m["method"] for m in server_requests) == INPUT_METHODS
    replies = {m["id"]: m for m in c2a if "method" not in m}
    for req in server_requests:
        reply = replies[req["id"]]["result"]
        if req["method"] == "roots/list":
            assert "params" not in req
            assert reply == {"roots": [{"uri": result.context["work_uri"], "name": "demo-root"}]}
        elif req["method"] == "sampling/createMessage":
            assert req["params"]["maxTokens"] == 16
            assert reply["content"] == {"type": "text", "text": "42"} and reply["model"] == "test-model"
        else:
            assert req["params"]["mode"] == "form" and req["params"]["requestedSchema"]["type"] == "object"
            assert reply == {"action": "accept", "content": {"confirm": True, "note": "ok"}}
    assert not any("inputResponses" in (m.get("params") or {}) for m in c2a)
    assert not any("resultType" in (m.get("result") or {}) for m in a2c)
    progress = [m for m in a2c if m.get("method") == "notifications/progress"]
    add = next(m for m in c2a if m.get("method") == "tools/call")
    assert [m["params"]["progressToken"] for m in progress] == [add["params"]["_meta"]["progressToken"]]


def test_fallback_discover_error_then_initialize(recorded):
    _, _, frames = recorded["mcp_fallback"]
    msgs = wire_messages(frames)
    (d1, discover), (d2, error), (d3, init) = msgs[:3]
    assert (d1, discover["method"], discover["id"]) == ("c2a", "server/discover", 1)
    assert (d2, error["id"], error["error"]["code"]) == ("a2c", 1, -32602)
    assert (d3, init["method"], init["id"]) == ("c2a", "initialize", 2)
    assert [m for d, m in msgs if m.get("method") == "server/discover"] == [discover]


def test_protocol_option_overrides_detection(mcp_peers, tmp_path):
    db = str(tmp_path / "forced.db")
    sc = MCP_SCENARIOS["mcp_git"]
    result = run_mcp_scenario(sc, proxy_prefix(sc.name, db, protocol="mcp"))
    assert check_mcp_scenario(sc, result) == []
    with open_store(db, read_only=True) as store:
        (session,) = store.sessions()
    assert session["protocol"] == "mcp"
