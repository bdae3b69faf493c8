"""The pinned LLM (replay.agents): what the model answered, derived from a recording, call by
call, and kimi run with only its model swapped for those answers.

Cheap checks first (no agent): the scripts derived from every kimi sample are the scripts that
made it; the user's own config survives with only the model swapped; a recording that does not
say enough is one line naming the call. Then the real agent: a subagent with a retried provider
error and an exhausted model round-trips, and a changed agent (`--yolo`, a hook in the user's
config) replays red naming the first divergence."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path

import pytest

from sample_sessions.acp_scenarios import ACP_SCENARIOS
from sample_sessions.scenarios import SCENARIOS
from tests.harness.replay import (
    SAMPLES,
    WIRE_PROXY,
    assert_one_line_error,
    parallel,
    run_cli,
    sample_names,
)
from wire_recorder.recorder.errors import InputError
from wire_recorder.replay.agents import pin_llm
from wire_recorder.replay.agents.kimi import KimiPin
from wire_recorder.replay.recording import load

WIRE = sample_names()
ACP = [n for n, sc in ACP_SCENARIOS.items() if sc.sample and (SAMPLES / f"{n}.jsonl").exists()]


def parse(script: str) -> tuple[str | None, dict | None, list]:
    """(message id, usage, parts) of one echo script, read the way kimi's dsl.py reads it."""
    mid, usage, parts = None, None, []
    for line in script.splitlines():
        key, _, payload = line.strip().partition(":")
        payload = payload[1:] if payload.startswith(" ") else payload
        value = payload[1:-1] if len(payload) >= 2 and payload[0] == payload[-1] == '"' else payload
        if key == "id":
            mid = value
        elif key == "usage":
            u = json.loads(payload)
            usage = {k: int(u.get(k, 0)) for k in ("input_other", "output", "input_cache_read",
                                                  "input_cache_creation")}
        elif key in ("text", "think"):
            parts.append((key, value))
        elif key == "tool_call":
            t = json.loads(payload)
            parts.append((key, t["id"], t["name"], t.get("arguments")))
        elif key == "tool_call_part":
            parts.append((key, json.loads(payload)["arguments_part"]))
        else:
            parts.append((key, payload))
    return mid, usage, parts


def derived(path: Path, tmp_path: Path, argv: list[str] | None = None) -> tuple[KimiPin, list[str]]:
    rec = load(path)
    pin = pin_llm(rec, argv or ["kimi", "--wire"], {"HOME": str(tmp_path), "PATH": "/usr/bin"})
    assert isinstance(pin, KimiPin)
    pin.use(rec, rec.cwd, rec.cwd)
    return pin, pin.scripts()


@pytest.mark.parametrize("name", WIRE + ACP)
def test_the_scripts_derived_from_a_sample_are_those_that_made_it(name, tmp_path):
    pin, scripts = derived(SAMPLES / f"{name}.jsonl", tmp_path)
    try:
        if name in WIRE:
            assert [parse(s) for s in scripts] == [parse(s) for s in SCENARIOS[name].scripts]
        else:  # ACP shows neither message ids nor token usage
            sc = ACP_SCENARIOS[name]
            made = (sc.then or sc).scripts
            assert [parse(s)[2] for s in scripts] == [parse(s)[2] for s in made]
        out = tmp_path / "scripts.json"
        pin.write_scripts(str(out))
        assert json.loads(out.read_text()) == scripts
    finally:
        pin.cleanup()
    assert not os.path.exists(pin.root)


