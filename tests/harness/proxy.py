"""Helpers for tests that run the real wire-proxy as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb

BIN = Path(sys.executable).parent
WIRE_PROXY = str(BIN / "wire-proxy")

# An agent that copies stdin to stdout byte for byte and keeps a copy of what it received,
# so a test can check what really reached the agent.
ECHO_AGENT = r"""
import os, sys
out = open(sys.argv[1], "wb") if len(sys.argv) > 1 else None
while True:
    d = os.read(0, 65536)
    if not d:
        break
    if out:
        out.write(d)
    view = memoryview(d)
    while view:
        view = view[os.write(1, view):]
if out:
    out.close()
"""


def echo_agent_cmd(received_path: str | None = None) -> list[str]:
    cmd = [sys.executable, "-c", ECHO_AGENT]
    return cmd + [received_path] if received_path else cmd


def run_proxy(args: list[str], data: bytes = b"", timeout: float = 120, env=None,
              **kw) -> subprocess.CompletedProcess:
    res = subprocess.run([WIRE_PROXY, *args], input=data, capture_output=True,
                         timeout=timeout, env=env, **kw)
    settle(args, env)
    return res


def settle(args: list[str], env=None) -> None:
    """Wait until the loader of the proxy run with `args` has stored its session: the proxy
    exits before that (readers wait the same way: recorder/handoff.py)."""
    from wire_recorder.recorder.handoff import wait_for_loaders

    env = os.environ if env is None else env
    args = args[:args.index("--")] if "--" in args else args
    dbs = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--db"]
    dbs += [a[5:] for a in args if a.startswith("--db=")]
    if not dbs and env.get("WIRE_PROXY_DB"):
        dbs.append(env["WIRE_PROXY_DB"])
    if env.get("WIRE_RECORDER_HOME"):  # the data folder: the default, or the fallback
        dbs += [str(s).rsplit(".", 2)[0]
                for s in Path(env["WIRE_RECORDER_HOME"]).rglob("*.spool")]
    for db in dbs:
        wait_for_loaders(db)


def db_rows(db: str, sql: str, params=()):
    # as every reader does: a proxy exits before its loader has stored the session
    from wire_recorder.recorder.handoff import wait_for_loaders

    wait_for_loaders(db)
    con = duckdb.connect(db, read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def stream_of(db: str, direction: str) -> bytes:
    """The byte stream of one direction, rebuilt from the recorded frames."""
    from wire_recorder.recorder.model import COLUMNS, Frame
    from wire_recorder.recorder.store import resolve_blobs

    # plain duckdb (not open_store), so callers polling a live file see duckdb's lock errors
    rows = db_rows(db, f"SELECT {', '.join(COLUMNS)} FROM frames WHERE direction = ? ORDER BY seq",
                   [direction])
    frames = resolve_blobs([Frame(*r) for r in rows], db)
    return b"".join(bytes(f.raw) + (b"\n" if f.newline else b"") for f in frames)


def split_frames(stream: bytes) -> list[tuple[bytes, bool]]:
    """What the recorder must store for a byte stream: lines without their \\n, and a final
    unterminated piece flagged newline=False."""
    if not stream:
        return []
    parts = stream.split(b"\n")
    out = [(p, True) for p in parts[:-1]]
    if parts[-1]:
        out.append((parts[-1], False))
    return out


def wait_until(pred, timeout: float = 30.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


def children_of(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out.append(int(entry))
        except (OSError, IndexError, ValueError):
            pass
    return out


def loaders_of(proxy_pid: int) -> list[int]:
    """The proxy's loader processes (its children running recorder.loader)."""
    out = []
    for pid in children_of(proxy_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"wire_recorder.recorder.loader" in f.read():
                    out.append(pid)
        except OSError:
            pass
    return out
