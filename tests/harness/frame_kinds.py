"""Frames of every kind, shape and edge the classifier tells apart (tests/test_rules.py,
tests/test_loader_bulk.py)."""

from __future__ import annotations

import itertools

import orjson

from wire_recorder.recorder.rules import RULES


def generated() -> list[tuple[bytes, str]]:
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
