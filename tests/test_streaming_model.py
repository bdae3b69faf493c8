"""Sessions recorded against a model that streams like a real provider (tests/harness/
model_server.py, through kimi's `openai_legacy` provider type), and replayed the way a CI runner
replays them: only the agent command, from a copy of the work dir at another path, the
recorded work dir gone.

A real model cuts a tool call's JSON arguments anywhere, a path too: the pinned LLM maps the
recorded work dir on each tool call's assembled arguments and cuts them again as recorded, and
the comparison reads the arguments as assembled. Cheap checks of both first, then the real
agent: three sessions (a file read by absolute and by relative path, parallel calls, a write
then a read) green twice, and red when a file read by absolute path changes (also where the
recorded dir, unchanged, is still there)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.harness.model_server import StreamingModel, answer, call, failure, sse_chunks
from tests.harness.replay import WIRE_PROXY, parallel, run_cli
from wire_recorder.replay.agents.kimi import PathMap, answers_for, scripts_for
from wire_recorder.replay.compare import diff_streams, make_items
from wire_recorder.replay.normalize import Normalizer, environment_values
from wire_recorder.replay.recording import parse_msg
from wire_recorder.replay.streamed_args import PART

REC = "/home/ci/build/project"  # a recorded work dir
LIVE = "/runner/_work/checkout/proj"  # the runner's copy


def read_call(pieces: list[str], call_id: str = "call-1") -> list[dict]:
    return [{"type": "tool_call", "id": call_id, "name": "ReadFile", "arguments": ""},
            *({"type": "tool_call_part", "arguments_part": p} for p in pieces)]


def served_args(answer: dict) -> dict[int, list[str]]:
    """Each served tool call's argument pieces, by the call's index in the answer."""
    out: dict[int, list[str]] = {}
    for chunk in answer["stream"]:
        for choice in chunk.get("choices") or []:
            for tc in choice["delta"].get("tool_calls") or []:
                out.setdefault(tc["index"], []).append(tc["function"]["arguments"])
    return out


# -- the pinned LLM: paths mapped on the assembled arguments ----------------------------------


def test_a_path_cut_across_streamed_pieces_is_mapped_and_cut_again_as_recorded():
    pieces = ['{"path": "/home/ci/bu', 'ild/project/src/a.txt", "line_offset": 1}']
    calls = [{"where": "turn 1, step 1", "kind": "answer", "id": "m1",
              "parts": [{"type": "text", "text": "Reading:\n"}, *read_call(pieces)]}]
    rec = SimpleNamespace(path="-", session_id="-")
    served = served_args(answers_for(rec, calls, PathMap(REC, LIVE))[0])[0]
    assert json.loads("".join(served)) == {"path": f"{LIVE}/src/a.txt", "line_offset": 1}
    # as many pieces as recorded (the call's own "" first), none empty, still cut mid-path
    assert len(served) == 3 and served[0] == "" and all(served[1:])
    assert served[1].startswith('{"path": "/runner/') and LIVE not in served[1]
    assert served[2].endswith('/src/a.txt", "line_offset": 1}')
    # kimi's offline model says the same pieces
    lines = [json.loads(ln.split(": ", 1)[1]) for ln in
             scripts_for(rec, [{**calls[0], "parts": read_call(pieces)}],
                         PathMap(REC, LIVE))[0].splitlines() if ln.startswith("tool_call")]
    assert [ln.get("arguments", ln.get("arguments_part")) for ln in lines] == served


def test_parallel_calls_are_mapped_each_on_its_own():
    first = ['{"path": "/home/ci/build/pro', 'ject/a.txt"}']
    second = ['{"path": "notes/', 'b.txt"}']
    third = ['{"pattern": "*.txt", "directory": "', '/home/ci/build/project"}']
    parts = read_call(first, "c1") + read_call(second, "c2") + read_call(third, "c3")
    parts[-3]["name"] = "Glob"
    calls = [{"where": "turn 1, step 1", "kind": "answer", "id": "m1", "parts": parts}]
    got = served_args(answers_for(SimpleNamespace(path="-", session_id="-"), calls,
                                  PathMap(REC, LIVE))[0])
    assert {i: json.loads("".join(p)) for i, p in got.items()} == {
        0: {"path": f"{LIVE}/a.txt"}, 1: {"path": "notes/b.txt"},
        2: {"pattern": "*.txt", "directory": LIVE}}
    assert got[1] == ["", *second]  # nothing to map: as recorded, byte for byte
    assert [len(p) for p in got.values()] == [3, 3, 3]


def test_a_boundary_keeps_every_piece_when_the_live_dir_is_shorter():
    mapping = PathMap("/a/very/long/recorded/work/dir", "/w")
    pieces = ['{"path": "/a/very/lo', "ng/rec", "orded/work/d", 'ir/x"}']
    out = mapping.pieces(pieces)
    assert "".join(p or "" for p in out) == '{"path": "/w/x"}'
    assert len(out) == 4 and all(out)
    assert mapping.pieces([None, "{}"]) == [None, "{}"]
    # a dir whose name only starts like the work dir is not it
    assert mapping.pieces(['{"p": "/a/very/long/recorded/work/dir', '2/x"}']) == \
        ['{"p": "/a/very/long/recorded/work/dir', '2/x"}']


# -- the comparison: arguments as assembled ---------------------------------------------------


def _events(pieces: list[str]) -> list:
    def ev(etype: str, payload: dict) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "method": "event",
                           "params": {"type": etype, "payload": payload}}).encode()

    frames = [ev("StepBegin", {"n": 1}),
              ev("ToolCall", {"type": "function", "id": "c1",
                              "function": {"name": "ReadFile", "arguments": ""}, "extras": None})]
    frames += [ev("ToolCallPart", {"arguments_part": p}) for p in pieces]
    return [parse_msg(raw, "a2c") for raw in frames]


def _items(pieces: list[str], workdir: str) -> list:
    norm = Normalizer(values=environment_values(["kimi", "--wire"], workdir))
    return make_items(_events(pieces), norm, set())


def test_a_path_cut_differently_on_each_side_compares_equal_and_a_changed_one_does_not():
    rec = _items(['{"path": "/home/ci/bu', 'ild/project/a.txt"}'], REC)
    live = _items(['{"path": "/runner/_work/checkout/p', 'roj/a.txt"}'], LIVE)
    assert diff_streams(rec, live) == []
    assert rec[1].norm["params"]["payload"]["function"]["arguments"] == '{"path": "<path>/a.txt"}'
    assert rec[2].norm["params"]["payload"]["arguments_part"] == PART
    other = _items(['{"path": "/runner/_work/checkout/p', 'roj/b.txt"}'], LIVE)
    [div] = diff_streams(rec, other)
    assert 'expected ToolCall ReadFile{"path": "<path>/a.txt"}' in div.message, div.message
    assert "<path>/b.txt" in div.message
    # one piece more is a divergence too
    more = _items(['{"path": "/runner/_work/checkout/p', 'roj/a.t', 'xt"}'], LIVE)
    assert [d.kind for d in diff_streams(rec, more)] == ["extra"]
    # pieces that hold nothing to mask are compared as they are
    plain = _items(['{"command": ', '"ls"}'], REC)
    assert plain[2].norm["params"]["payload"]["arguments_part"] == '{"command": '


def test_a_subagents_tool_call_is_assembled_apart_from_its_parents():
    """Parts are joined per agent: a subagent's ToolCall between its parent's call and the
    parent's parts does not take them."""
    def wrapped(raw: bytes) -> bytes:
        event = json.loads(raw)["params"]
        return json.dumps({"jsonrpc": "2.0", "method": "event", "params": {
            "type": "SubagentEvent", "payload": {"agent_id": "a1", "event": event}}}).encode()

    def stream(root: list[str], sub: list[str], workdir: str) -> list:
        r, s = _events(root), _events(sub)
        msgs = [r[0], r[1], parse_msg(wrapped(s[1].raw), "a2c"), r[2],
                parse_msg(wrapped(s[2].raw), "a2c"), r[3], parse_msg(wrapped(s[3].raw), "a2c")]
        norm = Normalizer(values=environment_values(["kimi", "--wire"], workdir))
        return make_items(msgs, norm, set())

    rec = stream(['{"path": "/home/ci/bu', 'ild/project/a.txt"}'],
                 ['{"path": "/home/ci/build/pr', 'oject/b.txt"}'], REC)
    live = stream(['{"path": "/runner/_work/ch', 'eckout/proj/a.txt"}'],
                  ['{"path": "/runner/_w', 'ork/checkout/proj/b.txt"}'], LIVE)
    assert diff_streams(rec, live) == []
    sub_call = rec[2].norm["params"]["payload"]["event"]["payload"]
    assert sub_call["function"]["arguments"] == '{"path": "<path>/b.txt"}'
    swapped = stream(['{"path": "/runner/_work/ch', 'eckout/proj/b.txt"}'],
                     ['{"path": "/runner/_w', 'ork/checkout/proj/a.txt"}'], LIVE)
    assert len(diff_streams(rec, swapped)) == 2


