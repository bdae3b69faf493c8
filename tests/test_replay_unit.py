"""wire-replay building blocks, without an agent: normalisation, matchers, the stream
comparison, the order repair of recordings."""

from __future__ import annotations

import json
import random
import uuid

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wire_recorder.replay.compare import canonical_order, diff_streams, make_items
from wire_recorder.replay.errors import ReplayInputError
from wire_recorder.replay.matchers import (
    DEFAULT_MATCH_ON,
    Request,
    RequestBook,
    fallback_answer,
    parse_match_on,
    rewrite_answer,
)
from wire_recorder.replay.normalize import IgnoreRule, Normalizer, environment_values
from wire_recorder.replay.recording import parse_msg, repair_order


def ev(type_, payload, t=0.0):
    return parse_msg(orjson.dumps({"jsonrpc": "2.0", "method": "event",
                                   "params": {"type": type_, "payload": payload}}), "a2c", t)


def req(type_, payload, rid=None, t=0.0):
    rid = rid or str(uuid.uuid4())
    payload = dict(payload, id=rid) if type_ != "ToolCallRequest" else dict(payload)
    return parse_msg(orjson.dumps({"jsonrpc": "2.0", "method": "request", "id": rid,
                                   "params": {"type": type_, "payload": payload}}), "a2c", t)


def resp(rid, result, direction="a2c", t=0.0):
    return parse_msg(orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result}), direction, t)


def creq(method, rid, params, t=0.0):
    return parse_msg(orjson.dumps({"jsonrpc": "2.0", "method": method, "id": rid,
                                   "params": params}), "c2a", t)


def approval(desc, rid=None):
    return req("ApprovalRequest", {"tool_call_id": "call-1", "sender": "Shell",
                                   "action": "run command", "description": desc,
                                   "source_id": uuid.uuid4().hex}, rid)


# -- normalisation ---------------------------------------------------------------------------

def test_volatile_fields_are_masked_and_stable_ones_kept():
    n = Normalizer()
    a, b = approval("Run command `ls`"), approval("Run command `ls`")
    assert a.raw != b.raw  # fresh ids and source ids
    assert n.value(a) == n.value(b)
    assert n.value(approval("Run command `pwd`")) != n.value(a)


def test_environment_paths_and_kimi_session_id_are_normalised():
    rec_cmd = ["kimi", "--config-file", "/tmp/run-a/config.toml", "--wire", "-w", "/tmp/run-a/work",
               "-S", "sess-a"]
    live_cmd = ["kimi", "--config-file", "/tmp/run-b/config.toml", "--wire", "-w", "/tmp/run-b/work",
                "-S", "sess-b"]
    ra = Normalizer(values=environment_values(rec_cmd, "/tmp/run-a/work"))
    rb = Normalizer(values=environment_values(live_cmd, "/tmp/run-b/work"))
    a = ev("ToolResult", {"output": "/tmp/run-a/work/x.txt in sess-a, home /tmp/run-a/home"})
    b = ev("ToolResult", {"output": "/tmp/run-b/work/x.txt in sess-b, home /tmp/run-b/home"})
    assert ra.value(a) == rb.value(b)
    c = ev("ToolResult", {"output": "/tmp/run-b/work/y.txt in sess-b, home /tmp/run-b/home"})
    assert ra.value(a) != rb.value(c)


def test_ignore_rules_with_selector_and_wildcards():
    r1 = IgnoreRule.parse("StatusUpdate:params.payload.context_usage")
    assert (r1.selector, r1.path) == ("StatusUpdate", ("params", "payload", "context_usage"))
    n = Normalizer(rules=[r1, IgnoreRule.parse("**.secret"), IgnoreRule.parse("ToolResult:params.*.x")])
    a = ev("StatusUpdate", {"context_usage": 0.1, "deep": [{"secret": 1}], "message_id": "m"})
    b = ev("StatusUpdate", {"context_usage": 0.2, "deep": [{"secret": 2}], "message_id": "m"})
    assert n.value(a) == n.value(b)
    c = ev("ContentPart", {"context_usage": 0.1})
    d = ev("ContentPart", {"context_usage": 0.2})
    assert n.value(c) != n.value(d)  # the selector limits the rule to StatusUpdate
    with pytest.raises(ReplayInputError):
        IgnoreRule.parse("Type:")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(["uuid", "hex", "time"]), min_size=1, max_size=6))
