"""`wire-proxy --llm`: the real kimi `--wire` recorded with its model leg, against a model server
on 127.0.0.1 that streams like a real provider (reasoning, text, tool arguments cut mid-path,
usage; one 503 the client library retries). One recording with the leg and one without, shared
by every test here (tests/test_llm_leg_replay.py replays the same one)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.harness.llm_leg import KEY_RE, LLM_TURNS, exchanges, payloads, record_pair
from tests.harness.model_server import sse_chunks
from wire_recorder.replay.agents.llm_text import aligned

ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?")


@pytest.fixture(scope="module")
def pair(kimi_exe, tmp_path_factory):
    return record_pair(kimi_exe, tmp_path_factory.mktemp("llm-leg"))


def _content(result) -> list:
    """What the client saw of the model's answers: every event but the status updates (their
    context share depends on the system prompt's date), without ids made up per run."""
    out = []
    for f in result.frames:
        if f.dir == "a2c" and f.method == "event":
            t = f.msg["params"]["type"]
            if t != "StatusUpdate":
                out.append((t, f.msg["params"]["payload"]))
            else:
                out.append((t, f.msg["params"]["payload"].get("token_usage")))
    return out


def test_the_agent_sees_the_same_with_and_without_the_leg(pair):
    with_leg, without = pair.with_leg, pair.without
    assert with_leg.result.response("p-1") is not None, with_leg.result.summary()
    # kimi sends a step's StatusUpdate and a ToolResult from different tasks, in either order:
    # the other events in order, and the status updates in order among themselves
    def split(result):
        events = _content(result)
        return ([e for e in events if e[0] != "StatusUpdate"],
                [e for e in events if e[0] == "StatusUpdate"])
    assert split(with_leg.result) == split(without.result)
    # the model was asked the same (but the system prompt's current time), with the same headers
    # but the address
    assert len(with_leg.requests) == len(without.requests) == 4

    def masked(body):
        return json.loads(ISO_TIME.sub("T", json.dumps(body)))

    assert [masked(b) for b in with_leg.requests] == [masked(b) for b in without.requests]
    def same(h):  # each model server has its own key; the length follows the date's
        return {k: v for k, v in h.items()
                if k.lower() not in ("host", "authorization", "content-length")}

    assert [same(h) for h in with_leg.headers] == [same(h) for h in without.headers]
    assert all(h["Authorization"] == f"Bearer {with_leg.key}" for h in with_leg.headers)


def test_every_exchange_is_stored_byte_for_byte_and_chunk_for_chunk(pair):
    ex = exchanges(pair.with_leg.db)
    assert [e["n"] for e in ex] == [1, 2, 3, 4]
    assert [e["response"]["status"] for e in ex] == [200, 503, 200, 200]
    model = pair.with_leg.model
    answers = [t for t in LLM_TURNS if "status" not in t]
    for e, body in zip(ex, pair.with_leg.requests, strict=True):
        assert e["request"]["method"] == "POST" and e["request"]["path"] == "/chat/completions"
        # the stored copy is redacted as frames are; the rest is the body the model got
        stored = e["request"]["request_body"]
        assert json.loads(aligned(json.dumps(json.loads(stored), ensure_ascii=False),
                                  json.dumps(body, ensure_ascii=False))) == \
            json.loads(stored)
    for e, turn in zip([e for e in ex if e["response"]["status"] == 200], answers, strict=True):
        # what the model server wrote, one HTTP chunk per SSE event, as the agent got it
        events = [b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\n\n"
                  for c in sse_chunks(turn, model)] + [b"data: [DONE]\n\n"]
        assert e["response"]["response_body"].encode() == b"".join(events)
        assert [size for _, size in e["response"]["chunks"]] == [len(x) for x in events]
        times = [t for t, _ in e["response"]["chunks"]]
        assert times == sorted(times) and e["response"]["first_byte_ms"] <= times[-1]
    failed = ex[1]["response"]
    assert "upstream overloaded" in failed["response_body"] and failed["chunked"] is False
    # the retry is the same request again, as the client library's retry header says
    assert ex[1]["request"]["request_body"] == ex[2]["request"]["request_body"]
    # the bodies are stored once: not again in the payload column, which has their digests
    rows = payloads(pair.with_leg.db)
    assert len(rows) == 8 and not any(k.endswith(("_body", "_body_b64")) for r in rows for k in r)
    requests = payloads(pair.with_leg.db, "llm_request")
    assert [r["sha256"] for r in requests] == [e["request"]["sha256"] for e in ex]
    assert dict(ex[2]["request"]["headers"]).get("x-stainless-retry-count") == "1"


