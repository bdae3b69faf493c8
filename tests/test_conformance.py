"""Tests for the conformance check (wire-check) and the Wire model behind it
(recorder/protocols/wire/model.py) against what kimi-cli 1.51.0 really sends and accepts.

tests/data/wire_frames_real.jsonl was captured from `kimi --wire` (kimi-cli 1.51.0, offline
`_scripted_echo` provider, scratch HOME) over nine scripted sessions: approvals (approve, reject
with feedback, approve_for_session, cancel while pending), hooks (allow/block), external tools
(result and JSON-RPC error), questions, plan mode with PlanDisplay, steer, replay, subagent,
background-task Notification, StepRetry, /compact, and bad client input. One record per line:
`{"session", "dir": "c2a"|"a2c", "frame": <the exact line>, "note"?: "expect_unknown"}`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from wire_recorder.recorder.protocols.wire import model as wm
from wire_recorder.recorder.protocols.wire import names as wire_names

ROOT = Path(__file__).resolve().parents[1]
REAL_FRAMES = Path(__file__).parent / "data" / "wire_frames_real.jsonl"
KIMI_PYTHON = ROOT / ".peers" / "kimi" / "bin" / "python"


def _records() -> list[dict]:
    return [json.loads(line) for line in REAL_FRAMES.read_text(encoding="utf-8").splitlines()]


def _parsed_real_frames():
    """Yield (record, decoded frame, parsed message), typing each response by what it answers."""
    pending: dict[tuple[str, str, str], str] = {}
    for rec in _records():
        try:
            obj = json.loads(rec["frame"])
        except ValueError:
            yield rec, None, None
            continue
        reply_to = None
        if isinstance(obj.get("id"), str):
            if "method" in obj:
                name = obj["params"]["type"] if obj["method"] == "request" else obj["method"]
                pending[(rec["session"], rec["dir"], obj["id"])] = name
            elif "result" in obj:
                other = "c2a" if rec["dir"] == "a2c" else "a2c"
                reply_to = pending.get((rec["session"], other, obj["id"]))
        yield rec, obj, wm.parse_message(obj, reply_to=reply_to)


def _extra_fields(value, path="$"):
    if isinstance(value, BaseModel):
        for key in value.model_extra or {}:
            yield f"{path}.{key}"
        for name in type(value).model_fields:
            yield from _extra_fields(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _extra_fields(item, f"{path}[{i}]")


def _event(type_name, payload):
    return {"jsonrpc": "2.0", "method": "event", "params": {"type": type_name, "payload": payload}}


# --- names ------------------------------------------------------------------------------


def test_name_sets_equal_wire_names():
    assert wm.EVENT_TYPE_NAMES == wire_names.EVENT_TYPES
    assert wm.REQUEST_TYPE_NAMES == wire_names.REQUEST_TYPES
    assert wm.CLIENT_METHOD_NAMES == wire_names.CLIENT_METHODS


def test_every_name_has_its_models():
    assert len(wm.CANONICAL_EVENT_TYPE_NAMES) == 23
    for name in wm.EVENT_TYPE_NAMES:
        assert wm.event_payload_model(name) is not None, name
    for name in wm.REQUEST_TYPE_NAMES:
        assert wm.request_payload_model(name) is not None, name
        assert wm.answer_model(name) is not None, name
    for method in wm.CLIENT_METHOD_NAMES:
        assert wm.params_model(method) is not None, method
        assert wm.result_model(method) is not None, method
    assert wm.event_payload_model("NoSuchEvent") is None
    assert wm.answer_model("TurnBegin") is None


# --- real frames ------------------------------------------------------------------------


def test_real_frames_parse_as_known_types_and_reproduce_the_agent_bytes():
    problems = []
    for rec, obj, msg in _parsed_real_frames():
        expect_unknown = rec.get("note") == "expect_unknown"
        if obj is None:
            assert expect_unknown, rec
            continue
        if expect_unknown:
            if msg.known:
                problems.append(f"should be unknown: {rec['frame'][:120]}")
            continue
        if not msg.known:
            problems.append(f"unknown ({msg.reason}): {rec['frame'][:120]}")
            continue
        extras = list(_extra_fields(msg))
        if extras:
            problems.append(f"extra fields {extras}: {rec['frame'][:120]}")
        # kimi writes model_dump_json() of models with the same fields in the same order.
        if rec["dir"] == "a2c" and wm.dump_message(msg) != rec["frame"]:
            problems.append(f"re-serialised differently: {rec['frame'][:120]}")
    assert not problems, "\n".join(problems)


def test_real_frames_cover_the_protocol():
    seen_events, seen_requests, seen_methods, typed_answers = set(), set(), set(), set()
    for _, _, msg in _parsed_real_frames():
        if isinstance(msg, wm.EventFrame):
            seen_events.add(msg.params.type)
            if msg.params.type == "SubagentEvent":
                seen_events.add(msg.params.payload.event.type)
        elif isinstance(msg, wm.AgentRequestFrame):
            seen_requests.add(msg.params.type)
            assert msg.id == msg.params.payload.id
        elif isinstance(msg, wm.ClientRequest):
            seen_methods.add(msg.method)
        elif isinstance(msg, wm.SuccessResponse) and isinstance(msg.result, BaseModel):
            typed_answers.add(type(msg.result).__name__)
    # Not reachable over --wire offline: MCP needs servers, /btw is intercepted by the shell UI.
    unreachable = {"MCPLoadingBegin", "MCPLoadingEnd", "BtwBegin", "BtwEnd"}
    assert seen_events == wm.CANONICAL_EVENT_TYPE_NAMES - unreachable
    assert seen_requests == wm.REQUEST_TYPE_NAMES
    assert seen_methods == wm.CLIENT_METHOD_NAMES
    assert {"ApprovalResponse", "ToolResult", "QuestionResponse", "HookResponse"} <= typed_answers
    assert {"InitializeResult", "PromptResult", "SteerResult", "CancelResult", "ReplayResult",
            "SetPlanModeResult"} <= typed_answers


def test_real_content_parts_and_display_blocks_are_typed():
    parts: set[type] = set()
    blocks: set[type] = set()
    for _, _, msg in _parsed_real_frames():
        if isinstance(msg, wm.EventFrame):
            payload = msg.params.payload
            if msg.params.type == "ContentPart":
                parts.add(type(payload))
            elif msg.params.type == "ToolResult":
                blocks.update(type(b) for b in payload.return_value.display)
        elif isinstance(msg, wm.AgentRequestFrame) and msg.params.type == "ApprovalRequest":
            blocks.update(type(b) for b in msg.params.payload.display)
    assert parts == {wm.TextPart, wm.ThinkPart, wm.ImageURLPart, wm.AudioURLPart, wm.VideoURLPart}
    assert blocks == {wm.BriefDisplayBlock, wm.ShellDisplayBlock, wm.DiffDisplayBlock,
                      wm.TodoDisplayBlock, wm.BackgroundTaskDisplayBlock}


# --- frames the capture cannot produce (shapes from types.py and the protocol doc) --------


@pytest.mark.parametrize(
    "type_name, payload",
    [
        ("MCPLoadingBegin", {}),
        ("MCPLoadingEnd", {}),
        ("BtwBegin", {"id": "b1", "question": "why?"}),
        ("BtwEnd", {"id": "b1", "response": None, "error": "No response received."}),
        ("StatusUpdate", {"context_usage": None, "context_tokens": None,
                          "max_context_tokens": None, "token_usage": None, "message_id": None,
                          "plan_mode": None, "mcp_status": {
                              "loading": True, "connected": 1, "total": 2, "tools": 3,
                              "servers": [{"name": "fs", "status": "connected",
                                           "tools": ["read", "write"]}]}}),
        ("ToolResult", {"tool_call_id": "c", "return_value": {
            "is_error": False, "output": [{"type": "text", "text": "hi"}], "message": "",
            "display": [{"type": "custom_chart", "data": {"points": [1, 2]}}], "extras": None}}),
        ("StepRetry", {"n": 1, "next_attempt": 2, "max_attempts": 3, "wait_s": 0.5,
                       "error_type": "APIConnectionError", "status_code": None}),
    ],
)
def test_synthetic_events_parse_and_round_trip(type_name, payload):
    obj = _event(type_name, payload)
    msg = wm.parse_message(obj)
    assert msg.known, getattr(msg, "reason", None)
    assert msg.model_dump(mode="json", exclude_unset=True) == obj


def test_unknown_display_block_type_is_accepted_like_kosong_does():
    msg = wm.parse_message(_event("ToolResult", {"tool_call_id": "c", "return_value": {
        "is_error": False, "output": "", "message": "",
        "display": [{"type": "custom_chart", "data": {"points": [1]}}]}}))
    assert isinstance(msg.params.payload.return_value.display[0], wm.UnknownDisplayBlock)


def test_legacy_approval_request_resolved_is_an_approval_response():
    obj = _event("ApprovalRequestResolved", {"request_id": "r1", "response": "approve"})
    msg = wm.parse_message(obj)
    assert msg.known
    assert isinstance(msg.params.payload, wm.ApprovalResponse)
    assert msg.params.type == "ApprovalRequestResolved"
    assert msg.params.canonical_type == "ApprovalResponse"
    assert wm.event_payload_model("ApprovalRequestResolved") is wm.ApprovalResponse


def test_subagent_event_nests_a_typed_envelope_and_reads_the_legacy_field():
    obj = _event("SubagentEvent", {"task_tool_call_id": "call-9", "event": {
        "type": "ContentPart", "payload": {"type": "text", "text": "hi"}}})
    msg = wm.parse_message(obj)
    assert msg.known
    assert msg.params.payload.parent_tool_call_id == "call-9"
    assert msg.params.payload.event.payload == wm.TextPart(text="hi")


def test_fields_added_by_a_newer_agent_are_kept():
    obj = _event("StepBegin", {"n": 3, "started_at": 1.5})
    msg = wm.parse_message(obj)
    assert msg.known
    assert msg.params.payload.model_extra == {"started_at": 1.5}
    assert msg.model_dump(mode="json", exclude_unset=True) == obj


# --- what is not known comes back flagged, never raised -----------------------------------


@pytest.mark.parametrize(
    "obj, kind, reason_part",
    [
        (_event("BrandNewEvent", {"x": 1}), "notification", "unknown event type"),
        ({"jsonrpc": "2.0", "method": "request", "id": "r",
          "params": {"type": "PaymentRequest", "payload": {}}}, "request", "unknown request type"),
        ({"jsonrpc": "2.0", "method": "frobnicate", "id": "f"}, "request", "unknown method"),
        ({"jsonrpc": "2.0", "method": "cancel"}, "notification", "without id"),
        ({"jsonrpc": "2.0", "method": "prompt", "id": 1, "params": {"user_input": "x"}},
         "request", "invalid"),
        ({"jsonrpc": "1.0", "method": "prompt", "id": "p"}, "invalid", "not a JSON-RPC"),
        ([{"jsonrpc": "2.0", "method": "cancel", "id": "c"}], "invalid", "not a JSON-RPC"),
        (_event("ApprovalResponse", {"request_id": "r", "response": "maybe"}), "notification",
         "invalid ApprovalResponse"),
        (_event("ContentPart", {"type": "hologram", "hologram": {}}), "notification", "invalid"),
        (_event("SubagentEvent", {"event": {"type": "ApprovalRequest", "payload": {}}}),
         "notification", "unknown event type 'ApprovalRequest'"),
        ({"jsonrpc": "2.0", "method": ["event"]}, "notification", "not a string"),
    ],
)
def test_unknown_or_invalid_frames_are_flagged_with_the_raw_frame(obj, kind, reason_part):
    msg = wm.parse_message(obj)
    assert isinstance(msg, wm.UnknownFrame)
    assert msg.known is False
    assert msg.kind == kind
    assert reason_part in msg.reason
    assert msg.raw is obj


def test_result_that_does_not_fit_what_it_answers_is_flagged():
    obj = {"jsonrpc": "2.0", "id": "p-1", "result": {"status": "exploded"}}
    assert wm.parse_message(obj).known  # untyped: any result is a valid response
    flagged = wm.parse_message(obj, reply_to="prompt")
    assert not flagged.known and "answer to prompt" in flagged.reason
    assert not wm.parse_message(obj, reply_to="nonsense").known


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
names = st.sampled_from(
    sorted(wm.EVENT_TYPE_NAMES | wm.REQUEST_TYPE_NAMES | wm.CLIENT_METHOD_NAMES)
    + ["event", "request", "Nope"]
)
frames = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0")},
    optional={
        "method": names | json_values,
        "id": st.text(max_size=4) | json_values,
        "params": st.fixed_dictionaries({"type": names | json_values, "payload": json_values})
        | json_values,
        "result": json_values,
        "error": st.fixed_dictionaries({"code": st.integers(), "message": st.text()})
        | json_values,
    },
)


@settings(max_examples=300, deadline=None)
@given(obj=frames | json_values, reply_to=st.none() | names)
def test_parse_message_never_raises(obj, reply_to):
    msg = wm.parse_message(obj, reply_to=reply_to)
    assert msg.known is not isinstance(msg, wm.UnknownFrame)
    if not msg.known:
        assert msg.raw is obj


# --- answers and client requests round-trip -------------------------------------------------


ANSWERS: dict[str, list[dict[str, Any]]] = {
    "ApprovalRequest": [
        {"request_id": "a1", "response": "approve"},
        {"request_id": "a1", "response": "approve_for_session"},
        {"request_id": "a1", "response": "reject", "feedback": "use printf"},
    ],
    "ToolCallRequest": [
        {"tool_call_id": "ext-1", "return_value": {
            "is_error": False, "output": [{"type": "text", "text": "42"}], "message": "ok",
            "display": [{"type": "brief", "text": "done"}], "extras": {"ms": 3}}},
        {"tool_call_id": "ext-1", "return_value": {
            "is_error": True, "output": "", "message": "boom", "display": []}},
    ],
    "QuestionRequest": [
        {"request_id": "q1", "answers": {"Which color?": "Red"}},
        {"request_id": "q1", "answers": {"Which sizes?": "S, L"}},
    ],
    "HookRequest": [
        {"request_id": "h1", "action": "allow", "reason": ""},
        {"request_id": "h1", "action": "block", "reason": "no reading today"},
    ],
}


@pytest.mark.parametrize(
    "request_type, result",
    [(t, r) for t, results in ANSWERS.items() for r in results],
)
def test_answers_round_trip(request_type, result):
    model = wm.answer_model(request_type)
    answer = model.model_validate(result)
    frame = {"jsonrpc": "2.0", "id": "x", "result": answer.model_dump(mode="json",
                                                                     exclude_unset=True)}
    assert frame["result"] == result
    msg = wm.parse_message(json.loads(json.dumps(frame)), reply_to=request_type)
    assert msg.known and msg.result == answer


@pytest.mark.parametrize("request_type", sorted(ANSWERS))
def test_wrong_answers_are_flagged(request_type):
    msg = wm.parse_message({"jsonrpc": "2.0", "id": "x", "result": {"request_id": 5}},
                           reply_to=request_type)
    assert not msg.known


@pytest.mark.parametrize(
    "model, params",
    [
        (wm.InitializeRequest, {
            "protocol_version": "1.10", "client": {"name": "t", "version": "0"},
            "external_tools": [{"name": "lookup", "description": "d",
                                "parameters": {"type": "object"}}],
            "hooks": [{"id": "s1", "event": "PreToolUse", "matcher": "Shell", "timeout": 10}],
            "capabilities": {"supports_question": True, "supports_plan_mode": False}}),
        (wm.PromptRequest, {"user_input": [{"type": "text", "text": "hi"}, {
            "type": "image_url", "image_url": {"url": "data:image/png;base64,AA", "id": None}}]}),
        (wm.SteerRequest, {"user_input": "also this"}),
        (wm.CancelRequest, None),
        (wm.ReplayRequest, {}),
        (wm.SetPlanModeRequest, {"enabled": True}),
    ],
)
def test_client_requests_round_trip(model, params):
    request = model(id="c-1", params=params)
    obj = json.loads(wm.dump_message(request))
    assert obj["jsonrpc"] == "2.0" and obj["method"] == request.method
    msg = wm.parse_message(obj)
    assert type(msg) is model and msg == request


def test_models_built_in_code_keep_their_tags():
    frame = wm.EventFrame(params=wm.EventEnvelope(type="ContentPart", payload=wm.TextPart(text="é")))
    assert wm.dump_message(frame) == (
        '{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart",'
        '"payload":{"type":"text","text":"é"}}}'
    )
    call = wm.ToolCall(id="c1", function=wm.FunctionBody(name="Shell", arguments=None))
    assert json.loads(wm.dump_message(call))["type"] == "function"


def test_max_steps_result_keeps_steps():
    msg = wm.parse_message({"jsonrpc": "2.0", "id": "p", "result": {
        "status": "max_steps_reached", "steps": 100}}, reply_to="prompt")
    assert msg.result == wm.PromptResult(status="max_steps_reached", steps=100)


# --- cross-check against kimi-cli itself ----------------------------------------------------

# kimi class (importable dotted path) -> our model, for a field-by-field comparison.
KIMI_TWINS = {
    **{f"kimi_cli.wire.types.{n}": n for n in [
        "TurnBegin", "SteerInput", "TurnEnd", "StepBegin", "StepInterrupted", "StepRetry",
        "CompactionBegin", "CompactionEnd", "HookTriggered", "HookResolved", "MCPLoadingBegin",
        "MCPLoadingEnd", "MCPServerSnapshot", "MCPStatusSnapshot", "StatusUpdate", "TokenUsage",
        "Notification", "ToolCall", "ToolCallPart", "ToolResult", "ToolReturnValue",
        "ApprovalResponse", "SubagentEvent", "PlanDisplay", "BtwBegin", "BtwEnd",
        "ApprovalRequest", "ToolCallRequest", "QuestionOption", "QuestionItem",
        "QuestionResponse", "QuestionRequest", "HookRequest", "HookResponse", "TextPart",
        "ThinkPart", "ImageURLPart", "AudioURLPart", "VideoURLPart", "BriefDisplayBlock",
        "UnknownDisplayBlock", "DiffDisplayBlock", "TodoDisplayBlock", "TodoDisplayItem",
        "ShellDisplayBlock", "BackgroundTaskDisplayBlock"]},
    "kimi_cli.wire.types.ImageURLPart.ImageURL": "MediaURL",
    "kimi_cli.wire.types.ToolCall.FunctionBody": "FunctionBody",
    "kimi_cli.wire.jsonrpc.ClientInfo": "ClientInfo",
    "kimi_cli.wire.jsonrpc.ExternalTool": "ExternalTool",
    "kimi_cli.wire.jsonrpc.ClientCapabilities": "ClientCapabilities",
    "kimi_cli.wire.jsonrpc.WireHookSubscription": "HookSubscription",
    "kimi_cli.wire.jsonrpc.JSONRPCInitializeMessage.Params": "InitializeParams",
    "kimi_cli.wire.jsonrpc.JSONRPCPromptMessage.Params": "PromptParams",
    "kimi_cli.wire.jsonrpc.JSONRPCSteerMessage.Params": "SteerParams",
    "kimi_cli.wire.jsonrpc._SetPlanModeParams": "SetPlanModeParams",
    "kimi_cli.wire.jsonrpc.JSONRPCErrorObject": "ErrorObject",
}

_KIMI_SCRIPT = r"""
import importlib, json, sys
from kimi_cli.wire import jsonrpc, protocol, types

