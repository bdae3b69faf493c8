"""Kimi Code 2.x (`<node22> <main.mjs> acp`) replayed with only the agent command, its model
pinned: one real session (text, a permission-gated Bash run through terminal/*, a Read through
fs/*, a second prompt) recorded through wire-proxy with the ACP SDK client in front and our
streaming model server behind; then the model server is stopped and `wire-replay` runs a fresh
Kimi Code in a fresh, empty HOME, answered by the model on loopback the replay derives from the
recording. Green twice (and as `kimi acp` when `kimi` on PATH is Kimi Code); red, naming the
change, when the client's permission answer or the agent's mode changed."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.harness.acp import AcpScenario, check_acp_scenario, run_acp_scenario
from tests.harness.kimicode import KimiCodeRun, clean_env, config_toml, find_kimicode
from tests.harness.model_server import StreamingModel, answer, call
from tests.harness.peers import need
from wire_recorder.replay.agents import kimi_code
from wire_recorder.replay.agents.kimi import PathMap
from wire_recorder.replay.recording import load

BIN = Path(sys.executable).parent
NOTES = "alpha\nbeta\n"
PROMPTS = ["Run echo, then read notes.txt", "And now?"]


def turns(workdir: Path) -> list[dict]:
    """What the model says, as a real provider streams it: thinking and text in pieces, a Bash call whose
    arguments are cut mid-word, a Read of a path under the work dir cut inside the file name.
    (Not inside the work dir itself: ACP shows the arguments so far in each update, and a
    recorded `{"path": "/tmp/wr-kim` cannot be matched to another work dir's.)"""
    path = str(workdir / "notes.txt")
    cut = len(str(workdir)) + 3
    return [
        answer(think=["The user wants ", "a command run."], text=["I will ", "run a command."],
               calls=[call("call-bash-1", "Bash", ['{"comm', 'and": "echo hi ', 'there"}'])],
               usage=(900, 20, 0)),
        answer(calls=[call("call-read-1", "Read", ['{"path": "', path[:cut], path[cut:] + '"}'])],
               usage=(950, 15, 0)),
        answer(text=["The file says ", "alpha and beta."], usage=(1000, 10, 0)),
        answer(text=["Nothing ", "else to do."], usage=(1100, 5, 0)),
    ]


@pytest.fixture(scope="module")
def kc_peer() -> tuple[Path, Path]:
    return need(find_kimicode, "Kimi Code")


@pytest.fixture(scope="module")
def recorded(kc_peer, acp_python, tmp_path_factory):
    """One Kimi Code session recorded through wire-proxy (work dir snapshot kept), its model
    server stopped afterwards: (db, the model's turns)."""
    db = tmp_path_factory.mktemp("kcreplay") / "kc.db"
    run = KimiCodeRun.create(files={"notes.txt": NOTES})
    try:
        script = turns(run.workdir)
        with StreamingModel(script) as model:
            run.config_path.write_text(config_toml(model.base_url, model.key, model.model),
                                       encoding="utf-8")
            sc = AcpScenario(name="kimicode_tools", description="text, Bash, Read, 2 prompts",
                             scripts=[], prompts=PROMPTS, permissions=["approve_once"],
                             timeout=300)
            result = run_acp_scenario(sc, [str(BIN / "wire-proxy"), "-q", "--snapshot-workdir",
                                           "--db", str(db), "--"],
                                      acp_python=acp_python, run=run)
            assert check_acp_scenario(sc, result) == [], result.client_stderr
            assert len(model.requests) == len(script)
        # the session's own journal, kept beside the recording (the scratch HOME goes)
        shutil.copytree(run.sessions_dir, db.parent / "sessions")
        yield db, script
    finally:
        run.cleanup()


def replay(db: Path | str, argv: list[str], home: Path, *extra: str,
           path: str | None = None) -> subprocess.CompletedProcess[str]:
    """wire-replay with only the agent command, in a fresh empty HOME, nothing else set up."""
    home.mkdir(parents=True, exist_ok=True)
    env = clean_env()
    env.update({"HOME": str(home), "PATH": path or os.environ.get("PATH", "/usr/bin:/bin")})
    return subprocess.run([str(BIN / "wire-replay"), str(db), *extra, "--", *argv], env=env,
                          capture_output=True, text=True, timeout=600, cwd=str(home.parent))


def test_the_answers_derived_are_what_the_model_streamed(recorded):
    """Each served call streams the recorded model's pieces: text deltas, tool call ids and
    names, argument pieces as they were cut (ACP shows them cumulatively), the usage the agent
    reported after each prompt."""
    db, script = recorded
    rec = load(str(db))
    assert kimi_code.recognises(rec)
    calls = kimi_code.derive(rec)
    assert calls["model"]["models"] == [{"id": "m", "name": "stream-model-1"}]
    assert calls["model"]["current"] == "m" and calls["model"]["max_context_size"] == 100000
    answers = kimi_code.answers_for(rec, calls["calls"], PathMap(None, None))
    assert len(answers) == len(script)
    for served, turn in zip(answers, script, strict=True):
        deltas = [c["choices"][0]["delta"] for c in served["stream"] if c["choices"]]
        assert [d["content"] for d in deltas[1:] if d.get("content")] == turn["text"]
        assert [d["reasoning_content"] for d in deltas if "reasoning_content" in d] == \
            turn["think"]
        tool = [t for d in deltas for t in d.get("tool_calls") or []]
        assert [(t["id"], t["function"]["name"]) for t in tool if "id" in t] == \
            [(c["id"], c["name"]) for c in turn["calls"]]
        pieces = [t["function"]["arguments"] for t in tool if "id" not in t]
        assert pieces == [p for c in turn["calls"] for p in c["pieces"]]
    # usage_update's `used` after each prompt is what the turn's last call left
    last = [s["stream"][-1].get("usage") for s in answers]
    assert [u and u["prompt_tokens"] for u in last] == [None, None, 1010, 1105]


def test_replays_green_twice_with_a_fresh_home_and_no_model_server(recorded, kc_peer,
                                                                   tmp_path):
    db, _ = recorded
    node, main = kc_peer
    for n in (1, 2):
        proc = replay(db, [str(node), str(main), "acp"], tmp_path / f"home{n}")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "the agent MATCHES the recording" in proc.stdout
        assert "9/9 requests matched" in proc.stdout and "model on loopback" in proc.stdout
        assert list((tmp_path / f"home{n}").iterdir()) == []  # the user's HOME is untouched


def journal_of(db: Path) -> Path:
    """The recorded session's folder in the journal tree kept beside the recording."""
    [main] = (db.parent / "sessions").glob("wd_*/session_*/agents/main/wire.jsonl")
    return main.parent.parent.parent


def test_replays_green_twice_answered_from_the_journal(recorded, kc_peer, tmp_path):
    """`--journal` (the sessions tree, then the session's wire.jsonl): the pinned model answers from the
    session's own journal, green twice with a fresh HOME and no model server; the answers
    carry what ACP does not show: each step's token usage and the provider's message id."""
    db, script = recorded
    node, main = kc_peer
    folder = journal_of(db)
    for n, given in enumerate((db.parent / "sessions", folder / "agents" / "main" / "wire.jsonl"),
                              1):
        served = tmp_path / f"answers{n}.json"
        proc = replay(db, [str(node), str(main), "acp"], tmp_path / f"home{n}", "--journal",
                      str(given), "--write-llm-script", str(served))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "the agent MATCHES the recording" in proc.stdout
        assert f"LLM answers from the journal {folder}/agents/main/wire.jsonl: 4 step(s) of " \
               f"session {folder.name}" in proc.stdout, proc.stdout
        answers = json.loads(served.read_text(encoding="utf-8"))
        usage = [a["stream"][-1].get("usage") for a in answers]
        assert [(u["prompt_tokens"], u["completion_tokens"]) for u in usage] == \
            [(t["usage"][0], t["usage"][1]) for t in script]  # ACP: only after each prompt
        ids = {c["id"] for a in answers for c in a["stream"]}
        assert "chatcmpl-wire-replay" not in ids and len(ids) == len(script)
        assert list((tmp_path / f"home{n}").iterdir()) == []


def test_a_journal_that_is_not_the_recordings_is_one_line(recorded, kc_peer, tmp_path):
    """Another session's journal (the committed one), a sessions tree without the recorded
    session, or the session's own journal cut after two steps: refused before any agent runs,
    exit 2, one line naming the mismatch."""
    db, _ = recorded
    node, main = kc_peer
    other = next((Path(__file__).parent / "data" / "kimicode_sessions").glob("wd_*/session_*"))
    own = journal_of(db) / "agents" / "main" / "wire.jsonl"
    lines = own.read_text(encoding="utf-8").splitlines(keepends=True)
    ends = [i for i, ln in enumerate(lines) if '"type":"step.end"' in ln]
    cut = tmp_path / "cut" / "wire.jsonl"
    cut.parent.mkdir()
    cut.write_text("".join(lines[:ends[1] + 1]), encoding="utf-8")
    for given, why in ((other, f"the journal is of session {other.name}, the recording's agent "
                               f"session is {journal_of(db).name}"),
                       (other.parent.parent, f"no journal of session {journal_of(db).name} "
                                             f"in it"),
                       (cut, "the journal has 2 model step(s), the recording 4: none for "
                             "prompt 1, answer 3")):
        proc = replay(db, [str(node), str(main), "acp"], tmp_path / "home", "--journal",
                      str(given))
        assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert f"--journal {given}: {why}" in proc.stderr, proc.stderr


def test_kimi_acp_on_path_is_kimi_code(recorded, kc_peer, tmp_path):
    db, _ = recorded
    node, main = kc_peer
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kimi = bin_dir / "kimi"
    kimi.write_text(f'#!/bin/sh\nexec "{node}" "{main}" "$@"\n', encoding="utf-8")
    kimi.chmod(kimi.stat().st_mode | stat.S_IXUSR)
    proc = replay(db, ["kimi", "acp"], tmp_path / "home",
                  path=f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the agent MATCHES the recording" in proc.stdout


def test_a_changed_permission_answer_is_red_naming_the_rejection(recorded, kc_peer, tmp_path):
    """The client answers the Bash permission `reject` instead of `approve_once` (the
    transcript edited): the agent does not run it, and the first divergence says so."""
    db, _ = recorded
    node, main = kc_peer
    transcript = tmp_path / "kc.jsonl"
    subprocess.run([str(BIN / "wire-export"), str(db), "-o", str(transcript)], check=True,
                   capture_output=True)
    lines = transcript.read_text(encoding="utf-8").splitlines()
    answered = [i for i, ln in enumerate(lines)
                if '"dir":"c2a"' in ln and '"optionId":"approve_once"' in ln]
    assert len(answered) == 1
    lines[answered[0]] = lines[answered[0]].replace('"approve_once"', '"reject"')
    transcript.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = replay(transcript, [str(node), str(main), "acp"], tmp_path / "home", "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    first = report["divergences"][0]
    assert first["where"] == "turn 1" and "tool_call_update failed" in first["message"], first
    got = json.dumps(first.get("got"))
    assert "0:call-bash-1" in got and "rejected the approval request" in got, first
    never = " ".join(d["message"] for d in report["unused_requests"])
    assert "terminal/create" in never


def test_a_changed_mode_is_red_naming_the_missing_permission(recorded, kc_peer, tmp_path):
    """The user's own Kimi Code config (kept by the pin, only the model swapped) starts the
    agent in yolo mode: it never asks for the Bash permission, the first divergence."""
    db, _ = recorded
    node, main = kc_peer
    home = tmp_path / "home"
    (home / ".kimi-code").mkdir(parents=True)
    (home / ".kimi-code" / "config.toml").write_text('default_permission_mode = "yolo"\n',
                                                     encoding="utf-8")
    proc = replay(db, [str(node), str(main), "acp"], home)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first = next(ln for ln in proc.stdout.splitlines() if ln.startswith("first divergence"))
    assert 'turn 1: expected session/request_permission "Bash", the agent did not send it ' \
        "(agent mode: yolo from the user's config (default_permission_mode); recorded: " \
        "default)" in first, proc.stdout
    assert "agent config: " + str(home / ".kimi-code" / "config.toml") + \
        ', with only the model swapped; keeps default_permission_mode = "yolo"' in proc.stdout


@pytest.mark.parametrize("old, new, why", [
    ('"0:call-read-1"', '"call-read-1"',
     "prompt 1, answer 2 (recorded frame {}): tool call id 'call-read-1' is not <turn>:<call id>"),
    ('"text":"And now?"', '"text":"/compact"',
     "prompt 2 compaction (recorded frame {}): ACP does not show what the model answered"),
])
def test_a_recording_that_cannot_pin_the_model_is_one_line(recorded, kc_peer, tmp_path, old,
                                                           new, why):
    """A tool call id without Kimi Code's `<turn>:` prefix, a `/compact` prompt (the
    transcript edited): refused before any agent runs, exit 2, one line naming the call."""
    db, _ = recorded
    node, main = kc_peer
    transcript = tmp_path / "kc.jsonl"
    subprocess.run([str(BIN / "wire-export"), str(db), "-o", str(transcript)], check=True,
                   capture_output=True)
    text = transcript.read_text(encoding="utf-8")
    assert old in text
    transcript.write_text(text.replace(old, new), encoding="utf-8")
    proc = replay(transcript, [str(node), str(main), "acp"], tmp_path / "home")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "cannot pin the LLM" in proc.stderr and "--live-llm" in proc.stderr
    frames = [ln for ln in text.splitlines() if ln.startswith(('{"dir":"c2a"', '{"dir":"a2c"'))]
    frame = next(i for i, ln in enumerate(frames, 1) if old in ln)
    assert why.format(frame) in proc.stderr, proc.stderr


def test_the_users_skills_are_linked_and_their_model_variables_dropped(recorded, tmp_path):
    """The pin's scratch HOME (no agent run): the user's skills linked read-only, the config
    the recorded model on loopback, `KIMI_MODEL_*`/`KIMI_CODE_HOME` not passed on."""
    db, _ = recorded
    home = tmp_path / "home"
    (home / ".kimi-code" / "skills" / "mine").mkdir(parents=True)
    (home / ".agents" / "skills").mkdir(parents=True)
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "KIMI_MODEL_NAME": "other",
           "KIMI_MODEL_BASE_URL": "http://example.invalid/v1", "KIMI_CODE_HOME": str(home / "x")}
    rec = load(str(db))
    pin = kimi_code.pin(rec, ["kimi", "acp"], env)
    try:
        pin.use(rec, rec.cwd, str(tmp_path))
        assert os.path.realpath(Path(pin.home) / ".agents" / "skills") == \
            str(home / ".agents" / "skills")
        assert not (Path(pin.home) / ".kimi-code" / "skills").exists()  # $KIMI_CODE_HOME's
        assert "linked from HOME: ~/.agents/skills" in pin.notes[1]
        assert not any(k.startswith("KIMI_MODEL_") or k == "KIMI_CODE_HOME" for k in pin.env)
        assert pin.env["HOME"] == pin.home and pin.env["KIMI_DISABLE_TELEMETRY"] == "1"
        config = tomllib.loads((Path(pin.home) / ".kimi-code" / "config.toml").read_text())
        assert config["default_model"] == "m"
        assert config["models"]["m"]["model"] == "stream-model-1"
        assert config["models"]["m"]["max_context_size"] == 100000
        provider = config["providers"][config["models"]["m"]["provider"]]
        assert provider["type"] == "openai" and provider["base_url"].startswith("http://127.0.0.1:")
    finally:
        pin.cleanup()
    assert not Path(pin.root).exists() and (home / ".agents" / "skills").is_dir()


def test_the_mode_is_read_from_what_the_frames_say(recorded):
    """The ACP adapter's `modes` part: the recording's mode is session/new's; a client's
    session/set_mode or set_config_option and the agent's current_mode_update change it."""
    db, _ = recorded
    rec = load(str(db))
    modes = rec.adapter.part("modes")
    frames = [(m.direction, m.obj) for m in rec.msgs]
    assert modes.mode_of(frames) == "default"
    sid = next(m.obj["result"]["sessionId"] for m in rec.msgs
               if m.direction == "a2c" and "sessionId" in (m.obj.get("result") or {}))
    assert modes.mode_of(frames + [("c2a", {"jsonrpc": "2.0", "id": 9, "method": "session/set_mode",
                                            "params": {"sessionId": sid, "modeId": "plan"}})]) == "plan"
    assert modes.mode_of(frames + [("c2a", {"jsonrpc": "2.0", "id": 9,
                                            "method": "session/set_config_option",
                                            "params": {"sessionId": sid, "configId": "mode",
                                                       "value": "auto"}})]) == "auto"
    assert modes.mode_of(frames + [("a2c", {"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": sid, "update": {"sessionUpdate": "current_mode_update",
                                     "currentModeId": "yolo"}}})]) == "yolo"