def test_generated_volatile_values_never_count(kinds):
    def volatile(k):
        return {"uuid": str(uuid.uuid4()), "hex": uuid.uuid4().hex,
                "time": f"2026-0{random.randint(1, 9)}-1{random.randint(0, 9)}T10:11:12.{random.randint(0, 999999)}Z"}[k]

    n = Normalizer()
    a = ev("Custom", {"v": [volatile(k) for k in kinds], "text": f"id {volatile(kinds[0])} done"})
    b = ev("Custom", {"v": [volatile(k) for k in kinds], "text": f"id {volatile(kinds[0])} done"})
    assert n.value(a) == n.value(b)


# -- matchers ----------------------------------------------------------------------------------

def book_of(*msgs, match_on=DEFAULT_MATCH_ON):
    n = Normalizer()
    return RequestBook(match_on).extend((m, Request(m.method, m.msg_type, n.payload(m))) for m in msgs)


def as_request(m):
    return Request(m.method, m.msg_type, Normalizer().payload(m))


def test_one_queue_per_key_used_in_recording_order():
    r1, r2 = approval("Run command `ls`"), approval("Run command `ls`")
    r3 = approval("Run command `pwd`")
    book = book_of(r1, r3, r2)
    live = [approval("Run command `ls`") for _ in range(3)]
    assert book.match(live[0], as_request(live[0])).msg is r1
    assert book.match(live[1], as_request(live[1])).msg is r2
    assert book.match(live[2], as_request(live[2])) is None  # used up
    assert [e.msg for e in book.unused()] == [r3]


def test_a_miss_names_the_nearest_request_and_the_failing_matcher():
    tool = req("ToolCallRequest", {"id": "call-w1", "name": "lookup_weather",
                                   "arguments": '{"city": "Paris"}'}, "call-w1")
    book = book_of(approval("Run command `ls`"), tool)
    live = req("ToolCallRequest", {"id": "call-w9", "name": "lookup_weather",
                                   "arguments": '{"city":  "Rome"}'}, "call-w9")
    assert book.match(live, as_request(live)) is None
    near = book.near_misses(as_request(live))
    assert near[0].entry.msg is tool and near[0].failed == ["tool_call"]
    assert "Rome" in near[0].detail and "Paris" in near[0].detail
    # arguments are compared as JSON: spacing and key order do not matter
    same = req("ToolCallRequest", {"id": "call-w9", "name": "lookup_weather",
                                   "arguments": '{ "city":"Paris" }'}, "call-w9")
    assert book.match(same, as_request(same)).msg is tool


def test_matchers_compose_and_unknown_names_are_rejected():
    assert parse_match_on("type") == ("type",)
    assert parse_match_on("+,tool_call_id")[-1] == "tool_call_id"
    with pytest.raises(ReplayInputError, match="unknown matcher"):
        parse_match_on("type,nope")
    # with only `type`, any approval matches any approval
    book = book_of(approval("Run command `ls`"), match_on=("type",))
    live = approval("Run command `rm -rf /`")
    assert book.match(live, as_request(live)) is not None


def test_unknown_request_types_match_on_their_payload():
    a = req("FutureRequest", {"thing": 1})
    book = book_of(a)
    other = req("FutureRequest", {"thing": 2})
    assert book.match(other, as_request(other)) is None
    same = req("FutureRequest", {"thing": 1})
    assert book.match(same, as_request(same)).msg is a


