"""Endings and chains against the real `kimi --wire`, recorded through the real wire-proxy: a
session that resumes an earlier one of the same file (`-S ID`, the id kimi made up for the first)
and that its client ended with SIGTERM replays green from the file alone — its origin replayed
first in the same HOME and work dir, the signal sent at the same point, the exit status
compared with it — and red once the origin is not in the file."""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import time

import duckdb
import pytest

from tests.harness.kimi_peer import KimiRun, script, shell, text, usage
from tests.harness.replay import WIRE_PROXY, cli_json, session_ids
from tests.harness.scripted_client import Approval, ClientPlan, Prompt, run_client
from wire_recorder.replay import ReplayOptions, replay_session
from wire_recorder.replay.report import hints

SCRIPTS = [script(usage(100, 10), shell("call-1", "echo first")),
           script(usage(140, 7), text("It ran."))]


def _line(proc: subprocess.Popen, sel: selectors.BaseSelector, deadline: float,
          buf: bytearray) -> dict:
    assert proc.stdout is not None
    while b"\n" not in buf:
        assert sel.select(max(0.0, deadline - time.monotonic())), "the agent went silent"
        chunk = os.read(proc.stdout.fileno(), 65536)
        assert chunk, "the agent closed its output"
        buf += chunk
    i = buf.index(b"\n")
    line = bytes(buf[:i])
    del buf[:i + 1]
    return json.loads(line)


def _resume_and_terminate(argv: list[str], env: dict, cwd: str) -> list[dict]:
    """A client that prompts once, then ends the agent with SIGTERM (an IDE closing it), its
    input still open."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stdin is not None
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + 90
    buf = bytearray()
    seen = []
    try:
        for rid, method, params in (
                ("init-1", "initialize", {"protocol_version": "1.10",
                                          "client": {"name": "chains", "version": "0"}}),
                ("p-1", "prompt", {"user_input": "Run it again"})):
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method, "id": rid,
                                         "params": params}).encode() + b"\n")
            proc.stdin.flush()
            while True:
                m = _line(proc, sel, deadline, buf)
                seen.append(m)
                if m.get("id") == rid:
                    break
        proc.send_signal(signal.SIGTERM)  # to wire-proxy, which forwards it and records it
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return seen


@pytest.fixture(scope="module")
def chain_db(kimi_exe, tmp_path_factory):
    d = tmp_path_factory.mktemp("chain")
    db = str(d / "chain.db")
    run = KimiRun.create(SCRIPTS, tmp_root=d)  # no -S: kimi makes the first session's id up
    try:
        proxy = [WIRE_PROXY, "-q", "--db", db, "--name"]
        first = run_client([*proxy, "first", "--", *run.argv()],
                           ClientPlan(prompts=[Prompt("Run it")], approvals=[Approval.for_session()]),
                           env=run.env(), cwd=run.workdir, timeout=120)
        found = re.search(rb"kimi -r (\S+)", first.stderr)
        assert found, first.stderr.decode()
        kimi_id = found.group(1).decode()
        seen = _resume_and_terminate([*proxy, "second", "--", *run.argv(extra=["-S", kimi_id])],
                                     run.env(), str(run.workdir))
    finally:
        run.cleanup()
    # resumed: the approval given for the session in the first one still holds
    assert not [m for m in seen if m.get("method") == "request"], seen
    assert any(m.get("id") == "p-1" for m in seen)
    return db


def test_a_resumed_session_ended_by_sigterm_replays_green_from_the_file(chain_db, tmp_path,
                                                                       kimi_exe):
    ids = session_ids(chain_db)
    with duckdb.connect(chain_db, read_only=True) as con:
        assert con.execute("SELECT exit_signal FROM sessions WHERE name = 'second'").fetchone() \
            == ("SIGTERM",)
    # the user's command only, a fresh HOME, no scripts, no config: the recording says the rest
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    argv = [str(kimi_exe), "--wire"]
    code, report = cli_json([chain_db, "--session", ids["second"], "--cwd", work,
                             "--frame-timeout", "60", "--", *argv], env={"HOME": str(home)},
                            timeout=300)
    assert code == 0 and report["ok"], [report["divergences"], report["notes"],
                                        [o["divergences"] for o in report["origins"]]]
    assert [o["name"] for o in report["origins"]] == ["first"]
    assert report["stats"].get("signals_sent") == 1
    assert report["agent_exit_code"] == -signal.SIGTERM
    # the live commands got the recorded session id, nothing else from the recording
    with duckdb.connect(chain_db, read_only=True) as con:
        (cmd,) = con.execute("SELECT command FROM sessions WHERE name = 'second'").fetchone()
    kimi_id = json.loads(cmd)[-1]
    assert report["command"] == [*argv, "-S", kimi_id]
    assert report["origins"][0]["command"] == [*argv, "-S", kimi_id]
    # without its origin in the file the same session replays red: the approval is asked
    alone = tmp_path / "alone.db"
    shutil.copy(chain_db, alone)
    with duckdb.connect(str(alone)) as con:
        for table in ("frames", "sessions"):
            con.execute(f"DELETE FROM {table} WHERE session_id = ?", [ids["first"]])
    fresh = KimiRun.create(SCRIPTS, tmp_root=tmp_path)
    try:
        red = replay_session(str(alone), fresh.argv(), env=fresh.env(), cwd=str(fresh.workdir),
                             options=ReplayOptions(frame_timeout=60))
    finally:
        fresh.cleanup()
    assert not red.ok and not red.origins
    # and says why: the recorded command resumed a session nothing here recorded
    assert any(f"resumes session {kimi_id} (-S)" in h and "--origin" in h for h in hints(red)), \
        hints(red)
    assert any(d.kind == "unmatched_request" and "ApprovalRequest Shell" in d.message
               for d in red.divergences), [d.headline() for d in red.divergences]


def test_the_resumed_session_is_picked_and_exported_with_its_origin(chain_db, tmp_path):
    """The file of a resumed Wire session (kimi -S with the id kimi made up for the first) needs
    no --session, and wire-export writes the first session beside the second's transcript."""
    from wire_recorder.replay.recording import load

    assert load(chain_db).name == "second"
    out = tmp_path / "second.jsonl"
    exp = subprocess.run([WIRE_PROXY.replace("wire-proxy", "wire-export"), chain_db, "--session",
                          "second", "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert exp.returncode == 0, exp.stderr
    origin = tmp_path / "second.origin.jsonl"
    assert origin.is_file()
    header = json.loads(origin.read_text().splitlines()[0])
    assert header["session"]["name"] == "first"
    assert "-S" not in header["session"]["command"]  # the first session resumed nothing