# -- the streaming model ----------------------------------------------------------------------


def test_the_model_streams_like_a_provider():
    import urllib.request

    turn = answer(think=["a", "b"], text=["x\n", "y"],
                  calls=[call("c1", "ReadFile", ['{"path": "/t', 'mp/a"}']),
                         call("c2", "ReadFile", ['{"path": "b"}'])], usage=(10, 5, 4),
                  message_id="chatcmpl-1")
    chunks = sse_chunks(turn)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens_details"] == \
        {"cached_tokens": 4}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    with StreamingModel([failure(503, "overloaded"), turn]) as model:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

        def post() -> tuple[int, bytes]:
            req = urllib.request.Request(
                model.base_url + "/chat/completions", method="POST",
                data=json.dumps({"model": model.model, "stream": True, "messages": []}).encode(),
                headers={"Authorization": f"Bearer {model.key}"})
            try:
                with opener.open(req, timeout=60) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as e:
                return e.code, e.read()

        status, body = post()
        assert status == 503 and json.loads(body)["error"]["message"] == "overloaded"
        status, body = post()
        assert status == 200
        events = body.decode().split("\n\n")
        assert events[-2:] == ["data: [DONE]", ""]
        assert [json.loads(e[len("data: "):]) for e in events[:-2]] == chunks
        assert post()[0] == 400  # past the script: said at once
        assert len(model.requests) == 3