def test_recorded_answer_is_readdressed_to_the_live_request():
    rec = approval("Run command `ls`")
    ans = resp(rec.rpc_id, {"request_id": rec.rpc_id, "response": "approve"}, "c2a")
    live = approval("Run command `ls`")
    out = json.loads(rewrite_answer(ans, rec, live))
    assert out == {"jsonrpc": "2.0", "id": live.rpc_id,
                   "result": {"request_id": live.rpc_id, "response": "approve"}}
    rej = json.loads(fallback_answer(live, "reject"))
    assert rej["result"]["response"] == "reject" and rej["id"] == live.rpc_id
    assert "error" in json.loads(fallback_answer(live, "error"))


# -- comparison --------------------------------------------------------------------------------

def step(n, *frames):
    return [ev("StepBegin", {"n": n}), *frames]


def items(msgs, anchors=frozenset({b'"p-1"'})):
    return make_items(msgs, Normalizer(), set(anchors))


def turn_frames(order):
    su = ev("StatusUpdate", {"message_id": "msg-1"})
    tr = ev("ToolResult", {"tool_call_id": "call-1", "return_value": {"output": "hi"}})
    ar = ev("ApprovalResponse", {"request_id": str(uuid.uuid4()), "response": "approve"})
    racy = {"su": su, "tr": tr, "ar": ar}
    return [ev("TurnBegin", {"user_input": "x"}),
            *step(1, ev("ContentPart", {"type": "text", "text": "a"}),
                  ev("ToolCall", {"function": {"name": "Shell", "arguments": "{}"}}),
                  *[racy[k] for k in order]),
            *step(2, ev("ContentPart", {"type": "text", "text": "b"})),
            ev("TurnEnd", {}), resp("p-1", {"status": "finished"})]


def test_racy_order_between_anchors_is_accepted():
    a = items(turn_frames(["su", "ar", "tr"]))
    b = items(turn_frames(["tr", "su", "ar"]))
    assert diff_streams(a, b) == []


def test_streamed_content_order_counts():
    a = items([ev("TurnBegin", {}), *step(1, ev("ContentPart", {"type": "text", "text": "a"}),
                                          ev("ContentPart", {"type": "text", "text": "b"}))])
    b = items([ev("TurnBegin", {}), *step(1, ev("ContentPart", {"type": "text", "text": "b"}),
                                          ev("ContentPart", {"type": "text", "text": "a"}))])
    assert diff_streams(a, b)


def test_a_frame_moving_across_an_anchor_is_a_divergence():
    base = turn_frames(["su", "ar", "tr"])
    moved = list(base)
    i = next(i for i, m in enumerate(moved) if m.msg_type == "StatusUpdate")
    su = moved.pop(i)
    moved.insert(len(moved) - 2, su)  # into step 2
    assert diff_streams(items(base), items(moved))


def test_first_divergence_names_turn_step_and_both_frames():
    a = items([ev("TurnBegin", {}), ev("TurnBegin", {}),
               *step(1, ev("ToolCall", {"function": {"name": "Shell", "arguments": '{"command": "ls"}'}}))])
    b = items([ev("TurnBegin", {}), ev("TurnBegin", {}),
               *step(1, ev("ContentPart", {"type": "text", "text": "I won't"}))])
    d = diff_streams(a, b)
    assert d[0].where == "turn 2, step 1"
    assert 'expected ToolCall Shell{"command": "ls"}' in d[0].message
    assert 'got ContentPart text "I won\'t"' in d[0].message