def test_only_the_model_is_swapped_in_the_users_config(tmp_path):
    home = tmp_path / "home"
    (home / ".kimi" / "skills").mkdir(parents=True)
    user = {
        "default_model": "mine",
        "default_thinking": True,
        "models": {"mine": {"provider": "corp", "model": "kimi-for-coding",
                            "max_context_size": 262144, "capabilities": ["image_in"]}},
        "providers": {"corp": {"type": "kimi", "base_url": "https://llm.invalid/v1",
                               "api_key": "sk-user-secret"}},
        "loop_control": {"max_steps_per_turn": 7, "max_retries_per_step": 2},
        "hooks": [{"event": "PreToolUse", "matcher": "Shell", "command": "echo 'ok \"x\"'",
                   "timeout": 5}],
        "services": {"moonshot_search": {"base_url": "https://search.invalid",
                                         "api_key": "k"}},
        "mcp": {"client": {"tool_call_timeout_ms": 1234}},
    }
    cfg = tmp_path / "user.toml"
    cfg.write_text(
        'default_model = "mine"\ndefault_thinking = true\n'
        '[models.mine]\nprovider = "corp"\nmodel = "kimi-for-coding"\n'
        'max_context_size = 262144\ncapabilities = ["image_in"]\n'
        '[providers.corp]\ntype = "kimi"\nbase_url = "https://llm.invalid/v1"\n'
        'api_key = "sk-user-secret"\n'
        '[loop_control]\nmax_steps_per_turn = 7\nmax_retries_per_step = 2\n'
        '[[hooks]]\nevent = "PreToolUse"\nmatcher = "Shell"\ncommand = "echo \'ok \\"x\\"\'"\n'
        'timeout = 5\n'
        '[services.moonshot_search]\nbase_url = "https://search.invalid"\napi_key = "k"\n'
        '[mcp.client]\ntool_call_timeout_ms = 1234\n', encoding="utf-8")
    assert tomllib.loads(cfg.read_text()) == user
    env = {"HOME": str(home), "PATH": "/usr/bin", "KIMI_MODEL_NAME": "other",
           "KIMI_SHARE_DIR": "/elsewhere", "KIMI_CLI_NO_AUTO_UPDATE": "1"}
    rec = load(SAMPLES / "multi_step.jsonl")
    argv = ["kimi", "--config-file", str(cfg), "--wire", "-w", "."]
    pin = pin_llm(rec, argv, env)
    assert isinstance(pin, KimiPin)
    try:
        assert pin.argv == ["kimi", "--config-file", pin.config_path, "--wire", "-w", "."]
        got = tomllib.loads(Path(pin.config_path).read_text(encoding="utf-8"))
        for key in ("hooks", "loop_control", "services", "mcp", "default_model",
                    "default_thinking"):
            assert got[key] == user[key], key
        assert got["models"] == {"mine": {"provider": "wire-replay-pinned",
                                          "model": "kimi-for-coding", "capabilities": ["image_in"],
                                          "max_context_size": 100000}}  # as recorded
        assert list(got["providers"]) == ["wire-replay-pinned"]
        assert got["providers"]["wire-replay-pinned"]["type"] == "_scripted_echo"
        assert "sk-user-secret" not in Path(pin.config_path).read_text(encoding="utf-8")
        assert pin.env["HOME"] == pin.home != str(home)
        assert pin.env["KIMI_SCRIPTED_ECHO_SCRIPTS"] == pin.scripts_path
        assert "KIMI_MODEL_NAME" not in pin.env and "KIMI_SHARE_DIR" not in pin.env
        assert pin.env["KIMI_CLI_NO_AUTO_UPDATE"] == "1"
        cred = Path(pin.home, ".kimi", "credentials", "kimi-code.json")
        assert stat.S_IMODE(cred.stat().st_mode) == 0o600
        assert os.path.islink(Path(pin.home, ".kimi", "skills"))
        assert any(str(cfg) in n for n in pin.notes)
    finally:
        pin.cleanup()


