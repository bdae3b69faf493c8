"""Transcripts made for review, against the real kimi --wire: re-recording an unchanged agent
gives the same bytes (through wire-proxy, and with `wire-replay --update`, which then leaves the
file alone); a one-word change of the agent's text changes at most two lines; any JSON
formatting of a line reads the same; a bad line is one `FILE:LINE:` error, exit 2, and
wire-import leaves no .db behind."""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from sample_sessions.scenarios import SCENARIOS
from tests.harness.replay import Agent, record_scenario, run_cli, scripts_with
from tests.harness.wire import check_scenario
from wire_recorder.recorder.errors import TranscriptError
from wire_recorder.recorder.store import open_store
from wire_recorder.recorder.transcript import read_transcript, write_transcript

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_sessions"
WIRE_IMPORT = str(Path(sys.executable).parent / "wire-import")
# kimi itself races a StatusUpdate against the frames of an approved tool call; reject_shell's
# frames come in one order
NAME = "reject_shell"
OLD_WORD, NEW_WORD = "I will use ls next time", "I will use dir next time"


def _transcript(name: str, db: Path, out: Path, scripts=None) -> bytes:
    r = record_scenario(name, db, scripts)
    if scripts is None:
        assert check_scenario(SCENARIOS[name], r) == []
    return _write(name, db, out)


def _write(name: str, db: Path, out: Path) -> bytes:
    """The transcript of session `name` in db, written to out."""
    with open_store(str(db), read_only=True) as store:
        sid = [s for s in store.sessions() if s["name"] == name][-1]["session_id"]
        with open(out, "wb") as f:
            write_transcript(store, sid, f)
    return out.read_bytes()


def _changed_lines(a: bytes, b: bytes) -> int:
    """Lines added plus removed, as `git diff --stat` counts them."""
    diff = difflib.unified_diff(a.decode().splitlines(), b.decode().splitlines(), lineterm="", n=0)
    return sum(1 for x in diff if x[:1] in "+-" and not x.startswith(("+++", "---")))