def test_long_values_are_shown_around_their_first_difference_and_wrappers_by_their_event():
    big = "x" * 100_000
    a = items([ev("TurnBegin", {}), *step(1, ev("ContentPart", {"type": "text", "text": big + "A" + big}))])
    b = items([ev("TurnBegin", {}), *step(1, ev("ContentPart", {"type": "text", "text": big + "B" + big + "!"}))])
    d = diff_streams(a, b)[0]
    # the labels cut both texts alike: the headline says where they differ instead
    assert d.message.split(", got ")[0] != "expected " + d.message.split(", got ")[1]
    assert "[char 100000 of 200001/200002]" in d.message
    assert d.details[0].startswith("params.payload.text [char 100000 of 200001/200002]: …xx")
    assert "xxA" in d.details[0] and "xxB" in d.details[0]
    # frames differing in a field their label leaves out: never the same headline on both sides
    d = diff_streams(items([ev("ApprovalResponse", {"response": "reject", "scope": "turn"})]),
                     items([ev("ApprovalResponse", {"response": "reject", "scope": "session"})]))[0]
    assert d.message == ("expected ApprovalResponse reject, got one that differs in "
                         "params.payload.scope: turn → session")

    def sub(t, p):
        return ev("SubagentEvent", {"agent_id": "a1b2c3d4", "subagent_type": "coder",
                                    "event": {"type": t, "payload": p}})
    rec = [sub("StepBegin", {"n": 1}), sub("ContentPart", {"type": "text", "text": "hi"}),
           sub("ToolCall", {"function": {"name": "Glob", "arguments": '{"pattern": "*"}'}})]
    live = [sub("StepBegin", {"n": 1}), sub("ToolCall", {"function": {"name": "Glob", "arguments": '{"pattern": "*.md"}'}}),
            sub("ContentPart", {"type": "text", "text": "hello"})]
    ds = diff_streams(items([ev("TurnBegin", {}), *rec]), items([ev("TurnBegin", {}), *live]))
    msgs = sorted(x.message for x in ds if x.kind == "changed")
    # inner events named, and each paired with its own kind (not with what sits at its place)
    assert msgs == ['expected SubagentEvent > ContentPart text "hi", got SubagentEvent > '
                    'ContentPart text "hello"',
                    'expected SubagentEvent > ToolCall Glob{"pattern": "*"}, got SubagentEvent '
                    '> ToolCall Glob{"pattern": "*.md"}'], msgs


def test_unknown_and_invalid_frames_are_compared_not_dropped():
    a = items([parse_msg(b"garbage", "a2c"), ev("BrandNewEvent", {"x": 1})])
    assert diff_streams(a, items([parse_msg(b"garbage", "a2c"), ev("BrandNewEvent", {"x": 1})])) == []
    assert diff_streams(a, items([parse_msg(b"other", "a2c"), ev("BrandNewEvent", {"x": 1})]))
    assert diff_streams(a, items([parse_msg(b"garbage", "a2c"), ev("BrandNewEvent", {"x": 2})]))


@settings(max_examples=40, deadline=None)
@given(st.permutations(["su", "ar", "tr"]), st.permutations(["su", "ar", "tr"]))
def test_canonical_order_ignores_racy_permutations(p1, p2):
    a = [i.sig for i in canonical_order(items(turn_frames(p1)))]
    b = [i.sig for i in canonical_order(items(turn_frames(p2)))]
    # the ApprovalResponse ids differ (fresh uuids) but are masked
    assert a == b


# -- recording order repair --------------------------------------------------------------------

def test_client_reaction_recorded_before_its_cause_is_put_back():
    init = creq("initialize", "init-1", {}, 0.0)
    prompt = creq("prompt", "p-1", {"user_input": "x"}, 3.0000)
    init_resp = resp("init-1", {}, "a2c", 3.0004)  # stamped after the prompt it caused
    turn = ev("TurnBegin", {}, 3.0010)
    steer_resp = resp("s-1", {"status": "steered"}, "a2c", 3.5000)
    steer = creq("steer", "s-1", {"user_input": "y"}, 3.5001)  # its response came first
    out = repair_order([init, prompt, init_resp, turn, steer_resp, steer])
    assert [m.raw for m in out] == [m.raw for m in (init, init_resp, prompt, turn, steer, steer_resp)]


def test_order_repair_leaves_caused_frames_alone():
    cancel = creq("cancel", "c-1", {}, 1.0)
    frames = [creq("prompt", "p-1", {}, 0.0), cancel, resp("c-1", {}, "a2c", 1.0004),
              ev("TurnEnd", {}, 1.001), resp("p-1", {"status": "cancelled"}, "a2c", 1.0015)]
    assert [m.raw for m in repair_order(frames)] == [m.raw for m in frames]


