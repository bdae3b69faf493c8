"""The proxy exits before its loader has stored the session (issue 14: exit within 50 ms of the
agent's exit and the client's EOF): the loader finishes on its own, readers wait for it, and the
recording is complete and byte-exact afterwards.

The loader is held back provably, without a hook in the product: an after-load step (the
entry-point group `wire_recorder.after_load`, declared by a distribution on PYTHONPATH) waits
until the test creates a file, after the proxy has exited. It then fails on purpose, so that its
note shows where a loader's notes go once the proxy that relayed them is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from tests.harness.proxy import (
    BIN,
    WIRE_PROXY,
    db_rows,
    echo_agent_cmd,
    split_frames,
    wait_until,
)
from tests.harness.replay import SAMPLES

HOOK = r'''
import os, time

def hold(store, session_id):
    with open(os.environ["HANDOFF_TEST_PID"], "w") as f:
        f.write(f"{os.getpid()} {os.getpgid(0)} {os.getsid(0)}")
    while not os.path.exists(os.environ["HANDOFF_TEST_GO"]):
        time.sleep(0.02)
    raise RuntimeError("released by the test")
'''

# lines of every shape the relay must keep: invalid UTF-8, CRLF, a batch, no final newline
CLIENT = b"".join(
    b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"n":"%s"}}\n' % (i, b"x" * (i % 300))
    for i in range(3000)) + b"\xff\xfe not utf-8\n" + b'{"a":1}\r\n' + b"[1,2]\n" + b"tail"
SECOND = b'{"jsonrpc":"2.0","id":1,"method":"second"}\n' * 3


def _hook_dir(tmp_path):
    d = tmp_path / "hook"
    (d / "handoff_hold-1.dist-info").mkdir(parents=True)
    (d / "handoff_hold.py").write_text(HOOK)
    (d / "handoff_hold-1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: handoff-hold\nVersion: 1\n")
    (d / "handoff_hold-1.dist-info" / "entry_points.txt").write_text(
        "[wire_recorder.after_load]\nhold = handoff_hold:hold\n")
    return d


def _while_the_loader_is_held(argv: list[str], env: dict, go, meanwhile=None) -> tuple:
    """Start argv while the loader is held in its after-load step: it says it waits and still
    runs; then `meanwhile()`, then the loader is let go (also when anything failed). Returns
    argv's (exit code, stdout, stderr)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        note = proc.stderr.readline().decode()
        assert "waiting for the loader to finish storing session" in note
        assert proc.poll() is None  # still waiting: the loader is still held
        if meanwhile is not None:
            meanwhile()
        go.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        go.touch()
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err


def test_recording_is_complete_and_byte_exact_after_a_proxy_that_exited_before_its_loader(
        tmp_path):
    from wire_recorder.recorder.handoff import handed_over

    db = str(tmp_path / "s.db")
    go, pidfile, home = tmp_path / "go", tmp_path / "loader.pid", tmp_path / "home"
    env = dict(os.environ, PYTHONPATH=str(_hook_dir(tmp_path)), WIRE_RECORDER_HOME=str(home),
               HANDOFF_TEST_GO=str(go), HANDOFF_TEST_PID=str(pidfile))
    env.pop("WIRE_RECORDER_LOADER_WAIT", None)
    # its own session, as a terminal's job: the hang-up below goes to the proxy's group only
    proxy = subprocess.Popen([WIRE_PROXY, "--db", db, "--", *echo_agent_cmd()], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    relayed, proxy_err = proxy.communicate(CLIENT, timeout=120)
    assert proxy.returncode == 0, proxy_err
    assert relayed == CLIENT  # relayed byte for byte
    # The proxy has exited and its session is not stored yet: a live loader holds the spool
    # (the after-load step cannot have let go: `go` does not exist).
    (pending,) = handed_over(db)
    assert os.path.exists(pending[1]) and not go.exists()

    # a reader waits for it, saying so; a bounded wait ends in one line, exit 2
    short = subprocess.run([str(BIN / "wire-query"), db, "SELECT count(*) FROM frames"],
                           capture_output=True, timeout=120,
                           env=dict(env, WIRE_RECORDER_LOADER_WAIT="0.3"))
    assert short.returncode == 2 and short.stdout == b""
    (line,) = short.stderr.decode().splitlines()
    assert f"the loader is still storing session {pending[0]}" in line
    # the next session on the same file, while the first is still being stored: its loader
    # waits for the first one and records into the same file, not a sibling
    second = subprocess.run([WIRE_PROXY, "-q", "--db", db, "--", *echo_agent_cmd()],
                            input=SECOND, capture_output=True, env=env, timeout=120)
    assert second.returncode == 0 and second.stdout == SECOND, second.stderr
    assert len(handed_over(db)) == 2
    held: list[int] = []  # the first loader's pid (the second one's hook writes the file later)

    def hang_up_and_interrupt() -> None:
        # the loader is out of reach of the terminal's signals to the proxy's job
        pid, pgid, sid = map(int, pidfile.read_text().split()[:3])
        held.append(pid)
        assert pgid != proxy.pid and sid not in (proxy.pid, os.getsid(0))
        for sig in (signal.SIGHUP, signal.SIGINT):
            os.kill(pid, sig)
        # (it ignores them: its note below comes after them, with its pid)
    rc, out, err = _while_the_loader_is_held(
        [str(BIN / "wire-query"), db, "SELECT direction, count(*) FROM frames WHERE direction "
         "IN ('c2a', 'a2c') GROUP BY 1 ORDER BY 1", "--format", "csv"], env, go,
        hang_up_and_interrupt)
    assert rc == 0, err
    (pid,) = held
    n = len(split_frames(CLIENT)) + 3
    assert out.decode().split() == ["direction,count_star()", f"a2c,{n}", f"c2a,{n}"]
    # complete and byte-exact, the spools gone, both sessions in the one file
    streams = _streams(db)
    assert streams[pending[0]] == {"c2a": CLIENT, "a2c": CLIENT}
    assert {"c2a": SECOND, "a2c": SECOND} in streams.values()
    assert len(streams) == 2 and sorted(os.listdir(tmp_path)) == [
        "go", "home", "hook", "loader.pid", "s.db"]
    # the failing after-load step's note, written once the proxy was gone, is in the log
    log = (home / "loader.log").read_text()
    assert f"[pid {pid}] wire-proxy: session {pending[0]}: after-load step 'hold' failed" in log


SECRET = b"sk-" + b"Q7x" * 12
WITH_SECRET = b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"api_key":"%s"}}\n' % SECRET