# -- the real agent: recorded against the streaming model, replayed as on a CI runner ----------

FILES = {"a.txt": "alpha line one\nalpha line two\n", "notes/b.txt": "bravo\n"}
PLAN = "## Plan\n\n1. read `a.txt`\n2. then `notes/b.txt`\n"


def checkout(dest: Path) -> Path:
    """The work dir as a runner has it (the files of the repository, nothing the session made)."""
    for rel, content in FILES.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(content, encoding="utf-8")
    return dest


def cut(path: str, *rest: str) -> list[str]:
    """A ReadFile/WriteFile argument text cut in the middle of the work dir's last name."""
    k = len(path) - 2
    return ['{"path": "' + path[:k], path[k:] + "".join(rest)]


def scripts(work: str) -> dict[str, list[dict]]:
    return {
        "read": [
            answer(think=["The user wants two files read.\n", "Absolute path first."],
                   text=[PLAN[:12], PLAN[12:]],
                   calls=[call("call-abs", "ReadFile", cut(work, '/a.txt"}'))],
                   usage=(900, 40, 300)),
            failure(503, "upstream overloaded"),  # the client library retries it
            answer(calls=[call("call-rel", "ReadFile", ['{"pa', 'th": "notes/', 'b.txt"}'])],
                   usage=(1000, 20, 0)),
            answer(text=["Both read:\n\n", "| file | first line |\n|---|---|\n",
                         "| a.txt | alpha line one |\n"], usage=(1100, 30, 900)),
        ],
        "parallel": [
            answer(think=["Both at once."], text=["Reading both\nin parallel."],
                   calls=[call("call-a", "ReadFile", cut(work, '/a.txt"}')),
                          call("call-b", "ReadFile", ['{"path": "not', 'es/b.txt"}'])],
                   usage=(700, 30, 0)),
            answer(text=["Done:\n- a.txt\n- notes/b.txt\n"], usage=(800, 10, 600)),
        ],
        "write_read": [
            answer(text=["Writing `c.txt`,\nthen reading it back."],
                   calls=[call("call-w", "WriteFile",
                               cut(work, '/c.txt", "content": "charlie\\ndelta\\n"}'))],
                   usage=(600, 25, 0)),
            answer(calls=[call("call-r", "ReadFile", cut(work, '/c.txt"}'))],
                   usage=(700, 15, 500)),
            answer(text=["It says:\n\n```\ncharlie\ndelta\n```\n"], usage=(800, 12, 600)),
        ],
    }


PROMPTS = {"read": "Read a.txt and notes/b.txt", "parallel": "Read both files at once",
           "write_read": "Write c.txt and read it back"}