def test_no_api_key_in_any_stored_byte(pair):
    key = pair.with_leg.key
    assert key.encode() not in pair.with_leg.db.read_bytes()
    for side in pair.with_leg.db.parent.iterdir():  # blobs, spools, notes: every file beside
        if side.is_file():
            assert key.encode() not in side.read_bytes(), side
            assert not KEY_RE.search(side.read_bytes()), side
    ex = exchanges(pair.with_leg.db)
    assert all(e["request"]["secret_headers"] == ["Authorization"] for e in ex)
    assert not any(k.lower() == "authorization" for e in ex for k, _ in e["request"]["headers"])


def test_llm_calls_gives_one_row_per_call_with_its_step_usage_and_retries(pair):
    import subprocess

    from tests.harness.replay import WIRE_PROXY

    query = str(Path(WIRE_PROXY).with_name("wire-query"))
    p = subprocess.run([query, str(pair.with_leg.db), "-f", "ndjson",
                        "select * from llm_calls order by call"], capture_output=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(r["call"], r["turn"], r["step"], r["statuses"], r["retries"]) for r in rows] == [
        (1, 1, 1, [200], 0), (2, 1, 2, [503, 200], 1), (3, 1, 3, [200], 0)]
    assert [r["finish_reason"] for r in rows] == ["tool_calls", "tool_calls", "stop"]
    assert [r["message_id"] for r in rows] == [f"chatcmpl-leg-{i}" for i in (1, 2, 3)]
    assert [(r["input_other"], r["output"], r["input_cache_read"]) for r in rows] == [
        (600, 40, 300), (1000, 20, 0), (200, 30, 900)]
    assert all(r["model"] == pair.with_leg.model and r["status"] == 200 for r in rows)
    assert all(0 < r["time_to_first_token_ms"] <= r["duration_ms"] for r in rows)
    # the usage the agent reported to the client for each step is the provider's
    steps = subprocess.run([query, str(pair.with_leg.db), "-f", "ndjson",
                            "select step, input_other, output from steps order by step"],
                           capture_output=True, timeout=300)
    assert [(s["input_other"], s["output"]) for s in map(json.loads, steps.stdout.splitlines())] \
        == [(r["input_other"], r["output"]) for r in rows]


# -- replay: the recorded model leg served, each request compared --------------------------


@pytest.fixture(scope="module")
def replays(pair):
    """The recording replayed with only the agent command (the upstream long stopped): twice as
    recorded, then with another agent file, with --thinking, and with an AGENTS.md added."""
    import shutil

    from tests.harness.replay import parallel, run_cli

    rec = pair.with_leg
    kimi = rec.result.argv[rec.result.argv.index("--") + 1]
    root = pair.root / "replays"
    agents_md = root / "work-agents-md"
    shutil.copytree(pair.work, agents_md)
    (agents_md / "AGENTS.md").write_text("# Rules\n\nAnswer in one line.\n", encoding="utf-8")
    cases = {"green1": ([], pair.work), "green2": ([], pair.work),
             "okabe": (["--agent", "okabe"], pair.work), "thinking": (["--thinking"], pair.work),
             "agents_md": ([], agents_md)}

    def replay(name: str):
        extra, cwd = cases[name]
        home = root / f"home-{name}"
        home.mkdir(parents=True)
        return name, run_cli(["--json", rec.db, "--", kimi, "--config-file", rec.config, *extra,
                              "--wire"], timeout=1200, env={"HOME": str(home)}, cwd=cwd)

    runs = dict(parallel(replay, list(cases), workers=2))
    # a runner's checkout at another path, the recorded work dir gone (the model cut the path
    # to a.txt across two SSE events: the served answer names the copy's)
    moved = root / "runner" / "checkout"
    shutil.copytree(pair.work, moved)
    gone = pair.root / "work-gone"
    pair.work.rename(gone)
    try:
        cases["moved"] = ([], moved)
        runs.update([replay("moved")])
    finally:
        gone.rename(pair.work)
    return runs


