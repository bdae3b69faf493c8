"""How a session ends, against the real `kimi --wire` recorded through the real wire-proxy: a
client that ends the agent with SIGTERM (an IDE closing it) may see it exit 0 (it handled the
signal) or be ended by it (status 143), depending on what the agent was doing when the signal
came. Either recorded ending replays green whether the live agent exits 0 or is ended by the
signal; an agent that crashes on the signal instead replays red, naming both endings."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time

import duckdb
import pytest

from tests.harness.kimi_peer import KimiRun, script, text, usage
from tests.harness.replay import WIRE_PROXY, cli_json
from wire_recorder.recorder.handoff import wait_for_loaders

# A stand-in for an agent that handles SIGTERM: it runs the real kimi as its child (in its own
# process group, where the replay sends the signal) and, once kimi is gone, exits 0 after the
# signal, or with the status given as its first argument.
CLEAN_ON_TERM = """\
import signal, subprocess, sys
signal.signal(signal.SIGTERM, lambda *a: None)  # caught: reset to the default in the child
status = int(sys.argv[1])
child = subprocess.Popen(sys.argv[2:])
child.wait()
sys.exit(status if child.returncode in (0, -signal.SIGTERM) else child.returncode)
"""


def _prompt_then_terminate(argv: list[str], env: dict, cwd: str) -> None:
    """A client that prompts once, then ends the agent with SIGTERM, its input still open."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    assert proc.stdout is not None and proc.stdin is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + 300  # a bound, not a budget: kimi starts slowly on a busy box
    buf = bytearray()
    try:
        for rid, method, params in (
                ("init-1", "initialize", {"protocol_version": "1.10",
                                          "client": {"name": "endings", "version": "0"}}),
                ("p-1", "prompt", {"user_input": "Say hi"})):
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method, "id": rid,
                                         "params": params}).encode() + b"\n")
            proc.stdin.flush()
            while True:
                while b"\n" not in buf:
                    assert sel.select(max(0.0, deadline - time.monotonic())), "agent went silent"
                    chunk = os.read(proc.stdout.fileno(), 65536)
                    assert chunk, "the agent closed its output"
                    buf += chunk
                i = buf.index(b"\n")
                line, buf = bytes(buf[:i]), buf[i + 1:]
                if json.loads(line).get("id") == rid:
                    break
        proc.send_signal(signal.SIGTERM)  # to wire-proxy, which forwards it and records it
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def terminated(kimi_exe, tmp_path_factory) -> dict[str, str]:
    """One session ended by its client's SIGTERM, as two files: one saying the agent exited 0
    on it, one saying the signal ended it (what wire-proxy records for each)."""
    d = tmp_path_factory.mktemp("endings")
    db = str(d / "term.db")
    run = KimiRun.create([script(usage(50, 5), text("Hi."))], tmp_root=d)
    try:
        _prompt_then_terminate([WIRE_PROXY, "-q", "--db", db, "--name", "term", "--",
                                *run.argv()], run.env(), str(run.workdir))
    finally:
        run.cleanup()
    wait_for_loaders(db, limit=600)  # the proxy's loader stores the session after it exits
    out = {}
    for name, code, sig in (("clean", 0, None), ("killed", 143, "SIGTERM")):
        path = str(d / f"{name}.db")
        shutil.copy(db, path)
        with duckdb.connect(path) as con:
            con.execute("UPDATE sessions SET exit_code = ?, exit_signal = ?", [code, sig])
        out[name] = path
    with duckdb.connect(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM frames WHERE kind = 'lifecycle' "
                           "AND method = 'signal'").fetchone() == (1,)
    return out


def _replay(db: str, agent: list[str], tmp_path) -> tuple[int, dict]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    return cli_json([db, "--cwd", str(work), "--frame-timeout", "60", "--", *agent],
                    env={"HOME": str(home)}, timeout=600)


@pytest.mark.parametrize("recorded,live", [("clean", "killed"), ("killed", "clean")])
def test_a_sigterm_ended_session_replays_green_whichever_way_the_agent_ends(
        terminated, recorded, live, kimi_exe, tmp_path):
    agent = [str(kimi_exe), "--wire"]
    if live == "clean":
        wrapper = tmp_path / "clean_on_term.py"
        wrapper.write_text(CLEAN_ON_TERM)
        agent = [sys.executable, str(wrapper), "0", *agent]
    code, report = _replay(terminated[recorded], agent, tmp_path)
    assert report["stats"].get("signals_sent") == 1, report
    if live == "clean":
        assert report["agent_exit_code"] == 0
    else:  # kimi itself: ended by the signal (or, had it handled it, exited 0)
        assert report["agent_exit_code"] in (0, -signal.SIGTERM)
    assert code == 0 and report["ok"], [report["divergences"], report["notes"]]


def test_an_agent_that_crashes_on_the_signal_replays_red(terminated, kimi_exe, tmp_path):
    wrapper = tmp_path / "crash_on_term.py"
    wrapper.write_text(CLEAN_ON_TERM)
    code, report = _replay(terminated["clean"], [sys.executable, str(wrapper), "3",
                                                 str(kimi_exe), "--wire"], tmp_path)
    assert code == 1 and not report["ok"] and report["agent_exit_code"] == 3
    (exit_div,) = [d for d in report["divergences"] if d["kind"] == "exit_code"]
    assert "exited with code 3 after the replayed SIGTERM" in exit_div["message"]
    assert "recorded: exited with code 0 on the client's SIGTERM (ended by SIGTERM would " \
        "match too)" in exit_div["message"]
