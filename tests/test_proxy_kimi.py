"""The real `kimi --wire` through the real proxy: byte-exact both ways, every frame recorded with
the right extracted fields, and the store's frames valid against the Wire model."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from sample_sessions.scenarios import SCENARIOS
from tests.harness.proxy import WIRE_PROXY, db_rows
from tests.harness.scripted_client import ClientPlan
from tests.harness.wire import Scenario, check_scenario, run_scenario
from wire_recorder.recorder.protocols.wire import model as wire_model
from wire_recorder.recorder.store import open_store


def expected_fields(direction: str, msg) -> tuple:
    """(kind, method, rpc_id, msg_type) derived independently of recorder.classify."""
    if not isinstance(msg, dict):
        return ("invalid", None, None, None)
    rid = msg.get("id")
    rid = None if rid is None else str(rid)
    if "method" in msg:
        p = msg.get("params") or {}
        t = p.get("type") if msg["method"] in ("event", "request") else None
        return ("request" if "id" in msg else "notification", msg["method"], rid, t)
    return ("error" if "error" in msg else "response", None, rid, None)


@pytest.fixture(scope="module")
def recorded(kimi_recordings, tmp_path_factory):
    """Every sample scenario recorded through wire-proxy (once per test run, shared with other
    modules: tests/harness/kimi_recordings.py), copied here: name -> (db, client result)."""
    d = tmp_path_factory.mktemp("kimi")
    return {name: (rec.copy_to(d), rec.result)
            for name, rec in kimi_recordings.get(SCENARIOS).items()}


def all_rows(recorded, sql: str) -> list[tuple]:
    """`sql` over every recording, its rows one after another."""
    return [row for db, _ in recorded.values() for row in db_rows(db, sql)]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_real_session_is_relayed_and_recorded_exactly(recorded, name):
    db, result = recorded[name]
    assert check_scenario(SCENARIOS[name], result) == []
    with open_store(db, read_only=True) as store:
        (session,) = [s for s in store.sessions() if s["name"] == name]
        frames = store.frames(session["session_id"])
    for direction, client_view in (("c2a", result.sent()), ("a2c", result.received())):
        got = [(f.raw, f.newline) for f in frames if f.direction == direction]
        assert got == [(f.raw, f.newline) for f in client_view], direction
        for f, cf in zip([f for f in frames if f.direction == direction], client_view, strict=False):
            assert (f.kind, f.method, f.rpc_id, f.msg_type) == expected_fields(direction, cf.msg)
            if f.kind == "notification" and f.method == "event":
                assert orjson.loads(f.payload) == cf.msg["params"]["payload"]
    assert session["protocol"] == "wire"
    assert session["exit_code"] == 0 and session["end_reason"] == "agent_exit"
    assert session["frame_count"] == len(result.sent()) + len(result.received())
    assert [f.seq for f in frames] == list(range(1, len(frames) + 1))


def test_every_recorded_frame_is_known_to_the_wire_model(recorded):
    rows = all_rows(recorded, "SELECT direction, raw, known FROM frames WHERE direction IN ('c2a','a2c')")
    assert len(rows) > 100
    for direction, raw, known in rows:
        parsed = wire_model.parse_message(orjson.loads(bytes(raw)))
        assert parsed.known, (direction, bytes(raw)[:200])
        assert known is True


def test_sample_session_query_answers_sensibly(recorded):
    counts: dict[tuple, int] = {}
    for d, m, t, n in all_rows(recorded, "SELECT direction, method, msg_type, count(*) FROM frames GROUP BY ALL"):
        counts[(d, m, t)] = counts.get((d, m, t), 0) + n
    assert counts[("c2a", "prompt", None)] >= len(SCENARIOS)
    assert counts[("a2c", "request", "ApprovalRequest")] >= 4
    assert counts[("a2c", "request", "ToolCallRequest")] >= 1
    assert counts[("a2c", "event", "StatusUpdate")] >= 3


UNKNOWN_AGENT = r"""
import sys
for line in sys.stdin:
    pass
sys.stdout.write('{"jsonrpc":"2.0","method":"event","params":{"type":"FutureEvent","payload":{"x":1}}}\n')
sys.stdout.write('{"jsonrpc":"2.0","method":"request","id":"r1","params":{"type":"FutureRequest","payload":{"id":"r1"}}}\n')
sys.stdout.write('{"jsonrpc":"2.0","method":"telemetry","params":{"n":1}}\n')
"""


def test_unknown_message_types_are_stored_as_they_are_and_flagged(tmp_path):
    db = str(tmp_path / "u.db")
    client = b'{"jsonrpc":"2.0","method":"initialize","id":"i","params":{"protocol_version":"1.10"}}\n' \
             b'{"jsonrpc":"2.0","method":"teleport","id":"t","params":{}}\n'
    res = subprocess.run([WIRE_PROXY, "-q", "--db", db, "--", sys.executable, "-c", UNKNOWN_AGENT],
                         input=client, capture_output=True, timeout=60)
    assert res.returncode == 0
    rows = db_rows(db, "SELECT direction, kind, method, msg_type, known, payload FROM frames "
                       "WHERE direction IN ('c2a','a2c') ORDER BY seq")
    assert [r[:5] for r in rows] == [
        ("c2a", "request", "initialize", None, True),
        ("c2a", "request", "teleport", None, False),
        ("a2c", "notification", "event", "FutureEvent", False),
        ("a2c", "request", "request", "FutureRequest", False),
        ("a2c", "notification", "telemetry", None, False),
    ]
    assert orjson.loads(rows[2][5]) == {"x": 1}
    assert res.stdout.count(b"\n") == 3  # relayed untouched


def test_recorded_order_is_causal(recorded):
    """A response is never recorded before the request it answers, in either direction (the
    relay queues a chunk before it writes it on)."""
    rows = all_rows(recorded, "SELECT session_id, seq, direction, kind, rpc_id FROM frames "
                              "WHERE kind IN ('request', 'response', 'error') ORDER BY session_id, seq")
    asked: dict[tuple, int] = {}
    checked = 0
    for sid, seq, direction, kind, rpc_id in rows:
        if kind == "request":
            asked[(sid, direction, rpc_id)] = seq
        elif rpc_id is not None:
            other = "a2c" if direction == "c2a" else "c2a"
            assert (sid, other, rpc_id) in asked, (sid, seq, direction, rpc_id)
            checked += 1
    assert checked > 30


def test_stored_version_is_what_kimi_answered_not_the_offer(tmp_path, kimi_exe):
    """A client offering Wire 1.7: kimi-cli 1.51.0 answers 1.10, and that is what the session
    speaks and what is stored (not the client's offer)."""
    db = str(tmp_path / "v.db")
    sc = Scenario("offer_1_7", "initialize offering 1.7, nothing else", [],
                  ClientPlan(protocol_version="1.7", init_timeout=600.0), timeout=900.0)
    result = run_scenario(sc, [WIRE_PROXY, "-q", "--db", db, "--"], kimi=kimi_exe)
    answer = result.received()[0].msg["result"]["protocol_version"]
    assert answer == "1.10", result.summary()
    with open_store(db, read_only=True) as store:
        (session,) = store.sessions()
    assert (session["protocol"], session["protocol_version"]) == ("wire", "1.10")