def _report(p) -> dict:
    assert p.stdout.strip(), p.stderr.decode()[-3000:]
    return json.loads(p.stdout)


@pytest.mark.parametrize("run", ["green1", "green2", "moved"])
def test_replayed_green_from_the_recorded_leg_with_the_upstream_stopped(pair, replays, run):
    p = replays[run]
    report = _report(p)
    assert p.returncode == 0, json.dumps(report)[-3000:] + p.stderr.decode()[-2000:]
    assert any("recorded model leg: 4 exchange(s) (3 answered)" in n for n in report["notes"]), \
        report["notes"]


@pytest.mark.parametrize(("run", "part"), [
    ("okabe", "tools: added SendDMail"),
    ("thinking", "parameter reasoning_effort changed"),
    ("agents_md", "system prompt changed at char "),
])
def test_a_change_only_the_model_sees_is_red_and_named(replays, run, part):
    p = replays[run]
    report = _report(p)
    assert p.returncode == 1, json.dumps(report)[-3000:]
    first = report["first_divergence"]
    assert first["kind"] == "model" and first["where"] == "llm call 1", first
    assert part in first["message"], first
    if run == "agents_md":
        assert "AGENTS.md" in first["message"], first


def test_a_path_cut_across_events_is_served_mapped_and_cut_as_recorded():
    from tests.harness.model_server import answer, call
    from wire_recorder.replay.agents.kimi import PathMap
    from wire_recorder.replay.agents.llm_leg_map import mapped_chunks

    rec, live = "/home/ci/build/project", "/runner/_work/p"
    turn = answer(text=["In /home/ci/build/project/a.txt:"],
                  calls=[call("c1", "ReadFile", ['{"path": "/home/ci/bu', 'ild/project/a.txt"}'])])
    chunks = [b"data: " + json.dumps(c).encode() + b"\n\n" for c in sse_chunks(turn)]
    chunks.append(b"data: [DONE]\n\n")
    out = mapped_chunks(chunks, PathMap(rec, live))
    assert len(out) == len(chunks)
    events = [json.loads(c[6:]) for c in out[:-1]]
    args = [tc["function"]["arguments"] for e in events for ch in e["choices"]
            for tc in ch["delta"].get("tool_calls") or []]
    assert json.loads("".join(args)) == {"path": f"{live}/a.txt"} and len(args) == 3
    assert all(args[1:]) and live not in args[1]  # still cut mid-path
    text = "".join(ch["delta"].get("content") or "" for e in events for ch in e["choices"])
    assert text == f"In {live}/a.txt:"
    unchanged = [i for i, c in enumerate(chunks) if b"/ci/bu" not in c and b"project" not in c]
    assert len(unchanged) == len(chunks) - 3
    assert all(out[i] == chunks[i] for i in unchanged)  # the rest byte for byte


def test_wire_show_has_a_line_per_model_exchange(pair):
    import subprocess

    from tests.harness.replay import WIRE_PROXY

    show = str(Path(WIRE_PROXY).with_name("wire-show"))
    p = subprocess.run([show, "--width", "300", str(pair.with_leg.db)], capture_output=True,
                       timeout=300)
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr.decode()
    lines = [ln.strip() for ln in out.splitlines() if "model exchange" in ln]
    assert len(lines) == 4, out
    assert "model exchange 1: 200 stream-model-1 tool_calls, first token " in lines[0]
    assert "model exchange 2: 503" in lines[1]
    assert "tokens in 1100 (cache read 900) out 30" in lines[3], lines[3]