def test_acp_offers_the_models_the_recording_offered(tmp_path):
    """kimi acp lists its config's models in session/new (always-thinking ones as KEY,thinking,
    others with a KEY,thinking variant when they can think): the pinned config has the
    recorded ones, the user's details kept (checked against kimi acp 1.51 once by hand)."""
    from wire_recorder.replay.agents.kimi import pinned_config, to_toml

    offered = {"max_context_size": None, "current": "c,thinking", "models": [
        {"id": "k,thinking", "name": "kimi-thinking-x"}, {"id": "c", "name": "kimi-for-coding"},
        {"id": "c,thinking", "name": "kimi-for-coding (thinking)"}]}
    user = {"default_model": "gone", "models": {"c": {"provider": "p", "model": "kimi-for-coding",
                                                      "max_context_size": 5000,
                                                      "display_name": "Mine"},
                                                "gone": {"provider": "p", "model": "x",
                                                         "max_context_size": 1}}}
    got = tomllib.loads(to_toml(pinned_config(user, offered, "/s.json")))
    assert (got["default_model"], got["default_thinking"]) == ("c", True)
    assert got["models"] == {
        "k": {"model": "kimi-thinking-x", "provider": "wire-replay-pinned",
              "max_context_size": 100000},
        "c": {"provider": "wire-replay-pinned", "model": "kimi-for-coding",
              "max_context_size": 5000, "display_name": "Mine", "capabilities": ["thinking"]}}
    # a config given inline (--config) is read and replaced by the scratch copy
    rec = load(SAMPLES / "acp_tools.jsonl")
    pin = pin_llm(rec, ["kimi", "--config", json.dumps(user), "acp"], {"HOME": str(tmp_path)})
    assert isinstance(pin, KimiPin)
    try:
        assert pin.argv == ["kimi", "--config-file", pin.config_path, "acp"]
        got = tomllib.loads(Path(pin.config_path).read_text(encoding="utf-8"))
        assert list(got["models"]) == ["echo"] and got["default_model"] == "echo"
    finally:
        pin.cleanup()


def test_paths_under_the_recorded_work_dir_are_the_live_ones(tmp_path):
    src = SAMPLES / "multi_step.jsonl"
    edited = tmp_path / "paths.jsonl"
    edited.write_text(src.read_text(encoding="utf-8").replace(
        '"arguments":"{\\"command\\": \\"echo step one\\"}"',
        '"arguments":"{\\"command\\": \\"ls ${scratch}/work/sub\\"}"', 1).replace(
        '"text":"Now step two."', '"text":"Now ${scratch}/work, not ${scratch}/workshop."', 1),
        encoding="utf-8")
    rec = load(edited)
    assert rec.cwd and os.path.isabs(rec.cwd)
    pin = pin_llm(rec, ["kimi", "--wire", "-w", "w"], {"HOME": str(tmp_path)})
    assert isinstance(pin, KimiPin)
    try:
        pin.use(rec, rec.cwd, "/live")
        first, second = (parse(s)[2] for s in pin.scripts()[:2])
        assert json.loads(first[-1][3]) == {"command": "ls /live/w/sub"}
        assert second[1] == ("text", f"Now /live/w, not {os.path.dirname(rec.cwd)}/workshop.")
    finally:
        pin.cleanup()


def _edited(src: Path, dest: Path, old: str, new: str) -> Path:
    text = src.read_text(encoding="utf-8")
    assert old in text
    dest.write_text(text.replace(old, new, 1), encoding="utf-8")
    return dest