def _acp(direction, obj, index):
    from wire_recorder.recorder import protocols

    m = parse_msg(orjson.dumps(obj), direction, adapter=protocols.get("acp"))
    m.index = index
    return m


def _acp_update(kind, index, **fields):
    return _acp("a2c", {"jsonrpc": "2.0", "method": "session/update",
                        "params": {"sessionId": "s", "update": {"sessionUpdate": kind, **fields}}},
                index)


def test_updates_after_a_cancel_may_be_cut_short_but_not_changed():
    """ACP: between session/cancel and the prompt's response the agent may stop anywhere; a
    final update present on one side only is tolerated, one present on both but different is
    still a divergence, and the same before the cancel is one too."""
    from wire_recorder.recorder import protocols
    from wire_recorder.replay.compare import cut_short

    acp = protocols.get("acp")
    prompt = _acp("c2a", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                          "params": {"sessionId": "s", "prompt": []}}, 0)
    started = _acp_update("tool_call", 1, toolCallId="t1", status="in_progress")
    cancel = _acp("c2a", {"jsonrpc": "2.0", "method": "session/cancel",
                          "params": {"sessionId": "s"}}, 2)
    failed = _acp_update("tool_call_update", 3, toolCallId="t1", status="failed")
    done = _acp("a2c", {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}}, 4)
    turns = {prompt.id_key}
    recorded = [prompt, started, cancel, failed, done]
    assert cut_short(recorded, acp, turns) == {3}

    def diff(rec_agent, live_agent, rec_opt, live_opt):
        tolerated = []
        divs = diff_streams(make_items(rec_agent, Normalizer(), turns, turn_ids=turns,
                                       optional=rec_opt),
                            make_items(live_agent, Normalizer(), turns, turn_ids=turns,
                                       optional=live_opt), tolerated)
        return [d.kind for d in divs], len(tolerated)

    live_done = _acp("a2c", {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}}, 2)
    # recorded with the final update, live without it (the cancel won the race): tolerated
    assert diff([started, failed, done], [started, live_done], {3}, set()) == ([], 1)
    # and the other way round
    live_failed = _acp_update("tool_call_update", 2, toolCallId="t1", status="failed")
    live_done.index = 3
    assert diff([started, done], [started, live_failed, live_done], set(), {2}) == ([], 1)
    # present on both sides but different: a divergence
    other = _acp_update("tool_call_update", 2, toolCallId="t1", status="completed")
    assert diff([started, failed, done], [started, other, live_done], {3}, {2}) == (["changed"], 0)
    # without the cancel nothing is optional
    assert diff([started, failed, done], [started, live_done], set(), set()) == (["missing"], 0)


# -- resumed sessions ----------------------------------------------------------------------------

def test_only_a_plain_resume_flag_reaches_the_live_command():
    from wire_recorder.replay.origins import resume_args, resume_flag
    from wire_recorder.replay.recording import Recording

    def rec(*args):
        return Recording("x.db", {"command": ["/opt/kimi/bin/kimi", "--wire", *args]}, [], None)

    live = ["kimi", "--wire", "--config-file", "c.toml"]
    assert resume_flag(rec("-r", "abc-1")) == ("-S", "abc-1")
    assert resume_flag(rec("--session=abc-1")) == ("-S", "abc-1")
    assert resume_flag(rec("-S", "$(touch x)")) is None  # not a plain id: never carried over
    # the origin kimi named itself gets the id its successor resumes; -C goes to a successor only
    assert resume_args([rec(), rec("-S", "abc-1")], live) == [["-S", "abc-1"], ["-S", "abc-1"]]
    assert resume_args([rec("-C")], live) == [[]]
    assert resume_args([rec(), rec("-C", "--yolo")], live) == [[], ["-C"]]
    # not for another program, nor when the live command names a session itself
    assert resume_args([rec("-S", "abc-1")], ["other-agent"]) == [[]]
    assert resume_args([rec("-S", "abc-1")], [*live, "-S", "mine"]) == [[]]
