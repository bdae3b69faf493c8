"""Exit codes, signals, stdin/stdout lifecycle and bad input of the real wire-proxy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.harness.proxy import WIRE_PROXY, db_rows, run_proxy


def lifecycle(db: str) -> list[tuple]:
    return db_rows(db, "SELECT method, payload FROM frames WHERE direction = 'proxy' ORDER BY seq")


@pytest.mark.parametrize("code", [0, 3, 77])
def test_exits_with_the_agent_exit_code(tmp_path, code):
    db = str(tmp_path / "s.db")
    res = run_proxy(["-q", "--db", db, "--", "sh", "-c", f"cat; exit {code}"], b"x\n")
    assert res.returncode == code
    assert res.stdout == b"x\n"
    assert db_rows(db, "SELECT exit_code, end_reason FROM sessions") == [(code, "agent_exit")]


def test_agent_killed_by_signal_gives_128_plus_n(tmp_path):
    db = str(tmp_path / "s.db")
    res = run_proxy(["-q", "--db", db, "--", "sh", "-c", "kill -KILL $$"])
    assert res.returncode == 128 + signal.SIGKILL
    assert db_rows(db, "SELECT exit_code, exit_signal FROM sessions") == [(137, "SIGKILL")]


# Blocked, then taken by sigtimedwait: a handler and a sleep would race (a signal landing
# after "ready" was written but before the sleep's system call waits for the sleep to end: seen
# with gdb, the handler's flag set in an agent asleep). "ready" alone says it started with none
# of them blocked.
TRAP_AGENT = r"""
import signal, sys
wanted = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
before = signal.pthread_sigmask(signal.SIG_BLOCK, wanted) & wanted
sys.stdout.write("ready\n" if not before else f"ready, started with {sorted(before)} blocked\n")
sys.stdout.flush()
got = signal.sigtimedwait(wanted, 60)
if got is not None:
    sys.stdout.write(f"got {signal.Signals(got.si_signo).name}\n"); sys.stdout.flush()
    sys.exit(40 + got.si_signo)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signals_are_forwarded_to_the_agent(tmp_path, sig):
    db = str(tmp_path / "s.db")
    p = subprocess.Popen([WIRE_PROXY, "-q", "--db", db, "--", sys.executable, "-c", TRAP_AGENT],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"
    p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        # Seen once in CI, never reproduced: say where the signal stopped before failing.
        state = _signal_state(p.pid)
        p.kill()
        p.communicate()
        pytest.fail(f"{sig.name} did not reach the agent; signal state:\n{state}")
    assert out == f"got {sig.name}\n".encode()
    assert p.returncode == 40 + sig
    events = [m for m, _ in lifecycle(db)]
    # (the client's EOF, closed by communicate(), may be recorded on either side of the exit)
    assert [e for e in events if e != "client_eof"][-1] == "exit"
    assert events.index("signal") < events.index("exit")


def test_client_eof_closes_agent_stdin(tmp_path):
    db = str(tmp_path / "s.db")
    # `cat` only exits when its stdin closes: the proxy must pass the client's EOF on.
    res = run_proxy(["-q", "--db", db, "--", "cat"], b"a\nb", timeout=30)
    assert res.returncode == 0 and res.stdout == b"a\nb"
    assert [m for m, _ in lifecycle(db)][:2] == ["spawn", "client_eof"]


def test_stderr_is_relayed_and_recorded(tmp_path):
    db = str(tmp_path / "s.db")
    script = "import sys; sys.stderr.buffer.write(b'warn \\xff\\n partial'); print('out')"
    res = run_proxy(["-q", "--db", db, "--", sys.executable, "-c", script])
    assert res.returncode == 0
    assert res.stderr == b"warn \xff\n partial"
    assert res.stdout == b"out\n"
    rows = db_rows(db, "SELECT raw, newline, kind FROM frames WHERE direction='stderr' ORDER BY seq")
    assert [(bytes(r), nl, k) for r, nl, k in rows] == [(b"warn \xff", True, "stderr"),
                                                     (b" partial", False, "stderr")]


def test_client_hangup_keeps_recording(tmp_path):
    db = str(tmp_path / "s.db")
    # The client closes its end of our stdout at once; the agent's output must still be recorded.
    p = subprocess.Popen([WIRE_PROXY, "-q", "--db", db, "--", sys.executable, "-c",
                          "import time\nfor i in range(50): print(i, flush=True); time.sleep(0.002)"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    p.wait(timeout=60)
    assert p.returncode == 0
    rows = db_rows(db, "SELECT raw FROM frames WHERE direction='a2c' ORDER BY seq")
    assert [bytes(r) for (r,) in rows] == [str(i).encode() for i in range(50)]
    assert "client_hangup" in [m for m, _ in lifecycle(db)]


def test_session_row_has_name_tags_command_and_counts(tmp_path):
    db = str(tmp_path / "s.db")
    res = run_proxy(["-q", "--db", db, "--name", "demo", "--tag", "team=ide", "--tag", "k=v=w",
                     "--", "cat"], b'{"jsonrpc":"2.0","method":"prompt","id":"p","params":{}}\n')
    assert res.returncode == 0
    (row,) = db_rows(db, "SELECT name, tags->>'team', tags->>'k', command->>'$[0]', cwd, protocol, "
                         "frame_count, proxy_version FROM sessions")
    assert row == ("demo", "ide", "v=w", "cat", os.getcwd(), "wire", 2, "0.1.0")


def test_db_file_is_readable_by_owner_only(tmp_path):
    db = tmp_path / "s.db"
    run_proxy(["-q", "--db", str(db), "--", "true"])
    assert db.stat().st_mode & 0o777 == 0o600


def test_default_location_is_one_file_per_session(tmp_path):
    env = dict(os.environ, WIRE_RECORDER_HOME=str(tmp_path / "home"))
    env.pop("WIRE_PROXY_DB", None)
    for _ in range(2):
        assert run_proxy(["-q", "--", "true"], env=env).returncode == 0
    files = sorted((tmp_path / "home" / "sessions").rglob("*.db"))
    assert len(files) == 2


def test_env_var_chooses_the_db(tmp_path):
    db = tmp_path / "env.db"
    env = dict(os.environ, WIRE_PROXY_DB=str(db))
    assert run_proxy(["-q", "--", "true"], env=env).returncode == 0
    assert db_rows(str(db), "SELECT count(*) FROM sessions") == [(1,)]


@pytest.mark.parametrize("args, needle, code", [
    ([], "no agent command given", 2),
    (["--"], "no agent command given", 2),
    (["--bogus", "--", "cat"], "unknown option --bogus", 2),
    (["--db"], "option --db needs a value", 2),
    (["--tag", "novalue", "--", "cat"], "is not KEY=VALUE", 2),
    (["--", "/no/such/agent-binary"], "cannot start '/no/such/agent-binary'", 127),
    (["--db", "/", "--", "cat"], "is a directory", 2),
    (["--db", "/etc/passwd", "--", "cat"], "is not a DuckDB file", 2),
    (["recover", "/no/such/x.db"], "no such recording", 2),
    (["recover"], "recover needs a .db or .spool path", 2),
])
def test_bad_input_gives_one_clear_line(args, needle, code):
    res = run_proxy(args, timeout=30)
    assert res.returncode == code
    lines = res.stderr.decode().splitlines()
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("wire-proxy: ")
    assert res.stdout == b""


def test_help_and_version():
    res = run_proxy(["--help"])
    assert res.returncode == 0 and b"usage: wire-proxy" in res.stdout
    assert run_proxy(["--version"]).stdout.startswith(b"wire-proxy ")
    res = run_proxy(["recover", "--help"])  # not taken for a recording named --help
    assert res.returncode == 0 and b"wire-proxy recover PATH" in res.stdout, res.stderr


def test_spawn_happens_before_heavy_imports(tmp_path):
    # The relay process must not import duckdb/pydantic/typer/rich (start-up cost); the loader
    # process does that work.
    db = str(tmp_path / "s.db")
    script = ("import os, sys; pp = os.getppid(); "
              "m = open(f'/proc/{pp}/maps').read(); "
              "print('duckdb' in m, 'pydantic_core' in m)")
    res = run_proxy(["-q", "--db", db, "--", sys.executable, "-c", script])
    assert res.stdout == b"False False\n"


def _signal_state(pid: int) -> str:
    """Per thread of `pid` and of its children: masks, pending sets and what it waits in."""
    lines = [f"test process {_status_fields(os.getpid(), os.getpid())}"]
    try:
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        children = []
    for proc in [str(pid), *children]:
        try:
            tids = os.listdir(f"/proc/{proc}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                comm = open(f"/proc/{proc}/task/{tid}/comm").read().strip()
                wchan = open(f"/proc/{proc}/task/{tid}/wchan").read().strip()
            except OSError:
                continue
            lines.append(f"{proc}/{tid} {comm} wchan={wchan} {_status_fields(int(proc), int(tid))}")
    return "\n".join(lines)


def _status_fields(pid: int, tid: int) -> str:
    try:
        status = open(f"/proc/{pid}/task/{tid}/status").read()
    except OSError:
        return "gone"
    keep = ("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
    return " ".join(line.replace("\t", "") for line in status.splitlines() if line.startswith(keep))


def _blocked_signals(status: str) -> int:
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:")),
               16)


def test_only_the_main_thread_takes_forwarded_signals(tmp_path):
    """The kernel hands a process-directed signal to any thread that does not block it; if a
    relay thread took it, the proxy's handler would wait for the agent to exit on its own. So
    every thread but the main one blocks the forwarded signals (read from /proc, no timing)."""
    db = str(tmp_path / "s.db")
    p = subprocess.Popen([WIRE_PROXY, "-q", "--db", db, "--", sys.executable, "-c", TRAP_AGENT],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # every relay thread runs by now, and the agent was started with none of them blocked
        assert p.stdout.readline() == b"ready\n"
        tasks = os.listdir(f"/proc/{p.pid}/task")
        assert len(tasks) >= 4, tasks  # main, spool writer, three pumps
        wanted = sum(1 << (s - 1) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
        # The main thread blocks them itself for the instant it starts a thread (the loader's
        # notes reader may start after "ready"): a signal sent then waits, pending, for it. So
        # its mask is read until it is seen open; it must not stay closed.
        for _ in range(3000):
            with open(f"/proc/{p.pid}/task/{p.pid}/status") as f:
                main_blocked = _blocked_signals(f.read())
            if main_blocked & wanted == 0:
                break
            time.sleep(0.01)
        assert main_blocked & wanted == 0, f"main thread blocks {main_blocked:#x}"
        for tid in os.listdir(f"/proc/{p.pid}/task"):
            if int(tid) == p.pid:
                continue
            with open(f"/proc/{p.pid}/task/{tid}/status") as f:
                blocked = _blocked_signals(f.read())
            assert blocked & wanted == wanted, f"thread {tid} takes forwarded signals"
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)


LEAVING_AGENT = r"""
import os, subprocess, sys
# a child that keeps only the agent's stderr open for a while after the agent exits
subprocess.Popen(["sleep", "1.5"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
sys.stdout.write(f"{os.getpid()}\n"); sys.stdout.flush()
"""


def test_client_frames_after_the_agent_exited_are_recorded_as_such(tmp_path):
    db = str(tmp_path / "s.db")
    p = subprocess.Popen([WIRE_PROXY, "-q", "--db", db, "--", sys.executable, "-c",
                          LEAVING_AGENT],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    agent = int(p.stdout.readline())
    while os.path.exists(f"/proc/{agent}"):  # reaped by the proxy: the agent is gone
        time.sleep(0.01)
    late = b'{"jsonrpc":"2.0","method":"session/cancel","params":{}}\n' * 2
    p.stdin.write(late)
    p.stdin.close()
    assert p.wait(timeout=60) == 0
    rows = db_rows(db, "SELECT raw, anomaly FROM frames WHERE direction = 'c2a' ORDER BY seq")
    assert [bytes(r) for r, _ in rows] == late.splitlines()
    assert {a for _, a in rows} == {"sent after the agent exited (never delivered)"}