def test_a_recording_that_cannot_yield_a_pinned_llm_is_one_line(tmp_path, kimi_exe):
    # kimi's offline model reads its scripts line by line: a text with a line break goes to the
    # model on loopback, whose kimi provider reads no cache creation (the sample's usage has it)
    bad = _edited(SAMPLES / "multi_step.jsonl", tmp_path / "multi_step.jsonl",
                  '"text":"Now step two."', '"text":"Now\\nstep two."')
    home = tmp_path / "home"
    home.mkdir()
    p = run_cli([bad, "--cwd", tmp_path, "--", kimi_exe, "--wire"], env={"HOME": str(home)})
    line = assert_one_line_error(p, 2, "turn 1, step 2 (recorded frame 16)", "cache creation",
                                 "nor can kimi's offline model say turn 1, step 2 (recorded "
                                 "frame 17): the model's text has a line break", "--live-llm")
    assert "multi_step.jsonl" in line
    assert list(home.iterdir()) == []
    # ACP does not show what a subagent's model said
    sub = _edited(SAMPLES / "acp_tools.jsonl", tmp_path / "acp_sub.jsonl",
                  '"title":"ReadFile: notes.txt"', '"title":"Agent: look"')
    with pytest.raises(InputError, match=r"prompt 1, answer 2 \(recorded frame 21\).*subagent"):
        pin_llm(load(sub), ["kimi", "acp"], {"HOME": str(home)})


# -- the real agent -------------------------------------------------------------------------------


COMPACTION_SUMMARY = "Summary: a subagent listed the folder."


def everything_scenario():
    """A subagent (with an approved Shell call) between its parent's calls, a `/compact` that
    asks the model, a 503 retried once, and a turn that finds the model with no answer left."""
    from tests.harness.analysis import SUBAGENT_SUMMARY
    from tests.harness.kimi_peer import msg_id, script, shell, text, tool_call, usage
    from tests.harness.scripted_client import Approval, ClientPlan, Prompt
    from tests.harness.wire import Scenario

    agent_args = {"description": "List the folder", "prompt": "Run ls and summarise",
                  "subagent_type": "coder"}
    return Scenario(
        name="pinned_everything",
        description="subagent, compaction, retried provider error, exhausted model",
        session_id="wr-pinned-everything",
        scripts=[
            script(msg_id("msg-1"), usage(500, 20, 100), text("Delegating."),
                   tool_call("call-a", "Agent", agent_args)),
            script(msg_id("sub-1"), usage(50, 5, 10, 7), shell("sub-call-1", "echo from-sub")),
            script(msg_id("sub-2"), usage(70, 40), text(SUBAGENT_SUMMARY.strip())),
            script(msg_id("msg-2"), usage(700, 12, 600), text("The subagent is done.")),
            script(text(COMPACTION_SUMMARY)),
            "error: 503 overloaded",
            script(msg_id("msg-3"), usage(800, 9), text("Recovered after a retry.")),
        ],
        plan=ClientPlan(prompts=[Prompt("Delegate a listing"), Prompt("/compact"),
                                 Prompt("Say something"), Prompt("One more")],
                        approval_default=Approval.approve()),
    )


def test_subagent_compaction_retry_and_exhausted_model_round_trip(kimi_exe, tmp_path):
    """Derived in the order kimi asked its model (the recording ran it out of answers at call
    8: seven made), and the replay is green."""
    from tests.harness.wire import run_scenario
    from wire_recorder.replay.driver import ReplayOptions, replay_session

    sc = everything_scenario()
    db = tmp_path / "everything.db"
    run_scenario(sc, [WIRE_PROXY, "-q", "--db", str(db), "--"], kimi=kimi_exe)
    rec = load(db)
    calls = rec.adapter.part("llm_calls").llm_calls(rec.msgs, rec.client_requests)["calls"]
    assert [(c["kind"], c["agent"] is not None) for c in calls] == [
        ("answer", False), ("answer", True), ("answer", True), ("answer", False),
        ("compaction", False), ("error", False), ("answer", False), ("exhausted", False)]
    assert [c["where"] for c in calls][4:6] == ["turn 2 compaction", "turn 3, step 1 attempt 1"]
    assert not any(c["problem"] for c in calls)
    pin, scripts = derived(db, tmp_path)
    pin.cleanup()
    # neither a compaction's summary (only its length, through kimi's estimate of the context
    # after it) nor a retried error's message reaches the client
    made = [s.replace("error: 503 overloaded", "error: 503") for s in sc.scripts]
    got = [parse(s) for s in scripts]
    stand_in = got[4][2][0][1]
    # kimi's estimate rounds down: the length is known to within 3 characters
    assert 0 <= len(COMPACTION_SUMMARY) - len(stand_in) <= 3, stand_in
    assert stand_in.startswith("(the compaction")
    got[4] = parse(made[4])
    assert got == [parse(s) for s in made]
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    result = replay_session(rec, [str(kimi_exe), "--wire"], env={**os.environ, "HOME": str(home)},
                            cwd=str(work), options=ReplayOptions(frame_timeout=60))
    assert result.ok, result.first