@pytest.fixture(scope="module")
def streamed(kimi_exe, tmp_path_factory):
    """Three sessions recorded through `wire-proxy -- kimi --wire` against the streaming
    model; then every recorded work dir removed and each session replayed from a fresh copy at
    another path with only the agent command: twice each, and once with a.txt changed."""
    from tests.harness.kimi_peer import clean_env
    from tests.harness.scripted_client import Approval, ClientPlan, Prompt, run_client

    root = tmp_path_factory.mktemp("streamed")
    dbs = root / "dbs"
    dbs.mkdir()

    def record(name: str):
        rec_root = root / f"rec-{name}"
        home, work = rec_root / "home", rec_root / "work"
        home.mkdir(parents=True)
        work.mkdir()
        checkout(work)
        model = StreamingModel(scripts(str(work))[name])
        cfg = rec_root / "config.toml"
        with model:
            cfg.write_text(model.config_toml(), encoding="utf-8")
            result = run_client(
                [WIRE_PROXY, "-q", "--db", str(dbs / f"{name}.db"), "--", str(kimi_exe),
                 "--config-file", str(cfg), "--wire"],
                ClientPlan(prompts=[Prompt(PROMPTS[name])], approval_default=Approval.approve(),
                           init_timeout=600, prompt_timeout=600),
                env={**clean_env(), "HOME": str(home)}, cwd=work, timeout=1200)
        return name, (result, model.requests, str(work))

    recorded = dict(parallel(record, list(PROMPTS)))

    def replay(case: tuple[str, str]):
        name, run = case
        where = root / f"ci-{name}-{run}"
        (where / "home").mkdir(parents=True)
        work = checkout(where / "checkout" / "project")
        if run.startswith("changed"):
            (work / "a.txt").write_text("alpha line one, changed\n", encoding="utf-8")
        p = run_cli([dbs / f"{name}.db", "--", kimi_exe, "--wire"], timeout=1200,
                    env={"HOME": str(where / "home")}, cwd=work)
        return case, p

    # on the recording machine first: the recorded dir is there, unchanged, and must not be read
    runs = dict([replay(("read", "changed_beside_recorded"))])
    for name in PROMPTS:  # the runner has none of the recording machine's folders
        shutil.rmtree(root / f"rec-{name}")
    cases = [(n, r) for n in PROMPTS for r in ("green1", "green2")] + [("read", "changed")]
    runs.update(parallel(replay, cases))
    return recorded, runs


def _events_of(result, etype: str) -> list[dict]:
    return [f.msg["params"]["payload"] for f in result.frames
            if f.dir == "a2c" and f.method == "event" and f.msg["params"]["type"] == etype]


def test_the_recordings_show_what_a_real_provider_streams(streamed):
    recorded, _ = streamed
    result, requests, work = recorded["read"]
    assert result.response("p-1") is not None, result.summary()
    think = "".join(p["think"] for p in _events_of(result, "ContentPart") if p["type"] == "think")
    text = "".join(p["text"] for p in _events_of(result, "ContentPart") if p["type"] == "text")
    assert think.startswith("The user wants two files read.\n") and text.startswith(PLAN)
    first = _events_of(result, "ToolCall")[0]
    parts = [p["arguments_part"] for p in _events_of(result, "ToolCallPart")][:2]
    assert first["function"]["arguments"] == "" and len(parts) == 2
    assert work not in parts[0] and json.loads("".join(parts)) == {"path": f"{work}/a.txt"}
    usage = [u["token_usage"] for u in _events_of(result, "StatusUpdate") if u.get("token_usage")]
    assert usage[0] == {"input_other": 600, "output": 40, "input_cache_read": 300,
                        "input_cache_creation": 0}
    # one 503, retried by the client library on its own: four requests for three answers
    assert len(requests) == 4 and requests[1]["messages"] == requests[2]["messages"]
    tool_said = [m for m in requests[1]["messages"] if m.get("role") == "tool"]
    assert "alpha line one" in json.dumps(tool_said)
    assert not any(r["is_error"] for r in
                   (e["return_value"] for e in _events_of(result, "ToolResult")))

    result, requests, work = recorded["parallel"]
    step_one = [e["id"] for e in _events_of(result, "ToolCall")]
    assert step_one == ["call-a", "call-b"] and len(requests) == 2
    outputs = {e["tool_call_id"]: e["return_value"]["output"]
               for e in _events_of(result, "ToolResult")}
    assert "alpha line one" in outputs["call-a"] and "bravo" in outputs["call-b"]

    result, requests, work = recorded["write_read"]
    assert [r.payload["sender"] for r in result.requests("ApprovalRequest")] == ["WriteFile"]
    outputs = {e["tool_call_id"]: e["return_value"] for e in _events_of(result, "ToolResult")}
    assert "charlie" in outputs["call-r"]["output"], outputs


@pytest.mark.parametrize("name", list(PROMPTS))
def test_replayed_from_a_moved_copy_with_the_recorded_dir_gone_green_twice(streamed, name):
    _, runs = streamed
    for run in ("green1", "green2"):
        p = runs[(name, run)]
        out = p.stdout.decode()
        assert p.returncode == 0, (run, out[-3000:], p.stderr.decode()[-2000:])
        assert "MATCHES" in out and "does not exist" not in out, out[-3000:]


@pytest.mark.parametrize("run", ["changed", "changed_beside_recorded"])
def test_a_changed_file_read_by_absolute_path_makes_it_red(streamed, run):
    """On a runner, and on the recording machine where the recorded dir (unchanged) is still
    there: the agent reads the copy it runs in."""
    p = streamed[1][("read", run)]
    out = p.stdout.decode()
    assert p.returncode == 1, (out[-3000:], p.stderr.decode()[-2000:])
    assert "first divergence: turn 1, step 1: expected ToolResult call-abs" in out, out[-3000:]
    assert "alpha line one, changed" in out and "changed a.txt" in out, out[-3000:]
