"""One escape function for every output that shows recorded text (issue 28, item 3).

A recording whose session name, approval labels, tool names and text carry ESC, BEL, OSC-8
hyperlinks, CSI (7- and 8-bit), DEL and bidi controls (U+202E ...) goes through every reader:
wire-show (terminal and --html), -stats, -check, -query, -export, -replay in both directions,
wire-ui's API and the pytest plugin's failure text. No raw control or bidi character may reach
any of their outputs (line breaks apart).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from tests.harness.ui_server import running_ui
from wire_recorder.recorder.visible import UNSAFE, json_visible, visible

BIN = Path(sys.executable).parent
SAMPLES = Path(__file__).resolve().parents[1] / "sample_sessions"
pytest_plugins = ("pytester",)

EVIL = ("\x1b[2J\x1b[31mRED\x1b]8;;https://example.invalid\x07LINK\x1b]8;;\x07\x07"
        "\x9b31m\u202eexe.txt\u202c\u2066iso\u2069\u200f\u200e\u061c\x7f\x0d")
# what may appear: line breaks (every output has them); nothing else of UNSAFE
FORBIDDEN = UNSAFE - {"\n"}
# keys whose recorded strings get EVIL appended: names, labels, text, tool names
KEYS = {"name", "description", "action", "sender", "text", "think", "title", "message"}


def _spoil(v, key=None):
    if isinstance(v, dict):
        return {k: _spoil(x, k) for k, x in v.items()}
    if isinstance(v, list):
        return [_spoil(x, key) for x in v]
    if isinstance(v, str) and key in KEYS:
        return v + EVIL
    return v


def _raw(text: str) -> set[str]:
    return set(text) & FORBIDDEN


def _run(argv, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", **kw.pop("env", {})}
    env.pop("FORCE_COLOR", None)  # piped: any ESC in the output came from the recording
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, env=env, **kw)


@pytest.fixture(scope="module")
def evil(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("visible")
    lines = (SAMPLES / "approve_shell.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    head["session"]["name"] = "approve" + EVIL
    out = [json.dumps(head)]
    for line in lines[1:]:
        obj = json.loads(line)
        if "frame" in obj:
            obj["frame"] = _spoil(obj["frame"])
        out.append(json.dumps(obj))
    out.append(json.dumps({"dir": "stderr", "text": "Error: " + EVIL}))
    src = d / "evil.jsonl"
    src.write_text("\n".join(out) + "\n")
    db = d / "evil.db"
    res = _run([BIN / "wire-import", src, "--db", db, "-q"])
    assert res.returncode == 0, res.stderr
    return {"jsonl": src, "db": db, "dir": d}


def test_visible_replaces_every_control_and_bidi_character():
    shown = visible(EVIL)
    assert not _raw(shown) and "\n" not in shown
    assert "␛[2J" in shown and "␇" in shown and "\ufffd" in shown
    assert visible("a\nb", lines=True) == "a\nb"
    data = json.dumps({"k": EVIL}, ensure_ascii=False).encode()
    safe = json_visible(data)
    assert json.loads(safe) == {"k": EVIL}  # the same value
    assert not _raw(safe.decode())


@pytest.mark.parametrize("cmd", ["show", "show-html", "stats", "stats-json", "check",
                                 "check-json", "query", "query-csv", "query-json", "export",
                                 "export-jsonl", "bad-session"])
def test_no_raw_control_character_in_any_reader(evil, cmd, tmp_path):
    db = evil["db"]
    html = tmp_path / "r.html"
    argv = {
        "show": ["wire-show", db],
        "show-html": ["wire-show", db, "--html", html],
        "stats": ["wire-stats", db],
        "stats-json": ["wire-stats", db, "-f", "json"],
        "check": ["wire-check", db],
        "check-json": ["wire-check", db, "--json"],
        "query": ["wire-query", db, "--max-cell", "2000",
                  "SELECT name, method, msg_type, raw::VARCHAR AS raw FROM frames "
                  "JOIN sessions USING (session_id)"],
        "query-csv": ["wire-query", db, "-f", "csv", "SELECT s.name, f.raw::VARCHAR AS raw "
                      "FROM frames f JOIN sessions s USING (session_id)"],
        "query-json": ["wire-query", db, "-f", "ndjson", "SELECT s.name, f.raw::VARCHAR AS raw "
                       "FROM frames f JOIN sessions s USING (session_id)"],
        "export": ["wire-export", db],
        "export-jsonl": ["wire-export", db, "-f", "jsonl"],
        # an error message naming the recorded sessions
        "bad-session": ["wire-show", db, "--session", "nothing-like-it"],
    }[cmd]
    res = _run([BIN / argv[0], *argv[1:]])
    assert res.returncode in (0, 1, 2) and "Traceback" not in res.stderr, res.stderr
    assert not _raw(res.stdout), (cmd, _raw(res.stdout))
    assert not _raw(res.stderr), (cmd, _raw(res.stderr))
    if cmd == "show-html":
        page = html.read_text()
        assert not _raw(page)
        assert "exe.txt" in page  # the text is there, its controls escaped
    elif cmd in ("show", "stats", "check", "query"):
        assert "approve" in res.stdout
        assert "␛[2J" in res.stdout or "�" in res.stdout  # shown, not obeyed


def test_no_raw_control_character_in_wire_replay_either_direction(evil):
    # the agent direction: the recording's agent frames against a stand-in of the clean sample
    agent = [BIN / "wire-replay", SAMPLES / "approve_shell.jsonl", "--serve"]
    res = _run([BIN / "wire-replay", evil["jsonl"], "--frame-timeout", "30", "--", *agent])
    assert res.returncode == 1, res.stdout + res.stderr  # it diverged: labels, text differ
    assert "DIVERGED" in res.stdout
    assert not _raw(res.stdout) and not _raw(res.stderr), (_raw(res.stdout), _raw(res.stderr))
    res = _run([BIN / "wire-replay", evil["db"], "--json", "--", *agent])
    assert res.returncode == 1 and not _raw(res.stdout) and not _raw(res.stderr)
    assert json.loads(res.stdout)["name"] == "approve" + EVIL  # escaped, not lost
    # the client direction: --serve stands in for the agent; its report goes to stderr
    res = _run([BIN / "wire-replay", evil["db"], "--serve"])
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "approve" in res.stderr and not _raw(res.stderr), _raw(res.stderr)


def test_no_raw_control_character_in_the_pytest_plugins_failure_text(evil, pytester):
    agent = [str(BIN / "wire-replay"), str(SAMPLES / "approve_shell.jsonl"), "--serve"]
    pytester.makepyfile(f"""
import pytest

@pytest.mark.wire_replay({str(evil['jsonl'])!r}, agent={agent!r}, frame_timeout=30)
def test_replay(wire_replay):
    wire_replay()
""")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    res.assert_outcomes(failed=1)
    out = res.stdout.str() + res.stderr.str()
    assert "DIVERGED" in out and "approve" in out
    assert not _raw(out), _raw(out)


def test_no_raw_control_character_in_wire_ui_answers(evil, tmp_path):
    with running_ui(evil["db"], cache=tmp_path / "cache", timeout=120) as (get_raw, _, _):
        def get(path: str) -> bytes:
            return get_raw(path)[1]

        key = json.loads(get("/api/index"))["rows"][0]["key"]
        bodies = [get("/api/index"), get(f"/api/session?k={urllib.parse.quote(key)}"),
                  get(f"/api/items?k={urllib.parse.quote(key)}"),
                  get(f"/api/frames?k={urllib.parse.quote(key)}&seq=1&n=100")]
        for body in bodies:
            assert not _raw(body.decode()), _raw(body.decode())
        assert "exe.txt" in bodies[1].decode() + bodies[2].decode()
        assert b"const vis" in get("/assets/app.js")  # the page shows them visibly too
