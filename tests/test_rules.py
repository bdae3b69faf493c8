"""The classification rule table (recorder/rules.py): its SQL compile (the loader's bulk path)
and its Python compile (classify, live replay) give the same answer, on every frame of every
sample session and on a generated set covering every frame kind; and the Python compile is what
each in-tree adapter's own methods say."""

from __future__ import annotations

import glob
import itertools
import os
import re

import duckdb
import orjson
import pytest

from wire_recorder.recorder import protocols
from wire_recorder.recorder.bulk import ODD_JSON, sql_classify
from wire_recorder.recorder.classify import classify
from wire_recorder.recorder.rules import RULES, compiled
from wire_recorder.recorder.transcript import read_transcript

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "sample_sessions", "*.jsonl")))
FIELDS = ("kind", "method", "rpc_id", "id_is_str", "msg_type", "known")


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    c.execute("SET threads = 1")
    yield c
    c.close()


def _both(con, protocol: str, frames: list[tuple[bytes, str]]) -> tuple[int, int]:
    """Asserts SQL == Python on every frame the SQL classifies; returns (classified in SQL,
    frames)."""
    got = sql_classify(con, protocol, frames)
    done = 0
    for (raw, direction), sql in zip(frames, got, strict=True):
        py = classify(raw, direction, protocol, detect=False)
        if sql is None:
            continue
        done += 1
        # the SQL path only takes frames Python finds well-formed
        assert py.kind != "invalid" and py.parse_error is None, raw
        for f in FIELDS:
            assert sql[f] == getattr(py, f), (f, raw, sql[f], getattr(py, f))
        want = None if py.payload is None else orjson.loads(py.payload)
        have = None if sql["payload"] is None else orjson.loads(sql["payload"])
        assert have == want, (raw, sql["payload"], py.payload)
    return done, len(frames)


@pytest.mark.parametrize("path", SAMPLES, ids=[os.path.basename(p) for p in SAMPLES])
def test_sql_and_python_agree_on_sample_sessions(con, path):
    session, frames = read_transcript(path)
    protocol = session.get("protocol") or "wire"
    pairs = [(f.raw, f.direction) for f in frames if f.direction in ("c2a", "a2c") and f.raw]
    done, total = _both(con, protocol, pairs)
    # nearly every frame of a real session is one the bulk path classifies itself (the rest:
    # text that looks like a number DuckDB reads otherwise, classified in Python)
    assert done >= 0.8 * total, (done, total)