@pytest.fixture(scope="module")
def changed_agents(kimi_exe, tmp_path_factory):
    """approve_shell replayed against kimi --yolo, and against kimi with a PreToolUse hook in
    the user's own config (HOME), side by side."""
    from wire_recorder.replay.driver import ReplayOptions, replay_session

    def one(case: str):
        root = tmp_path_factory.mktemp(case)
        home, work = root / "home", root / "work"
        (home / ".kimi").mkdir(parents=True)
        work.mkdir()
        argv = [str(kimi_exe), "--wire"]
        if case == "yolo":
            argv.append("--yolo")
        else:
            (home / ".kimi" / "config.toml").write_text(
                '[[hooks]]\nevent = "PreToolUse"\nmatcher = "Shell"\n'
                'command = "echo no shell here >&2; exit 2"\n', encoding="utf-8")
        result = replay_session(SAMPLES / "approve_shell.jsonl", argv,
                                env={**os.environ, "HOME": str(home)}, cwd=str(work),
                                options=ReplayOptions(frame_timeout=60))
        return case, result

    return dict(parallel(one, ["yolo", "hook"], workers=2))


def test_yolo_makes_approve_shell_red_naming_the_missing_approval(changed_agents):
    result = changed_agents["yolo"]
    assert not result.ok and result.first is not None
    assert result.first.where == "turn 1, step 1"
    assert "Approval" in result.first.message, result.first
    missing = " ".join(d.message for d in result.divergences)
    assert "ApprovalRequest" in missing, missing


def test_a_hook_in_the_users_config_makes_a_session_red(changed_agents):
    result = changed_agents["hook"]
    assert not result.ok and result.first is not None
    # the user's hook is announced in initialize's answer, then blocks the Shell call
    assert "hooks.configured.PreToolUse" in result.first.message, result.first
    assert any("no shell here" in d.message for d in result.divergences), result.divergences


# -- line breaks: the model on loopback ------------------------------------------------------------

LINES = "I will run it:\n- echo hi\r\nthen report.\u2028Done planning."


def line_break_calls() -> list[dict]:
    """A real model's habits: thinking and text with line breaks, an approved Shell call whose
    arguments stream in two parts, a 503 retried by kimi; at turn 2 an answer that breaks off
    mid-stream, at turn 3 an exhausted model."""
    return [
        {"where": "turn 1, step 1", "kind": "answer", "id": "chatcmpl-1",
         "usage": {"input_other": 900, "output": 40, "input_cache_read": 300},
         "parts": [{"type": "think", "think": "The user wants a shell.\nLet me plan."},
                   {"type": "text", "text": LINES},
                   {"type": "tool_call", "id": "call-1", "name": "Shell",
                    "arguments": '{"command": '},
                   {"type": "tool_call_part", "arguments_part": '"echo hi"}'}]},
        {"where": "turn 1, step 2 attempt 1", "kind": "error",
         "error": {"kind": "status", "status_code": 503, "message": None}},
        {"where": "turn 1, step 2", "kind": "answer", "id": "chatcmpl-2",
         "usage": {"input_other": 1000, "output": 12, "input_cache_read": 0},
         "parts": [{"type": "text", "text": "It printed:\n\n    hi\n"}]},
        {"where": "turn 2, step 1", "kind": "answer", "id": "chatcmpl-3",
         "parts": [{"type": "text", "text": "Again:\nI"}],
         "error": {"kind": "stream", "message": "Error: upstream went away"}},
    ]