@pytest.fixture(scope="module")
def recorded(kimi_recordings, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("review")
    rec = kimi_recordings.get([NAME])[NAME]  # recorded as _transcript does, once per test run
    assert rec.problems == []
    _write(NAME, Path(rec.copy_to(d, "a")), d / "a.jsonl")
    return d


def test_recording_twice_gives_the_same_bytes(recorded):
    first = (recorded / "a.jsonl").read_bytes()
    second = _transcript(NAME, recorded / "b.db", recorded / "b.jsonl")
    assert first == second, "".join(difflib.unified_diff(
        first.decode().splitlines(True), second.decode().splitlines(True)))
    head = first.split(b"\n", 1)[0]
    assert head.startswith(b'{"wire_transcript":2,')
    for volatile in (b"started_at", b"agent_pid", b"mono_start_ns", b'"host"', b"t_ms",
                     str(ROOT).encode(), b"/tmp/"):
        assert volatile not in first, volatile


def test_update_against_the_unchanged_agent_leaves_the_file_alone(recorded, tmp_path):
    path = tmp_path / f"{NAME}.jsonl"
    path.write_bytes((recorded / "a.jsonl").read_bytes())
    os.utime(path, (1_000_000_000, 1_000_000_000))
    before = path.read_bytes()
    with Agent(NAME, tmp_root=tmp_path) as agent:
        p = run_cli([path, "--update", *agent.cli_args()])
    out = p.stdout.decode()
    assert p.returncode == 0, out + p.stderr.decode()
    assert out.startswith(f"unchanged {path} [{NAME}]") and "not rewritten" in out
    assert path.read_bytes() == before
    assert path.stat().st_mtime == 1_000_000_000


def test_a_one_word_change_changes_at_most_two_lines(recorded, tmp_path):
    path = tmp_path / f"{NAME}.jsonl"
    before = (recorded / "a.jsonl").read_bytes()
    path.write_bytes(before)
    changed = scripts_with(NAME, OLD_WORD, NEW_WORD)
    with Agent(NAME, changed, tmp_root=tmp_path) as agent:  # its own model: the changed scripts
        p = run_cli([path, "--update", "--live-llm", *agent.cli_args()])
    out = p.stdout.decode()
    assert p.returncode == 0, out + p.stderr.decode()
    assert out.startswith(f"updated {path} [{NAME}]")
    after = path.read_bytes()
    n = _changed_lines(before, after)
    assert 1 <= n <= 4, out  # one line removed and one added: git diff --stat says 2 lines
    assert len(set(after.split(b"\n")) - set(before.split(b"\n"))) <= 2
    assert NEW_WORD.encode() in after
    # and the same change recorded afresh through wire-proxy gives the same file
    fresh = _transcript(NAME, tmp_path / "c.db", tmp_path / "c.jsonl", changed)
    assert fresh == after


def _frames_as_values(path: Path):
    session, frames = read_transcript(str(path))
    session.pop("session_id")
    return session, [(f.direction, f.method, f.newline,
                      orjson.loads(f.raw) if f.direction != "stderr" else f.raw)
                     for f in frames]


def _reformat(src: Path, dst: Path, how) -> None:
    lines = [how(json.loads(x)) for x in src.read_text().splitlines()]
    dst.write_text("\n".join(lines) + "\n")


def _reversed_keys(v):
    if isinstance(v, dict):
        return {k: _reversed_keys(v[k]) for k in reversed(list(v))}
    if isinstance(v, list):
        return [_reversed_keys(x) for x in v]
    return v


@pytest.mark.parametrize("sample", ["acp_tools.jsonl", "approve_shell.jsonl", "mcp_time.jsonl"])
def test_any_json_formatting_of_a_line_reads_the_same(sample, tmp_path):
    src = SAMPLES / sample
    want = _frames_as_values(src)
    forms = {
        "compact": lambda o: json.dumps(o, separators=(",", ":"), ensure_ascii=False),
        "default": json.dumps,  # ", " and ": ", \\u escapes
        "reordered": lambda o: json.dumps(_reversed_keys(o), indent=None, sort_keys=False),
        "sorted": lambda o: json.dumps(o, sort_keys=True, separators=(" ,", " : ")),
    }
    for name, how in forms.items():
        dst = tmp_path / f"{name}-{sample}"
        _reformat(src, dst, how)
        assert _frames_as_values(dst) == want, name
    # the compact form of a format-2 file is the file itself: frames come back byte for byte
    _, frames = read_transcript(str(src))
    _, again = read_transcript(str(tmp_path / f"compact-{sample}"))
    assert [f.raw for f in again] == [f.raw for f in frames]


def test_a_bad_line_is_one_error_with_file_and_line(tmp_path):
    lines = (SAMPLES / "acp_tools.jsonl").read_text().splitlines()
    assert len(lines) > 17
    lines[16] = '{"dir": "a2c", "frame": {"jsonrpc": "2.0", oops'
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(TranscriptError) as e:
        read_transcript(str(bad))
    assert str(e.value).startswith(f"{bad}:17: not valid JSON")
    db = tmp_path / "out.db"
    p = subprocess.run([WIRE_IMPORT, str(bad), "--db", str(db)], capture_output=True, timeout=120)
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert f"{bad}:17:" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2, err  # the error and its hint
    assert not db.exists() and not list(tmp_path.glob("out.db*"))
    # a good file before the bad one: still no .db (the import made it, so it removes it)
    p = subprocess.run([WIRE_IMPORT, str(SAMPLES / "mcp_time.jsonl"), str(bad), "--db", str(db)],
                       capture_output=True, timeout=120)
    assert p.returncode == 2 and not db.exists(), p.stderr.decode()


def test_older_formats_still_read(tmp_path):
    v1 = tmp_path / "v1.jsonl"
    v1.write_text(
        '{"wire_transcript":1,"session":{"session_id":"s1","started_at":"2026-01-02T03:04:05",'
        '"protocol":"wire","cwd":"/tmp/x","mono_start_ns":1000}}\n'
        '{"dir":"c2a","frame":{"jsonrpc":"2.0","method":"initialize","id":"i"},"t_ms":1.5}\n'
        '{"dir":"a2c","frame":{"jsonrpc":"2.0","id":"i","result":{}},"nl":false,"t_ms":2.0}\n')
    session, frames = read_transcript(str(v1))
    assert session["session_id"] == "s1" and session["cwd"] == "/tmp/x"
    assert [f.raw for f in frames] == [b'{"jsonrpc":"2.0","method":"initialize","id":"i"}',
                                      b'{"jsonrpc":"2.0","id":"i","result":{}}']
    assert frames[1].newline is False and frames[1].mono_ns == 1000 + 2_000_000