def _generated() -> list[tuple[bytes, str]]:
    """Frames of every kind, shape and edge the classifier tells apart, both directions."""
    methods = sorted(set().union(*(r.client_methods | r.agent_methods for r in RULES.values())))
    types = sorted(set().union(*(r.known_types.get("event", frozenset())
                                 | r.known_types.get("request", frozenset())
                                 for r in RULES.values()))) + ["Unheard"]
    ids = [None, 0, 7, -3, 18446744073709551615, "7", "", "a\"b", "é\u2028"]
    params = [None, [], [1, 2], {}, {"a": 1}, "text", 3.5, {"type": 5}, {"payload": None},
              {"update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text",
                                                                               "text": "hi"}}},
              {"update": {"sessionUpdate": 3}}, {"update": []}]
    msgs: list[dict] = []
    for m in methods + ["unheard/method", "event", "request"]:
        for p in params:
            msgs.append({"jsonrpc": "2.0", "method": m, **({} if p is None else {"params": p})})
            msgs.append({"jsonrpc": "2.0", "id": 1, "method": m,
                         **({} if p is None else {"params": p})})
    for m in ("event", "request"):
        for t in types:
            msgs.append({"jsonrpc": "2.0", "method": m,
                         "params": {"type": t, "payload": {"x": [1, 2.5, "é", None, True]}}})
    for i in ids:
        msgs += [{"jsonrpc": "2.0", "id": i, "result": r} for r in
                 (None, 0, "s", [1], {"a": {"b": 1e-7}}, {"n": 12345678901234567}, False)]
        msgs += [{"jsonrpc": "2.0", "id": i, "error": e} for e in
                 (None, {"code": -32601, "message": "no"}, "x")]
        msgs.append({"jsonrpc": "2.0", "id": i, "method": "prompt", "params": {}})
    msgs += [
        {"jsonrpc": "2.0", "method": None, "id": 1, "result": 1},
        {"jsonrpc": "2.0", "method": None, "error": {}},
        {"jsonrpc": "2.0", "method": 5},
        {"jsonrpc": "2.0", "id": 1.5, "result": 1},
        {"jsonrpc": "2.0", "id": True, "result": 1},
        {"jsonrpc": "2.0", "id": [1], "result": 1},
        {"jsonrpc": "2.0", "id": 1, "result": 1, "error": 2},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "1.0", "id": 1, "result": 1},
        {"jsonrpc": 2.0, "id": 1, "result": 1},
        {"id": 1, "result": 1},
        {"jsonrpc": "2.0", "method": "prompt", "params": {"user_input": "a\u0000b\\n\t\"é😀"}},
    ]
    frames = [orjson.dumps(m) for m in msgs]
    frames += [b'[{"jsonrpc":"2.0","method":"x"}]', b"3", b'"s"', b"null", b"", b"  ", b"{",
               b"not json", b'{"jsonrpc":"2.0","method":"prompt"}\r',
               b' {"jsonrpc" : "2.0", "method" : "prompt" , "params" : { "a" : 1 } } ',
               b'{"jsonrpc":"2.0","method":"prompt","params":{"a":1.0,"b":1E3,"c":-0.0}}',
               b'{"jsonrpc":"2.0","method":"prompt","params":{"s":"\\u00e9\\/\\ud83d\\ude00"}}',
               b'{"jsonrpc":"2.0","method":"pr\\u006fmpt","params":{}}',
               b'{"jsonrpc":"2.0","method":"prompt","params":{"n":1e400}}',
               b'{"jsonrpc":"2.0","method":"prompt","params":{"n":NaN}}',
               b'{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart","payload":'
               b'{"type":"text","text":"x"}},"extra":[[[[1]]]]}',
               b"\xff\xfe", "é".encode("latin-1")]
    return [(f, d) for f, d in itertools.product(frames, ("c2a", "a2c"))]


@pytest.mark.parametrize("protocol", sorted(RULES))
def test_sql_and_python_agree_on_every_frame_kind(con, protocol):
    frames = _generated()
    done, total = _both(con, protocol, frames)
    # the SQL path classifies all but the frames Python calls invalid, those with numbers
    # DuckDB reads otherwise and those with an id neither text nor integer (asserted above:
    # those it does classify, it classifies alike)
    left = sum(classify(r, d, protocol, detect=False).kind == "invalid"
               or re.search(ODD_JSON.encode(), r) is not None or _odd_id(r) for r, d in frames)
    assert done == total - left, (done, total, left)


def _odd_id(raw: bytes) -> bool:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and isinstance(obj.get("id"), (bool, float, list, dict))


@pytest.mark.parametrize("name", ["wire", "acp", "mcp"])
def test_python_compile_is_the_adapters_own(name):
    adapter = protocols.get(name)
    rules = compiled(adapter)
    assert rules is not None
    r = RULES[name]
    methods = sorted(r.client_methods | r.agent_methods | {"unheard", "event", "request",
                                                            "session/update"})
    types = sorted(set().union(*r.known_types.values()) if r.known_types else set()) + ["X"]
    params_set = [None, [], {}, {"type": "StepBegin", "payload": {"n": 1}},
                  {"update": {"sessionUpdate": "tool_call"}}, {"update": {"sessionUpdate": 1}},
                  {"type": 3}] + [{"type": t, "payload": 1} for t in types]
    for m, p, d in itertools.product(methods, params_set, ("c2a", "a2c")):
        assert rules.msg_type(m, p) == adapter.msg_type(m, p), (m, p)
        assert rules.payload(m, p) == adapter.payload(m, p), (m, p)
        mt = adapter.msg_type(m, p)
        assert rules.known(d, m, mt) == adapter.known(d, m, mt), (d, m, mt)