@pytest.fixture(scope="module")
def line_break_session(kimi_exe, tmp_path_factory):
    """Recorded through wire-proxy from the real kimi whose "kimi" provider streams from the
    loopback model (a real kimi run with a real stream, as against a real LLM), then replayed
    with only the agent command and a fresh HOME: twice, and once with --yolo."""
    from types import SimpleNamespace

    from tests.harness.kimi_peer import clean_env
    from tests.harness.scripted_client import Approval, ClientPlan, Prompt, run_client
    from wire_recorder.replay.agents.kimi import EXHAUSTED, PathMap, answers_for
    from wire_recorder.replay.agents.llm_server import LoopbackModel

    root = tmp_path_factory.mktemp("lines")
    home, work = root / "home", root / "work"
    home.mkdir()
    work.mkdir()
    model = LoopbackModel(lambda n: EXHAUSTED.format(n=n))
    model.serve(answers_for(SimpleNamespace(path="-", session_id="-"), line_break_calls(),
                            PathMap(None, None)))
    cfg = root / "config.toml"
    cfg.write_text(f'default_model = "real"\ntelemetry = false\n[models.real]\n'
                   f'provider = "cloud"\nmodel = "some-model"\nmax_context_size = 200000\n'
                   f'[providers.cloud]\ntype = "kimi"\nbase_url = "{model.start()}"\n'
                   f'api_key = "{model.key}"\n', encoding="utf-8")
    db = root / "lines.db"
    try:
        rec = run_client([WIRE_PROXY, "-q", "--db", str(db), "--", str(kimi_exe), "--config-file",
                          str(cfg), "--wire", "-w", str(work)],
                         ClientPlan(prompts=[Prompt("Run echo hi"), Prompt("And again"),
                                             Prompt("Once more")],
                                    approval_default=Approval.approve()),
                         env={**clean_env(), "HOME": str(home)}, cwd=work, timeout=90)
    finally:
        model.stop()
    assert model.served == 5  # four answers, then the exhausted one

    def replay(case: str):
        r = tmp_path_factory.mktemp(case)
        (r / "home").mkdir()
        (r / "work").mkdir()
        argv = [str(kimi_exe), "--wire"] + (["--yolo"] if case == "yolo" else [])
        extra = ["--write-llm-script", str(r / "served.json")] if case == "green1" else []
        p = run_cli([db, "--cwd", r / "work", *extra, "--", *argv],
                    env={"HOME": str(r / "home")})
        return case, (p, r)

    return rec, db, dict(parallel(replay, ["green1", "green2", "yolo"], workers=3))


def test_a_session_whose_model_said_line_breaks_replays_green_twice(line_break_session):
    rec, db, runs = line_break_session
    events = [f.msg["params"] for f in rec.frames if f.dir == "a2c" and f.method == "event"]
    said = [e["payload"] for e in events if e["type"] == "ContentPart"]
    assert {"type": "text", "text": LINES} in said  # the line breaks went through kimi intact
    assert any(e["type"] == "StepRetry" for e in events)
    status = [e["payload"] for e in events if e["type"] == "StatusUpdate" and
              e["payload"].get("message_id") == "chatcmpl-1"]
    assert status and status[0]["token_usage"] == {"input_other": 900, "output": 40,
                                                   "input_cache_read": 300,
                                                   "input_cache_creation": 0}, status
    derived = load(db)
    calls = derived.adapter.part("llm_calls").llm_calls(derived.msgs, derived.client_requests)
    assert [c["kind"] for c in calls["calls"]] == ["answer", "error", "answer", "answer",
                                                   "exhausted"]
    assert calls["calls"][3]["error"] == {"kind": "stream", "status_code": None,
                                          "message": "Error: upstream went away"}
    for case in ("green1", "green2"):
        p, r = runs[case]
        assert p.returncode == 0, (p.stdout.decode()[-3000:], p.stderr.decode()[-2000:])
        assert list((r / "home").iterdir()) == []
    out = runs["green1"][0].stdout.decode()
    assert "loopback" in out, out[-2000:]
    served = json.loads((runs["green1"][1] / "served.json").read_text(encoding="utf-8"))
    assert [a.get("status") for a in served] == [None, 503, None, None]
    assert served[3]["stream_error"] == "upstream went away"
    assert served[0]["stream"][1]["choices"][0]["delta"] == {"content": LINES}


