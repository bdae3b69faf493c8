"""Recording trouble never breaks or stalls the relay and never loses a frame silently."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import duckdb
import pytest

from tests.harness.proxy import (
    WIRE_PROXY,
    children_of,
    db_rows,
    echo_agent_cmd,
    run_proxy,
    stream_of,
    wait_until,
)
from wire_recorder.recorder.loader import Ingest
from wire_recorder.recorder.relay import Pump
from wire_recorder.recorder.spool import C2A, SpoolReader, SpoolWriter

FRAMES = b"".join(b'{"jsonrpc":"2.0","method":"event","params":{"type":"StepBegin","payload":{"n":%d}}}\n' % i
                  for i in range(200))


def test_locked_db_records_into_a_sibling_and_says_so(tmp_path):
    db = tmp_path / "shared.db"
    holder = duckdb.connect(str(db))  # another process-like holder of the write lock
    try:
        holder.execute("CREATE TABLE other(x INT)")
        res = run_proxy(["--db", str(db), "--", *echo_agent_cmd()], FRAMES)
    finally:
        holder.close()
    assert res.returncode == 0
    assert res.stdout == FRAMES
    assert b"in use by another process" in res.stderr and b"recording this session into" in res.stderr
    siblings = [p for p in tmp_path.glob("shared.*.db")]
    assert len(siblings) == 1
    assert stream_of(str(siblings[0]), "c2a") == FRAMES
    assert not list(tmp_path.glob("*.spool"))


@pytest.mark.parametrize("bad_db", ["/etc/passwd/sub/x.db", "/proc/x.db"])
def test_unwritable_db_path_falls_back_to_the_data_folder(tmp_path, bad_db):
    env = dict(os.environ, WIRE_RECORDER_HOME=str(tmp_path / "home"))
    res = run_proxy(["--db", bad_db, "--", *echo_agent_cmd()], FRAMES, env=env)
    assert res.returncode == 0 and res.stdout == FRAMES
    assert b"recording into" in res.stderr
    (fallback,) = list((tmp_path / "home").rglob("*.db"))
    assert stream_of(str(fallback), "c2a") == FRAMES


def _proxy_with_pings(db: str, n: int):
    """Start a proxy around an echo agent, send n frames and wait until all echoed back."""
    p = subprocess.Popen([WIRE_PROXY, "-q", "--db", db, "--", *echo_agent_cmd()],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sent = []
    for i in range(n):
        line = b'{"jsonrpc":"2.0","method":"prompt","id":"%d","params":{}}\n' % i
        p.stdin.write(line)
        p.stdin.flush()
        sent.append(line)
        assert p.stdout.readline() == line
    return p, b"".join(sent)


def test_sigkill_of_the_proxy_loses_nothing_relayed(tmp_path):
    db = str(tmp_path / "s.db")
    p, sent = _proxy_with_pings(db, 300)
    loaders = children_of(p.pid)
    time.sleep(0.15)  # frames older than ~100 ms must survive
    p.send_signal(signal.SIGKILL)
    p.wait()
    # The loader notices its parent is gone, takes everything on disk and closes the file.
    assert wait_until(lambda: not list(tmp_path.glob("*.spool")), timeout=60)
    for pid in loaders:
        wait_until(lambda pid=pid: not os.path.exists(f"/proc/{pid}"), timeout=30)
    assert stream_of(db, "c2a") == sent
    assert stream_of(db, "a2c") == sent
    assert db_rows(db, "SELECT end_reason FROM sessions") == [("proxy_killed",)]


def test_sigkill_of_proxy_and_loader_is_recovered(tmp_path):
    db = str(tmp_path / "s.db")
    p, sent = _proxy_with_pings(db, 300)
    time.sleep(0.15)
    for pid in children_of(p.pid):
        if b"wire_recorder.recorder.loader" in open(f"/proc/{pid}/cmdline", "rb").read():
            os.kill(pid, signal.SIGKILL)
    p.send_signal(signal.SIGKILL)
    p.wait()
    time.sleep(0.2)
    (spool,) = list(tmp_path.glob("*.spool"))
    res = subprocess.run([WIRE_PROXY, "recover", db], capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert b"recovered session" in res.stderr
    assert not spool.exists()
    assert stream_of(db, "c2a") == sent
    assert stream_of(db, "a2c") == sent
    # Recovering again finds nothing and changes nothing.
    res = subprocess.run([WIRE_PROXY, "recover", db], capture_output=True, timeout=60)
    assert b"nothing to recover" in res.stderr
    assert db_rows(db, "SELECT count(*) FROM frames WHERE direction='c2a'") == [(300,)]


def _relay_through(writer: SpoolWriter, data: bytes) -> bytes:
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    pump = Pump("c2a", src_r, dst_w, lambda d: writer.put(C2A, d))
    pump.start()
    got = []
    t = threading.Thread(target=lambda: got.extend(iter(lambda: os.read(dst_r, 1 << 16), b"")))
    t.start()
    for i in range(0, len(data), 4096):
        os.write(src_w, data[i:i + 4096])
    os.close(src_w)
    pump.join(timeout=60)
    assert not pump.is_alive(), "the relay stalled"
    os.close(dst_w)
    t.join()
    os.close(src_r)
    os.close(dst_r)
    return b"".join(got)


def _rows_of(spool: str) -> list[tuple]:
    reader = SpoolReader(spool)
    ing = Ingest(store=None, meta=reader.meta)
    ing.feed(reader.read_available(1 << 30))
    reader.close()
    return ing.rows


def test_failing_disk_counts_and_marks_lost_frames(tmp_path, capfd):
    spool = str(tmp_path / "s.spool")
    writer = SpoolWriter(spool, {"session_id": "t", "started_wall_ns": 0})
    saved = os.dup(writer.fd)
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, writer.fd)  # every write now fails with ENOSPC
    assert _relay_through(writer, FRAMES) == FRAMES
    assert wait_until(lambda: writer.lost_frames == 200, timeout=10)
    os.dup2(saved, writer.fd)  # the disk works again
    later = b'{"jsonrpc":"2.0","method":"prompt","id":"after","params":{}}\n'
    assert _relay_through(writer, later) == later
    writer.close()
    assert "cannot write the recording" in capfd.readouterr().err
    rows = _rows_of(spool)
    gaps = [r for r in rows if r[9] == "recording_gap"]
    assert len(gaps) == 1 and '"frames":200' in gaps[0][12]
    assert [bytes(r[5]) for r in rows if r[4] == "c2a"] == [later[:-1]]


def test_stalled_disk_never_stalls_the_relay(tmp_path):
    spool = str(tmp_path / "s.spool")
    writer = SpoolWriter(spool, {"session_id": "t", "started_wall_ns": 0}, max_pending=1 << 20)
    fifo = str(tmp_path / "stall")
    os.mkfifo(fifo)
    keep_open = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # nobody drains it: writes block
    blocked = os.open(fifo, os.O_WRONLY)
    saved = os.dup(writer.fd)
    os.dup2(blocked, writer.fd)
    data = FRAMES * 200  # ~16 MB, far more than the 1 MB the writer may hold
    assert _relay_through(writer, data) == data
    assert writer.lost_bytes > 0 and writer.lost_frames > 0
    # Unblock: point the writer back at the real spool and drain the fifo so it can finish.
    drain = threading.Thread(target=lambda: [os.read(keep_open, 1 << 16) for _ in range(10000)])
    os.set_blocking(keep_open, True)
    os.dup2(saved, writer.fd)
    drain.daemon = True
    drain.start()
    writer.close()
    rows = _rows_of(spool)
    gaps = [r for r in rows if r[9] == "recording_gap"]
    assert gaps, "the loss must be marked in the recording"
    lost = sum(int(__import__("json").loads(r[12])["bytes"]) for r in gaps)
    assert lost == writer.lost_bytes


def test_live_recording_can_be_read_while_the_session_is_quiet(tmp_path):
    db = str(tmp_path / "s.db")
    p, sent = _proxy_with_pings(db, 20)

    def readable():
        try:
            return stream_of(db, "c2a") == sent
        except duckdb.IOException:  # the loader holds the file while it writes
            return False
    assert wait_until(readable, timeout=30)
    # A reader holding the file meanwhile must not lose the frames that come next.
    reader = duckdb.connect(db, read_only=True)
    more = b'{"jsonrpc":"2.0","method":"prompt","id":"late","params":{}}\n'
    p.stdin.write(more)
    p.stdin.flush()
    assert p.stdout.readline() == more
    time.sleep(0.5)
    reader.close()
    p.stdin.close()
    assert p.wait(timeout=60) == 0
    assert stream_of(db, "c2a") == sent + more
