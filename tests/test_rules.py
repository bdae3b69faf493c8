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

from tests.harness.frame_kinds import generated
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


@pytest.mark.parametrize("protocol", sorted(RULES))
def test_sql_and_python_agree_on_every_frame_kind(con, protocol):
    frames = generated()
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