def test_yolo_makes_the_line_break_session_red(line_break_session):
    p, _ = line_break_session[2]["yolo"]
    out = p.stdout.decode()
    assert p.returncode == 1, (out[-3000:], p.stderr.decode()[-2000:])
    assert "ApprovalRequest" in out, out[-3000:]


def test_an_acp_session_whose_model_said_line_breaks_replays_green(kimi_exe, tmp_path):
    """kimi acp streams the model's text and thinking as chunks, line breaks and all: the
    loopback model serves them to kimi acp as well."""
    from wire_recorder.replay.driver import ReplayOptions, replay_session

    edited = _edited(SAMPLES / "acp_tools.jsonl", tmp_path / "acp_lines.jsonl",
                     '"text":"Let me look at the environment first."',
                     '"text":"Let me look\\nat the environment first.\\n"')
    edited.write_text(edited.read_text(encoding="utf-8").replace(
        '"text":"Now read the notes file."', '"text":"Now read\\r\\nthe notes file."', 1),
        encoding="utf-8")
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    for rel, content in ACP_SCENARIOS["acp_tools"].files.items():
        (work / rel).write_text(content, encoding="utf-8")
    result = replay_session(edited, [str(kimi_exe), "acp"], env={**os.environ, "HOME": str(home)},
                            cwd=str(work), options=ReplayOptions(frame_timeout=60))
    assert result.ok, result.first
    assert any("loopback" in n for n in result.notes), result.notes
    said = [json.loads(f.raw)["params"]["update"] for f in result.frames
            if f.direction == "a2c" and b'"session/update"' in f.raw]
    assert {"sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": "Now read\r\nthe notes file."}} in said


def test_the_loopback_model_answers_only_its_run_and_never_stalls():
    """Only on 127.0.0.1, only under its path token with its key; past its answers, the
    exhausted error at once (the replay reports a divergence rather than wait)."""
    import urllib.error
    import urllib.request

    from wire_recorder.replay.agents.kimi import EXHAUSTED
    from wire_recorder.replay.agents.llm_server import LoopbackModel

    model = LoopbackModel(lambda n: EXHAUSTED.format(n=n))
    url = model.start()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def post(u: str, key: str) -> tuple[int, bytes, str | None]:
        req = urllib.request.Request(u + "/chat/completions", data=b"{}", method="POST",
                                     headers={"Authorization": f"Bearer {key}"})
        try:
            with opener.open(req, timeout=30) as r:
                return r.status, r.read(), None
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers.get("x-should-retry")

    try:
        assert url.startswith("http://127.0.0.1:") and model.token in url
        model.serve([{"where": "w", "stream": [{"id": "m", "choices": []}]},
                     {"where": "w", "status": 429, "message": "slow down"}])
        assert post(url.replace(model.token, "x" * 32), model.key)[0] == 404
        assert post(url, "wrong")[0] == 401
        assert model.served == 0
        status, body, _ = post(url, model.key)
        assert status == 200 and body == b'data: {"id": "m", "choices": []}\n\ndata: [DONE]\n\n'
        assert post(url, model.key) == (429, b"slow down", "false")
        assert post(url, model.key) == (400, EXHAUSTED.format(n=3).encode(), "false")
    finally:
        model.stop()
