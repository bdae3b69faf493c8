"""While the relay is busy its loader yields the CPU (the least weight the scheduler has), and it
gets its share back once the relay is quiet (recorder/cpu_share.py)."""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest

from tests.harness.proxy import WIRE_PROXY, db_rows, loaders_of, wait_until
from wire_recorder.recorder import cpu_share

pytestmark = pytest.mark.skipif(not cpu_share._in_effect(),
                                reason="no autogroups here (the loader's weight is not changed)")

FRAME = b'{"jsonrpc":"2.0","method":"event","params":{"pad":"' + b"x" * 65_000 + b'"}}\n'


def _autogroup_nice(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/autogroup") as f:
            return int(f.read().split("nice")[1])
    except (OSError, IndexError, ValueError):
        return None


def test_the_loader_yields_while_the_relay_is_busy(tmp_path):
    db = str(tmp_path / "s.db")
    p = subprocess.Popen([WIRE_PROXY, "-q", "--no-redact", "--wait", "600", "--db", db, "--",
                          "cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    got = [0]
    reader = threading.Thread(target=lambda: got.__setitem__(0, sum(
        map(len, iter(lambda: os.read(p.stdout.fileno(), 1 << 16), b"")))), daemon=True)
    reader.start()
    busy = threading.Event()
    sent = [0]

    def client() -> None:
        # ~13 MB/s, well past the writer's 4 MB/s, in steps (load, not synchronisation)
        while busy.is_set():
            for _ in range(4):
                p.stdin.write(FRAME)
                sent[0] += len(FRAME)
            p.stdin.flush()
            time.sleep(0.02)
    busy.set()
    sender = threading.Thread(target=client, daemon=True)
    sender.start()
    try:
        assert wait_until(lambda: len(loaders_of(p.pid)) == 1, timeout=120)
        (loader,) = loaders_of(p.pid)
        assert wait_until(lambda: _autogroup_nice(loader) == cpu_share.BACKGROUND_NICE,
                          timeout=120), "the loader kept its weight beside a busy relay"
    finally:
        busy.clear()
        sender.join()
    # quiet now (stdin still open): the loader's weight comes back
    assert wait_until(lambda: _autogroup_nice(loader) == 0, timeout=120)
    p.stdin.close()
    assert p.wait(timeout=300) == 0
    reader.join(timeout=60)
    assert got[0] == sent[0]
    assert wait_until(lambda: not list(tmp_path.glob("*.spool")), timeout=300)
    assert db_rows(db, "SELECT lost_frames FROM sessions") == [(0,)]


def test_a_loader_whose_proxy_is_killed_while_busy_takes_its_share_back(tmp_path):
    db = str(tmp_path / "k.db")
    p = subprocess.Popen([WIRE_PROXY, "-q", "--no-redact", "--db", db, "--", "cat"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    drain = threading.Thread(target=lambda: [None for _ in iter(
        lambda: os.read(p.stdout.fileno(), 1 << 16), b"")], daemon=True)
    drain.start()
    busy = threading.Event()
    busy.set()

    def client() -> None:
        try:
            while busy.is_set():
                for _ in range(4):
                    p.stdin.write(FRAME)
                p.stdin.flush()
                time.sleep(0.02)
        except OSError:  # the proxy is gone
            pass
    sender = threading.Thread(target=client, daemon=True)
    sender.start()
    try:
        assert wait_until(lambda: len(loaders_of(p.pid)) == 1, timeout=120)
        (loader,) = loaders_of(p.pid)
        assert wait_until(lambda: _autogroup_nice(loader) == cpu_share.BACKGROUND_NICE,
                          timeout=120)
        p.kill()  # our own child: the loader is left lowered, with nobody to raise it
        p.wait()
    finally:
        busy.clear()
        sender.join()
    assert wait_until(lambda: _autogroup_nice(loader) in (0, None), timeout=300)
    assert wait_until(lambda: not list(tmp_path.glob("*.spool")), timeout=300)
    assert db_rows(db, "SELECT end_reason FROM sessions") == [("proxy_killed",)]