def resolve(path):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj

out = {
    "version": protocol.WIRE_PROTOCOL_VERSION,
    "events": sorted(c.__name__ for c in types._EVENT_TYPES),
    "requests": sorted(c.__name__ for c in types._REQUEST_TYPES),
    "aliases": {k: v.__name__ for k, v in types._NAME_TO_WIRE_MESSAGE_TYPE.items()
                if k != v.__name__},
    "in_methods": sorted(jsonrpc.JSONRPC_IN_METHODS),
    "out_methods": sorted(jsonrpc.JSONRPC_OUT_METHODS),
    "fields": {p: [[n, f.is_required()] for n, f in resolve(p).model_fields.items()]
               for p in json.loads(sys.argv[1])},
}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def kimi_introspection():
    if not KIMI_PYTHON.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"kimi-cli peer venv missing at {KIMI_PYTHON} (required in CI)")
        pytest.skip(f"kimi-cli peer venv missing at {KIMI_PYTHON}")
    proc = subprocess.run(
        [str(KIMI_PYTHON), "-c", _KIMI_SCRIPT, json.dumps(sorted(KIMI_TWINS))],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_names_match_kimi(kimi_introspection):
    k = kimi_introspection
    assert set(k["events"]) == wm.CANONICAL_EVENT_TYPE_NAMES
    assert set(k["requests"]) == wm.REQUEST_TYPE_NAMES
    assert k["aliases"] == wm.LEGACY_EVENT_NAMES
    assert set(k["in_methods"]) == wm.CLIENT_METHOD_NAMES
    assert set(k["out_methods"]) == wire_names.AGENT_METHODS
    assert k["version"] == wire_names.PROTOCOL_VERSION


def test_fields_match_kimi(kimi_introspection):
    # kosong folds a client's {type, **fields} into `data` before requiring it; we keep the shape.
    deliberate = {"kimi_cli.wire.types.UnknownDisplayBlock": [["type", False], ["data", True]]}
    for path, ours in KIMI_TWINS.items():
        model = getattr(wm, ours)
        mine = [[n, f.is_required()] for n, f in model.model_fields.items()]
        expected = kimi_introspection["fields"][path]
        if path in deliberate:
            assert expected == deliberate[path], f"kimi changed {path}"
            assert [n for n, _ in mine] == [n for n, _ in expected], path
            continue
        assert mine == expected, path


# --- import cost --------------------------------------------------------------------------


def test_importing_the_adapter_or_the_model_pulls_in_nothing_heavy():
    # the loader classifies with the adapter at 100k frames/s: pydantic only comes with a check
    code = (
        "import sys, wire_recorder.recorder.protocols; "
        "print(sorted(m for m in ('pydantic', 'duckdb', 'acp', 'mcp_types') if m in sys.modules)); "
        "import wire_recorder.recorder.protocols.wire.model; "
        "print(sorted(m for m in ('duckdb', 'typer', 'rich', 'hypothesis') "
        "if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]", "[]"]


# --- the conformance check (analysis/conformance.py, wire-check, wire-show) ------------------

SAMPLES = ROOT / "sample_sessions"
BIN = Path(sys.executable).parent


def _frames_of_real_capture():
    """The captured frames as recorded Frames, one session per capture session."""
    import datetime as dt

    from wire_recorder.recorder.classify import Classifier
    from wire_recorder.recorder.model import Frame

    sessions: dict[str, list] = {}
    for rec in _records():
        frames = sessions.setdefault(rec["session"], [])
        if not frames:
            frames.append(Classifier("wire"))
        raw = rec["frame"].encode()
        ex = frames[0](raw, rec["dir"])
        frames.append((rec, Frame(rec["session"], len(frames), dt.datetime(2026, 1, 1),
                                  len(frames), rec["dir"], raw, True, len(raw), ex.kind,
                                  ex.method, ex.rpc_id, ex.msg_type, ex.payload,
                                  ex.parse_error, ex.known, anomaly=ex.anomaly)))
    return {name: items[1:] for name, items in sessions.items()}


def test_real_wire_frames_conform_except_the_bad_client_input():
    from wire_recorder.analysis.conformance import check_frames

    found = []
    for name, items in _frames_of_real_capture().items():
        session = {"session_id": name, "protocol": "wire", "protocol_version": "1.10"}
        findings = check_frames(session, [f for _, f in items])
        notes = {f.seq: rec.get("note") for rec, f in items}
        found += [(v.severity, v.label, notes[v.seq]) for v in findings]
    # the four lines the capture sent on purpose, each judged as kimi judged it
    assert found == [("violation", "", "expect_unknown"),            # not JSON
                     ("violation", "prompt", "expect_unknown"),      # a numeric id
                     ("unknown", "frobnicate", "expect_unknown"),    # no such method
                     ("violation", "set_plan_mode", "expect_unknown")]  # enabled: "maybe"


SAMPLE_FILES = sorted(p.name for p in SAMPLES.glob("*.jsonl"))


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_every_sample_session_conforms(name):
    from wire_recorder.analysis.conformance import check, sessions_of
    from wire_recorder.recorder import protocols

    [(session, _)] = sessions_of(str(SAMPLES / name))
    # checked against a model, not waved through: every sample's protocol has one
    assert protocols.get(session["protocol"]).conformance(session["protocol_version"])
    assert check(str(SAMPLES / name)) == []


def test_the_samples_cover_the_three_protocols_and_both_mcp_eras():
    from wire_recorder.analysis.conformance import sessions_of

    seen = {(s["protocol"], s["protocol_version"]) for name in SAMPLE_FILES
            for s, _ in sessions_of(str(SAMPLES / name))}
    assert {("wire", "1.10"), ("acp", "1"), ("mcp", "2025-11-25"),
            ("mcp", "2026-07-28")} <= seen


def _broken(tmp_path, sample: str, pick, change, out: str | None = None) -> tuple[Path, int]:
    """A copy of a sample transcript with one frame changed; returns it and the frame's seq."""
    lines = (SAMPLES / sample).read_bytes().splitlines()
    seq = 0
    for i, line in enumerate(lines[1:], start=1):
        rec = json.loads(line)
        frame = rec.get("frame")
        if isinstance(frame, dict) and pick(rec["dir"], frame):
            change(frame)
            lines[i] = json.dumps(rec, separators=(",", ":"), ensure_ascii=False).encode()
            seq = i
            break
    assert seq, "no frame to break"
    path = tmp_path / (out or sample)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path, seq


def _wire_approval_without_action(tmp_path):
    return _broken(tmp_path, "approve_shell.jsonl",
                   lambda d, f: f.get("params", {}).get("type") == "ApprovalRequest",
                   lambda f: f["params"]["payload"].pop("action"))


def _acp_prompt_not_a_list(tmp_path):
    return _broken(tmp_path, "acp_tools.jsonl", lambda d, f: f.get("method") == "session/prompt",
                   lambda f: f["params"].__setitem__("prompt", "a string, not content blocks"))


def _mcp_call_without_name(tmp_path, sample="mcp_demo_2025.jsonl"):
    return _broken(tmp_path, sample, lambda d, f: f.get("method") == "tools/call",
                   lambda f: f["params"].pop("name"))


@pytest.mark.parametrize("make, label, says", [
    (_wire_approval_without_action, "ApprovalRequest", "action: Field required"),
    (_acp_prompt_not_a_list, "session/prompt", "prompt: Input should be a valid list"),
    (_mcp_call_without_name, "tools/call", "params.name: Field required (MCP 2025-11-25)"),
    (lambda t: _mcp_call_without_name(t, "mcp_demo_2026.jsonl"), "tools/call",
     "params.name: Field required (MCP 2026-07-28)"),
])
def test_a_broken_frame_is_reported_with_its_seq(tmp_path, make, label, says):
    from wire_recorder.analysis.conformance import check

    path, seq = make(tmp_path)
    [v] = check(str(path))
    assert (v.severity, v.seq, v.label) == ("violation", seq, label)
    assert says in v.message


def test_answers_are_checked_against_what_they_answer(tmp_path):
    from wire_recorder.analysis.conformance import check

    cases = [
        ("approve_shell.jsonl", lambda d, f: d == "c2a" and "response" in f.get("result", {}),
         lambda f: f["result"].__setitem__("response", "maybe"), "answer to ApprovalRequest"),
        ("acp_tools.jsonl", lambda d, f: "stopReason" in f.get("result", {}),
         lambda f: f["result"].__setitem__("stopReason", "bored"), "answer to session/prompt"),
        ("mcp_demo_2025.jsonl", lambda d, f: d == "c2a" and "model" in f.get("result", {}),
         lambda f: f["result"].pop("role"), "answer to sampling/createMessage"),
    ]
    for sample, pick, change, label in cases:
        path, seq = _broken(tmp_path, sample, pick, change)
        assert [(v.seq, v.label) for v in check(str(path))] == [(seq, label)], sample


def test_a_method_outside_the_negotiated_mcp_version_is_a_violation(tmp_path):
    from wire_recorder.analysis.conformance import check

    def to_ping(f):
        f["method"] = "ping"
        f["params"] = {"_meta": f["params"]["_meta"]}

    path, seq = _broken(tmp_path, "mcp_demo_2026.jsonl",
                        lambda d, f: f.get("method") == "tools/list", to_ping)
    [v] = check(str(path))
    assert (v.seq, v.message) == (seq, "ping is not part of MCP 2026-07-28 (request from the "
                                        "client)")


def test_unknown_types_are_listed_apart_and_do_not_fail(tmp_path):
    from wire_recorder.analysis.conformance import check, violations

    path, seq = _broken(tmp_path, "approve_shell.jsonl",
                        lambda d, f: f.get("params", {}).get("type") == "StepBegin",
                        lambda f: f["params"].__setitem__("type", "StepTeleported"))
    acp, acp_seq = _broken(tmp_path, "acp_tools.jsonl",
                           lambda d, f: f.get("method") == "session/update",
                           lambda f: f["params"]["update"].__setitem__("sessionUpdate",
                                                                       "hologram"))
    for p, s in ((path, seq), (acp, acp_seq)):
        found = check(str(p))
        assert [(v.severity, v.seq) for v in found] == [("unknown", s)]
        assert violations(found) == []
    res = subprocess.run([BIN / "wire-check", path], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert f"seq {seq} a2c notification StepTeleported [unknown]: not a Kimi Wire type" in res.stdout


def test_lines_that_are_not_json_rpc_and_stray_answers_are_violations(tmp_path):
    from wire_recorder.analysis.conformance import check

    lines = (SAMPLES / "approve_shell.jsonl").read_text().splitlines()
    at = len(lines) - 2
    lines[at:at] = ['{"dir":"c2a","text":"not json at all","t_ms":1.0}',
                    '{"dir":"c2a","frame":{"jsonrpc":"1.0","method":"cancel","id":"x"},"t_ms":1.0}',
                    '{"dir":"a2c","frame":{"jsonrpc":"2.0","id":"nobody","result":{}},"t_ms":1.0}']
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join(lines) + "\n")
    found = check(str(path))
    assert [(v.seq, v.kind, v.severity) for v in found] == [
        (at, "invalid", "violation"), (at + 1, "invalid", "violation"),
        (at + 2, "response", "violation")]
    assert found[0].message.startswith("not JSON")
    assert found[2].message == "answers no request the recording holds (id nobody)"


def test_wire_check_exit_codes_and_output(tmp_path):
    path, seq = _acp_prompt_not_a_list(tmp_path)
    bad = subprocess.run([BIN / "wire-check", path], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1, bad.stderr
    assert f"  seq {seq} c2a request session/prompt: prompt: Input should be a valid list" \
        in bad.stdout
    assert bad.stdout.splitlines()[-1] == "1 violation, 0 unknown in 1 session (39 frames)"
    js = subprocess.run([BIN / "wire-check", path, "--json"], capture_output=True, text=True,
                        timeout=60)
    assert js.returncode == 1
    report = json.loads(js.stdout)
    [v] = report["sessions"][0]["findings"]
    assert (report["violations"], v["seq"], v["method"], v["severity"]) == \
        (1, seq, "session/prompt", "violation")
    good = subprocess.run([BIN / "wire-check", SAMPLES / "acp_tools.jsonl"], capture_output=True,
                          text=True, timeout=60)
    assert good.returncode == 0, good.stderr
    missing = subprocess.run([BIN / "wire-check", tmp_path / "none.db"], capture_output=True,
                             text=True, timeout=60)
    assert missing.returncode == 2 and len(missing.stderr.splitlines()) == 1


def test_wire_check_reads_a_db_and_picks_a_session_by_name(tmp_path):
    wire, wire_seq = _wire_approval_without_action(tmp_path)
    db = tmp_path / "mixed.db"
    subprocess.run([BIN / "wire-import", wire, SAMPLES / "mcp_git.jsonl", "--db", db, "-q"],
                   check=True, timeout=120)
    res = subprocess.run([BIN / "wire-check", db], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1, res.stderr
    assert f"seq {wire_seq} a2c request ApprovalRequest: " in res.stdout
    assert res.stdout.splitlines()[-1].startswith("1 violation, 0 unknown in 2 sessions")
    one = subprocess.run([BIN / "wire-check", db, "--session", "mcp_git"], capture_output=True,
                         text=True, timeout=60)
    assert one.returncode == 0, one.stdout + one.stderr
    assert "in 1 session" in one.stdout


def test_wire_show_counts_the_violations(tmp_path):
    path, seq = _mcp_call_without_name(tmp_path)
    res = subprocess.run([BIN / "wire-show", path], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert f"conformance: 1 violation (first: seq {seq} c2a tools/call: params.name: Field " \
        "required (MCP 2025-11-25))" in res.stdout
    clean = subprocess.run([BIN / "wire-show", SAMPLES / "hook.jsonl"], capture_output=True,
                           text=True, timeout=60)
    assert "conformance: no violations" in clean.stdout


# The SDKs are installed in the test environment (the `test` extra); making a module
# unimportable through sys.modules is how a user without the `check` extra is played here.
_WITHOUT_SDKS = """
import sys
sys.modules["acp"] = None
sys.modules["mcp_types"] = None
from wire_recorder.analysis.check_cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("sample, says", [
    ("acp_tools.jsonl", "wire-check: checking ACP frames needs the ACP Python SDK "
                        "(agent-client-protocol) (pip install 'wire-recorder[check]')"),
    ("mcp_time.jsonl", "wire-check: checking MCP frames needs the MCP SDK's wire types "
                       "(mcp-types) (pip install 'wire-recorder[check]')"),
])
def test_without_the_check_extra_acp_and_mcp_say_what_to_install(sample, says):
    res = subprocess.run([sys.executable, "-c", _WITHOUT_SDKS, SAMPLES / sample],
                         capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stderr.splitlines()) == (2, [says])
    wire = subprocess.run([sys.executable, "-c", _WITHOUT_SDKS, SAMPLES / "hook.jsonl"],
                          capture_output=True, text=True, timeout=60)
    assert wire.returncode == 0, wire.stderr


_methods = st.sampled_from(sorted(
    wire_names.CLIENT_METHODS | {"event", "request", "session/prompt", "session/update",
                                 "session/request_permission", "fs/read_text_file", "tools/call",
                                 "sampling/createMessage", "server/discover", "tasks/get",
                                 "notifications/progress", "logout"}))
_params = st.dictionaries(
    st.sampled_from(["sessionId", "prompt", "update", "name", "arguments", "_meta", "type",
                     "payload", "protocolVersion"]), json_values, max_size=4) | json_values
_rpc = st.fixed_dictionaries({"jsonrpc": st.just("2.0")}, optional={
    "method": _methods, "id": st.integers(0, 3) | st.text(max_size=2) | json_values,
    "params": _params, "result": json_values, "error": json_values})


@settings(max_examples=300, deadline=None)
@given(protocol=st.sampled_from(["wire", "acp", "mcp", None]),
       version=st.sampled_from([None, "1", "1.10", "2025-11-25", "2026-07-28", "later"]),
       messages=st.lists(st.tuples(st.sampled_from(["c2a", "a2c"]), _rpc | json_values),
                         max_size=8))
def test_the_check_never_raises(protocol, version, messages):
    import datetime as dt

    from wire_recorder.analysis.conformance import check_frames
    from wire_recorder.recorder.classify import Classifier
    from wire_recorder.recorder.model import Frame

    classify, frames = Classifier(protocol), []
    for seq, (direction, obj) in enumerate(messages, start=1):
        try:
            raw = json.dumps(obj).encode()
        except ValueError:
            continue
        ex = classify(raw, direction)
        frames.append(Frame("s", seq, dt.datetime(2026, 1, 1), seq, direction, raw, True,
                            len(raw), ex.kind, ex.method, ex.rpc_id, ex.msg_type, ex.payload,
                            ex.parse_error, ex.known, anomaly=ex.anomaly))
    found = check_frames({"session_id": "s", "protocol": protocol,
                          "protocol_version": version}, frames)
    assert all(v.severity in ("violation", "unknown") and v.message for v in found)


def test_a_protocol_without_a_model_gets_the_json_rpc_checks_and_says_so(tmp_path):
    path = tmp_path / "lsp.jsonl"
    path.write_text("\n".join([
        '{"wire_transcript":1,"session":{"session_id":"lsp-1","protocol":"lsp"}}',
        '{"dir":"c2a","frame":{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}},'
        '"t_ms":1.0}',
        '{"dir":"a2c","frame":{"jsonrpc":"2.0","id":1,"result":{}},"t_ms":2.0}',
        '{"dir":"a2c","text":"Content-Length: 12","t_ms":3.0}']) + "\n")
    res = subprocess.run([BIN / "wire-check", path], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    assert lines[:2] + lines[3:] == [
        f"{path}: lsp-1, lsp, 3 frames (JSON-RPC only: no model of this protocol)",
        "  seq 1 c2a request initialize [unknown]: no adapter knows protocol lsp: kept as it is",
        "1 violation, 1 unknown in 1 session (3 frames)"]
    assert lines[2].startswith("  seq 3 a2c invalid: not JSON: ")
    show = subprocess.run([BIN / "wire-show", path], capture_output=True, text=True, timeout=60)
    assert "conformance (JSON-RPC only: no model of lsp): 1 violation, 1 unknown (first: seq 3" \
        in show.stdout