@pytest.mark.parametrize("command", ["wire-redact", "wire-import"])
def test_a_command_that_rewrites_the_file_waits_for_the_loader_the_proxy_left(tmp_path,
                                                                               command):
    """`wire-proxy ... && wire-redact FILE` (or `wire-import --db FILE`): the proxy is gone, its
    loader still stores the session. The command waits for it, saying so, instead of refusing
    the spool beside the file or failing on the loader's lock."""
    from wire_recorder.recorder.handoff import handed_over

    db = str(tmp_path / "s.db")
    go, pidfile = tmp_path / "go", tmp_path / "loader.pid"
    env = dict(os.environ, PYTHONPATH=str(_hook_dir(tmp_path)), HANDOFF_TEST_GO=str(go),
               HANDOFF_TEST_PID=str(pidfile), WIRE_RECORDER_HOME=str(tmp_path / "home"))
    env.pop("WIRE_RECORDER_LOADER_WAIT", None)
    proxy = subprocess.run([WIRE_PROXY, "-q", "--no-redact", "--db", db, "--",
                            *echo_agent_cmd()], input=WITH_SECRET, capture_output=True,
                           env=env, timeout=120)
    assert proxy.returncode == 0 and proxy.stdout == WITH_SECRET, proxy.stderr
    # the loader has created the file and is held in its after-load step (a command started
    # before it has created the file waits in its check that the file exists)
    assert wait_until(pidfile.exists, timeout=120, interval=0.02)
    assert os.path.exists(db) and len(handed_over(db)) == 1
    argv = ([str(BIN / "wire-redact"), db] if command == "wire-redact" else
            [str(BIN / "wire-import"), "-q", "--db", db, str(SAMPLES / "multi_step.jsonl")])
    rc, _out, err = _while_the_loader_is_held(argv, env, go)
    assert rc == 0, err
    assert handed_over(db) == []
    raws = [bytes(r[0]) for r in db_rows(db, "SELECT raw FROM frames WHERE direction = 'c2a'")]
    if command == "wire-redact":
        assert len(raws) == 1 and SECRET not in raws[0] and b"REDACTED:" in raws[0]
    else:
        sessions = db_rows(db, "SELECT source FROM sessions ORDER BY source")
        assert [s[0] for s in sessions] == ["proxy", "transcript"]
        assert WITH_SECRET.rstrip(b"\n") in raws  # stored as recorded: --no-redact


def _streams(db: str) -> dict[str, dict[str, bytes]]:
    """session id -> direction -> the bytes its frames make, blobs resolved."""
    from wire_recorder.recorder.model import COLUMNS, Frame
    from wire_recorder.recorder.store import resolve_blobs

    rows = db_rows(db, f"SELECT {', '.join(COLUMNS)} FROM frames WHERE direction IN "
                       "('c2a', 'a2c') ORDER BY session_id, seq")
    out: dict[str, dict[str, bytes]] = {}
    for f in resolve_blobs([Frame(*r) for r in rows], db):
        per = out.setdefault(f.session_id, {"c2a": b"", "a2c": b""})
        per[f.direction] += bytes(f.raw) + (b"\n" if f.newline else b"")
    return out


def test_wait_option_keeps_the_old_contract(tmp_path):
    """`--wait SECONDS`: the file is complete when the proxy returns; a bad value is one line."""
    db = str(tmp_path / "w.db")
    res = subprocess.run([WIRE_PROXY, "-q", "--wait", "60", "--db", db, "--", "cat"],
                         input=b'{"jsonrpc":"2.0","id":1,"method":"x"}\n', capture_output=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".spool")]
    import duckdb

    con = duckdb.connect(db, read_only=True)  # plain DuckDB: no handoff wait
    try:
        assert con.execute("SELECT count(*) FROM frames WHERE direction = 'c2a'").fetchone() == (1,)
    finally:
        con.close()
    bad = subprocess.run([WIRE_PROXY, "--wait", "-1", "--", "true"], capture_output=True,
                         timeout=60)
    assert bad.returncode == 2 and bad.stderr.count(b"\n") == 1 and b"Traceback" not in bad.stderr
