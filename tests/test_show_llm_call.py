"""`wire-show --llm-call N`: one model call of a session recorded through `wire-proxy --llm` (the
real kimi `--wire` against tests/harness/model_server.py: a 503 the client library retries, then
streamed answers), shown as the agent sent and received it: the request's headers (no secret)
and body, the answer piece by piece with its times, and the prompt diff against the call before
(analysis/llm_detail.py, the same code wire-ui shows). The file the agent reads holds control and
bidi characters, which reach the model's requests: none may reach the terminal raw. One
recording, shared by every test here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import orjson
import pytest

from tests.harness.llm_leg import KEY_RE, exchanges, record
from tests.harness.replay import WIRE_PROXY
from wire_recorder.recorder.visible import UNSAFE

SHOW = str(Path(WIRE_PROXY).with_name("wire-show"))
HOSTILE = "alpha \u202eline\u202c one \x1b[31mred\x1b[0m \u009b2J\x07\n"


@pytest.fixture(scope="module")
def rec(kimi_exe, tmp_path_factory):
    root = tmp_path_factory.mktemp("show-llm-call")
    work = root / "work"
    work.mkdir()
    (work / "a.txt").write_text(HOSTILE, encoding="utf-8")
    r = record(kimi_exe, root, work, root / "s.db", "with", llm=True)
    return r, exchanges(r.db)


def show(db, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SHOW, str(db), *args], capture_output=True, timeout=300)


def test_a_call_with_its_retry_shows_request_streamed_answer_and_prompt_diff(rec):
    r, ex = rec
    assert [e["response"]["status"] for e in ex] == [200, 503, 200, 200]  # call 2 retried once
    p = show(r.db, "--llm-call", "2", "--width", "100000", "--max-body", "100000000")
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr.decode()
    assert "model call 2 (turn 1, step 2): stream-model-1, status 200, 1 retry" in out
    # both attempts of the call, each with its request and its answer
    assert "exchange 2: POST /chat/completions" in out and "exchange 3: POST" in out
    assert "response 503 Service Unavailable" in out and "response 200 OK" in out
    assert "exchange 1:" not in out and "exchange 4:" not in out
    assert out.count("Content-Type: application/json") >= 2
    assert out.count("(left out, never stored: Authorization)") == 2
    assert not KEY_RE.search(p.stdout) and r.key.encode() not in p.stdout
    # the body in full (bound not reached), its JSON indented
    body = ex[2]["request"]["request_body"]
    pretty = orjson.dumps(orjson.loads(body), option=orjson.OPT_INDENT_2).decode()
    assert '          "role": "system",' in out and "more bytes" not in out
    assert f"request body ({len(body.encode()):,} bytes, its JSON indented)" in out
    assert pretty.count("\n") + 1 <= out.count("\n")
    # the answer as it streamed: a line per piece, with its time and size, in order
    answer = ex[2]["response"]
    pieces = [ln for ln in out.split("exchange 3:")[1].splitlines() if " ms " in ln and " B " in ln]
    assert len(pieces) == len(answer["chunks"]) > 2
    data, at = answer["response_body"].encode(), 0
    for line, (ms, size) in zip(pieces, answer["chunks"], strict=True):
        assert line.split()[0] == f"{ms:.3f}" and line.split()[2] == f"{size:,}"
        assert " ".join(data[at:at + size].decode().split()) in line
        at += size
    # the prompt diff against call 1: the model's tool call and its result were added
    diff = out.split("prompt diff against call 1:")[1]
    assert diff.startswith(" 2 messages kept, 0 changed or dropped, 2 added")
    assert '"name": "ReadFile"' in diff and '"tool_call_id": "call-abs"' in diff


def test_recorded_text_reaches_the_terminal_made_safe(rec):
    r, ex = rec
    sent = json.loads(ex[2]["request"]["request_body"])["messages"]
    assert any("\u202e" in json.dumps(m, ensure_ascii=False) for m in sent)  # it reached the model
    p = show(r.db, "--llm-call", "all", "--width", "100000", "--max-body", "100000000")
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr.decode()
    assert out.count("\nmodel call ") == 3
    assert not set(out.replace("\n", "")) & UNSAFE
    assert "alpha \ufffdline\ufffd one" in out  # the bidi controls, replaced


def test_a_large_body_is_cut_and_says_how_much_more(rec):
    r, ex = rec
    p = show(r.db, "--llm-call", "1", "--max-body", "300")
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr.decode()
    body = ex[0]["request"]["request_body"]
    pretty = orjson.dumps(orjson.loads(body), option=orjson.OPT_INDENT_2)
    assert f"… {len(pretty) - 300:,} more bytes" in out
    assert "the first call; its 2 messages are in the body above" in out


def test_a_call_that_is_not_there_is_a_one_line_error(rec):
    r, _ = rec
    p = show(r.db, "--llm-call", "7")
    err = p.stderr.decode()
    assert p.returncode == 2 and p.stdout == b""
    assert err.strip() == ("wire-show: --llm-call 7: this session's model calls are 1 to 3 "
                           "(give one of them, or all)"), err
    p = show(r.db, "--llm-call", "2", "--follow")
    assert p.returncode == 2 and "not with --follow" in p.stderr.decode()
