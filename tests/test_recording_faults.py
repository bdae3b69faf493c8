"""Recording trouble never breaks or stalls the relay and never loses a frame silently."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from tests.harness.proxy import (
    WIRE_PROXY,
    children_of,
    db_rows,
    echo_agent_cmd,
    loaders_of,
    run_proxy,
    stream_of,
    wait_until,
)
from wire_recorder.recorder.loader import Ingest
from wire_recorder.recorder.relay import Pump
from wire_recorder.recorder.spool import (
    A2C,
    C2A,
    SpoolReader,
    SpoolWriter,
    lock_held,
    read_counters,
)

FRAMES = b"".join(b'{"jsonrpc":"2.0","method":"event","params":{"type":"StepBegin","payload":{"n":%d}}}\n' % i
                  for i in range(200))


def test_locked_db_records_into_a_sibling_and_says_so(tmp_path):
    db = tmp_path / "shared.db"
    holder = duckdb.connect(str(db))  # another process-like holder of the write lock
    try:
        holder.execute("CREATE TABLE other(x INT)")
        # --wait: the loader's note comes after the proxy's exit otherwise (to loader.log)
        res = run_proxy(["--wait", "60", "--db", str(db), "--", *echo_agent_cmd()], FRAMES)
    finally:
        holder.close()
    assert res.returncode == 0
    assert res.stdout == FRAMES
    assert b"in use by another process" in res.stderr and b"recording this session into" in res.stderr
    siblings = [p for p in tmp_path.glob("shared.*.db")]
    assert len(siblings) == 1
    assert stream_of(str(siblings[0]), "c2a") == FRAMES
    assert not list(tmp_path.glob("*.spool"))


def test_the_sibling_note_reaches_the_stderr_of_a_short_session(tmp_path):
    """Without --wait too: a session that ends before its loader has chosen the sibling file
    (issue 28: the note reached only loader.log) waits for that choice and says it."""
    db = tmp_path / "shared.db"
    holder = duckdb.connect(str(db))
    try:
        holder.execute("CREATE TABLE other(x INT)")
        res = run_proxy(["--db", str(db), "--", *echo_agent_cmd()], FRAMES)
    finally:
        holder.close()
    assert res.returncode == 0 and res.stdout == FRAMES
    (sibling,) = tmp_path.glob("shared.*.db")
    assert f"recording this session into {sibling} instead".encode() in res.stderr, res.stderr
    assert wait_until(lambda: not list(tmp_path.glob("*.spool")), timeout=120)
    assert stream_of(str(sibling), "c2a") == FRAMES


@pytest.mark.parametrize("bad_db", ["/etc/passwd/sub/x.db", "/proc/x.db"])
def test_unwritable_db_path_falls_back_to_the_data_folder(tmp_path, bad_db):
    env = dict(os.environ, WIRE_RECORDER_HOME=str(tmp_path / "home"))
    res = run_proxy(["--db", bad_db, "--", *echo_agent_cmd()], FRAMES, env=env)
    assert res.returncode == 0 and res.stdout == FRAMES
    assert b"recording into" in res.stderr
    (fallback,) = list((tmp_path / "home").rglob("*.db"))
    assert stream_of(str(fallback), "c2a") == FRAMES


def _proxy_with_pings(db: str, n: int, *options: str):
    """Start a proxy around an echo agent, send n frames and wait until all echoed back."""
    p = subprocess.Popen([WIRE_PROXY, "-q", *options, "--db", db, "--", *echo_agent_cmd()],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sent = []
    for i in range(n):
        line = b'{"jsonrpc":"2.0","method":"prompt","id":"%d","params":{}}\n' % i
        p.stdin.write(line)
        p.stdin.flush()
        sent.append(line)
        assert p.stdout.readline() == line
    return p, b"".join(sent)


def _spooled(folder: Path) -> dict[int, int]:
    """Data bytes per stream in the folder's spool so far."""
    (spool,) = folder.glob("*.spool")
    reader = SpoolReader(str(spool))
    got = {C2A: 0, A2C: 0}
    while records := reader.read_available():
        for r in records:
            if r.stream in got:
                got[r.stream] += len(r.data)
    reader.close()
    return got


def test_sigkill_of_the_proxy_loses_nothing_relayed(tmp_path):
    db = str(tmp_path / "s.db")
    p, sent = _proxy_with_pings(db, 300)
    loaders = children_of(p.pid)
    # Killed once the writer has them on disk (it writes every 20 ms; a busy machine can hold
    # it back longer, and what the kill takes from memory is test_sigkill_mid_burst's part).
    assert wait_until(lambda: _spooled(tmp_path) == {C2A: len(sent), A2C: len(sent)},
                      timeout=600)
    p.send_signal(signal.SIGKILL)
    p.wait()
    # The loader notices its parent is gone, takes everything on disk and closes the file.
    assert wait_until(lambda: not list(tmp_path.glob("*.spool")), timeout=60)
    for pid in loaders:
        wait_until(lambda pid=pid: not os.path.exists(f"/proc/{pid}"), timeout=30)
    assert stream_of(db, "c2a") == sent
    assert stream_of(db, "a2c") == sent
    assert db_rows(db, "SELECT end_reason FROM sessions") == [("proxy_killed",)]


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
    """The rows the loader stores for a spool, its end included (the relay's counters set
    against what the spool holds)."""
    reader = SpoolReader(spool)
    ing = Ingest(store=None, meta=reader.meta)
    ing.feed(reader.read_available(1 << 30, final=True))
    reader.close()
    ing.reconcile(read_counters(spool))
    for s in (C2A,):
        ing._flush_partial(s, 0, 0)
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


def _spool_with_a_lost_chunk(path: str, before: bytes, lost: bytes, after: bytes) -> None:
    """A spool whose relay moved before + lost + after (c2a) while the disk failed for `lost`."""
    writer = SpoolWriter(path, {"session_id": "t", "started_wall_ns": 0})
    writer.put(C2A, before)
    # written, not only taken off the queue: the spool keeps a chunk's bytes as they came
    assert wait_until(lambda: before in Path(path).read_bytes(), timeout=10)
    saved = os.dup(writer.fd)
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, writer.fd)
    writer.put(C2A, lost)
    assert wait_until(lambda: writer.lost_chunks == 1, timeout=10)
    os.dup2(saved, writer.fd)
    os.close(saved)
    os.close(full)
    writer.put(C2A, after)
    writer.close()


@pytest.mark.parametrize("before, lost, after, rows", [
    # the end of frame B is lost: B's start is a row, the gap counts C only
    (b"A\nB-st", b"art\nC\n", b"D\n", [b"A", b"B-st", b"D"]),
    # the middle of frame B is lost: B is one row, the gap counts no frame
    (b"A\nB1", b"B2", b"B3\nC\n", [b"A", b"B1B3", b"C"]),
])
def test_a_frame_cut_by_a_gap_is_counted_once(tmp_path, capfd, before, lost, after, rows):
    """Per direction, rows + the gap rows' frames == frames relayed, exactly (issue 28: the
    frame cut mid-write by a full disk was counted both as stored and in the gap)."""
    spool = str(tmp_path / "s.spool")
    _spool_with_a_lost_chunk(spool, before, lost, after)
    stored = _rows_of(spool)
    c2a = [r for r in stored if r[4] == "c2a"]
    assert [bytes(r[5]) for r in c2a] == rows
    gaps = [json.loads(r[12]) for r in stored if r[9] == "recording_gap"]
    relayed = (before + lost + after).count(b"\n")
    assert len(c2a) + sum(g["frames"] for g in gaps) == relayed
    (cut,) = [r for r in c2a if bytes(r[5]).startswith(b"B")]
    assert "recording gap" in cut[13]  # parse_error: says what the gap took


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
    lost = sum(int(json.loads(r[12])["bytes"]) for r in gaps)
    # what the fifo swallowed never reached the spool either: marked like the dropped chunks
    assert lost >= writer.lost_bytes
    recorded = [r for r in rows if r[4] == "c2a"]
    assert lost + sum(len(r[5]) + r[6] for r in recorded) == len(data)
    lost_frames = sum(int(json.loads(r[12])["frames"]) for r in gaps)
    assert lost_frames + len(recorded) == data.count(b"\n")  # each frame counted once


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


# -- faults through the real proxy, each loss counted against what the recording marks ----------

def _gaps(db: str, direction: str) -> list[dict]:
    return [json.loads(p) for (p,) in db_rows(
        db, "SELECT payload FROM frames WHERE method = 'recording_gap' ORDER BY seq")
        if json.loads(p)["stream"] == direction]


def _whole_frames(db: str, direction: str) -> list[bytes]:
    """Frames recorded whole: with their newline and no recording-gap note."""
    rows = db_rows(db, "SELECT raw FROM frames WHERE direction = ? AND newline AND "
                       "coalesce(parse_error, '') NOT LIKE 'recording gap%' ORDER BY seq",
                   [direction])
    return [bytes(r) for (r,) in rows]


def _newline_rows(db: str, direction: str) -> int:
    return db_rows(db, "SELECT count(*) FROM frames WHERE direction = ? AND newline",
                   [direction])[0][0]


def _rows(db: str, direction: str) -> int:
    return db_rows(db, "SELECT count(*) FROM frames WHERE direction = ?", [direction])[0][0]


def _cut(gaps: list[dict]) -> int:
    """Frames whose end is in a gap and whose start is stored as a row (counted there)."""
    return sum(1 for g in gaps if g.get("cut_frame_stored"))


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory):
    """A 24 MB tmpfs: a disk that can really be filled (we run as root in CI)."""
    where = tmp_path_factory.mktemp("small-disk")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs",
                          str(where)], capture_output=True)
    if res.returncode != 0:
        why = f"cannot mount a tmpfs here ({res.stderr.decode().strip() or res.returncode})"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    yield where
    if subprocess.run(["umount", str(where)], capture_output=True).returncode:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(folder) -> str:
    path = os.path.join(folder, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    block = b"\0" * 65536
    try:
        while True:
            try:
                os.write(fd, block)
            except OSError:
                if len(block) == 1:
                    break
                block = block[:len(block) // 2]
    finally:
        os.close(fd)
    return path


KB_FRAME = b'{"jsonrpc":"2.0","method":"event","params":{"n":%d,"pad":"' + b"y" * 1000 + b'"}}\n'


def test_full_disk_transient_then_permanent_every_loss_marked(small_disk):
    """A disk that fills, frees and fills again until the session ended: the relay stays exact,
    and per direction the frames recorded whole plus those counted in gap rows are exactly the
    frames relayed; the loss while the disk stayed full is marked once the DB can be written."""
    db = str(small_disk / "full.db")
    p = subprocess.Popen([WIRE_PROXY, "-q", "--wait", "600", "--db", db, "--",
                          *echo_agent_cmd()],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sent: list[bytes] = []
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.extend(iter(p.stdout.readline, b"")),
                              daemon=True)
    reader.start()

    def batch(a: int, b: int) -> None:
        frames = [KB_FRAME % i for i in range(a, b)]
        sent.extend(frames)
        p.stdin.write(b"".join(frames))
        p.stdin.flush()
        assert wait_until(lambda: len(got) >= len(sent), timeout=120)

    batch(0, 1000)

    def stored() -> bool:  # the loader has made the DB and stored the first batch
        try:
            return stream_of(db, "c2a") == b"".join(sent)
        except (duckdb.IOException, duckdb.CatalogException):
            return False
    assert wait_until(stored, timeout=120)
    filler = _fill(small_disk)
    batch(1000, 4000)  # lost: the spool cannot grow
    os.unlink(filler)
    batch(4000, 5000)
    filler = _fill(small_disk)
    batch(5000, 6000)  # lost, and so is the end of the spool
    p.stdin.close()
    assert p.wait(timeout=120) == 0
    reader.join(timeout=60)
    assert got == sent
    err = p.stderr.read().decode()
    assert "cannot write the recording" in err and "Traceback" not in err
    os.unlink(filler)  # room again: the loader (or a recover) stores the session
    assert wait_until(lambda: not list(small_disk.glob("full.db.*.spool")), timeout=240)
    for direction in ("c2a", "a2c"):
        gaps = _gaps(db, direction)
        lost = sum(g["frames"] for g in gaps)
        # every frame counted once: a row (whole, or cut by the gap) or in a gap row (issue 28:
        # the frame cut mid-write was counted as both)
        assert _rows(db, direction) + lost == len(sent)
        assert _newline_rows(db, direction) + _cut(gaps) + lost == len(sent)
        assert lost >= 4000 - 1
        whole = _whole_frames(db, direction)
        assert whole[:1000] == [f[:-1] for f in sent[:1000]]
        assert set(whole) <= {f[:-1] for f in sent}
        reasons = {g["reason"] for g in gaps}
        assert any(r.startswith("spool write failed") for r in reasons), reasons
    ((lost_frames, exit_code, end_reason),) = db_rows(
        db, "SELECT lost_frames, exit_code, end_reason FROM sessions")
    all_gaps = _gaps(db, "c2a") + _gaps(db, "a2c") + _gaps(db, "stderr")
    assert lost_frames == sum(g["frames"] for g in all_gaps)
    assert (exit_code, end_reason) == (0, "agent_exit")
    ((frame_count,),) = db_rows(db, "SELECT frame_count FROM sessions")
    assert frame_count + lost_frames == 2 * len(sent)


def test_full_disk_when_the_loader_starts_leaves_no_empty_file(small_disk):
    """The disk is full before the loader can make the DB: it waits for room (no sibling, which
    would be on the same disk) and leaves no 0-byte file, which every reader would call "not a
    DuckDB file"; once there is room the session is stored, each frame counted once."""
    folder = small_disk / "at-start"
    folder.mkdir()
    db = str(folder / "x.db")
    filler = _fill(small_disk)
    os.truncate(filler, os.path.getsize(filler) - 8192)  # room for the spool's header only
    frames = [KB_FRAME % i for i in range(200)]
    try:
        p = subprocess.Popen([WIRE_PROXY, "--wait", "600", "--db", db, "--", *echo_agent_cmd()],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = p.communicate(b"".join(frames), timeout=300)
        assert p.returncode == 0 and out == b"".join(frames)
        # the loader says so, and the proxy does not wait for room
        assert b"waits in its spool" in err and b"cannot be written now" in err, err
        assert b"Traceback" not in err
        assert list(folder.glob("*.spool"))
    finally:
        os.unlink(filler)
    assert wait_until(lambda: not list(folder.glob("*.spool")), timeout=240), \
        sorted(os.listdir(folder))
    assert sorted(os.listdir(folder)) == ["x.db"]
    ((frame_count, lost_frames, end_reason),) = db_rows(
        db, "SELECT frame_count, lost_frames, end_reason FROM sessions")
    assert end_reason == "agent_exit"
    assert frame_count + lost_frames == 2 * len(frames)
    for direction in ("c2a", "a2c"):
        gaps = _gaps(db, direction)
        assert _rows(db, direction) + sum(g["frames"] for g in gaps) == len(frames)


BURST_FRAME = b'{"jsonrpc":"2.0","method":"event","params":{"n":%06d,"pad":"' + b"z" * 20000 + b'"}}\n'


def test_sigkill_mid_burst_loss_is_marked_at_recovery(tmp_path):
    """Proxy and loader SIGKILLed in the middle of a burst: `recover` marks what the relay
    moved but the spool never got, so recorded + marked = relayed, exactly; nothing the client
    received is unaccounted for, and no frame is stamped with the recovery's time."""
    db = str(tmp_path / "k.db")
    frames = [BURST_FRAME % i for i in range(1500)]  # 30 MB each way
    p = subprocess.Popen([WIRE_PROXY, "-q", "--db", db, "--", "cat"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    writer = threading.Thread(target=lambda: _write_quietly(p.stdin, frames), daemon=True)
    writer.start()
    received = b""
    while received.count(b"\n") < 500:
        received += os.read(p.stdout.fileno(), 1 << 20)
    for pid in loaders_of(p.pid):
        os.kill(pid, signal.SIGKILL)
    p.send_signal(signal.SIGKILL)
    killed_at = time.monotonic_ns()
    p.wait()
    received += p.stdout.read()
    # a loader still starting when the proxy's children were listed (its command line was not
    # the loader's yet) is found now: the proxy is gone, so no other comes
    _kill_everything_of(tmp_path)
    (spool,) = list(tmp_path.glob("*.spool"))
    # every process that held it is dead: its lock is free (a live holder is a leak, named)
    assert wait_until(lambda: lock_held(str(spool)) is False, timeout=120), _holders(spool)
    counters, _exit = read_counters(str(spool))
    res = subprocess.run([WIRE_PROXY, "recover", db], capture_output=True, timeout=120)
    said = f"recover said {res.stderr!r}; files: {sorted(f.name for f in tmp_path.iterdir())}"
    assert res.returncode == 0, said
    assert f"into {db}".encode() in res.stderr, said
    got = received.count(b"\n")
    for direction, counted in (("c2a", counters[3]), ("a2c", counters[4])):
        gaps = _gaps(db, direction)
        lost = sum(g["frames"] for g in gaps)
        assert _newline_rows(db, direction) + _cut(gaps) + lost == counted, said
        whole = _whole_frames(db, direction)
        assert set(whole) <= {f[:-1] for f in frames}
        assert whole == sorted(whole)  # in order (the frames are numbered)
    # counted before it is relayed: at most the frames of one chunk in flight beyond the client's
    assert got <= counters[4] <= got + 65536 // len(frames[0]) + 1
    assert received.startswith(b"".join(frames[:got]))  # the relay stayed exact
    (max_mono,) = db_rows(db, "SELECT max(mono_ns) FROM frames")[0]
    assert max_mono <= killed_at
    assert not spool.exists()
    # Recovering again finds nothing and changes nothing.
    res = subprocess.run([WIRE_PROXY, "recover", db], capture_output=True, timeout=60)
    assert b"nothing to recover" in res.stderr


def test_recover_says_when_a_spool_is_still_held(tmp_path):
    """A spool a live process still holds (a proxy recording now, or a killed one still
    exiting) is not recovered, and recover says so rather than "nothing to recover"."""
    db = str(tmp_path / "h.db")
    spool = f"{db}.cafe.spool"
    writer = SpoolWriter(spool, {"session_id": "cafe", "started_wall_ns": 0, "db": db})
    try:
        writer.put(C2A, b'{"jsonrpc":"2.0"}\n')
        res = subprocess.run([WIRE_PROXY, "recover", db], capture_output=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert res.stderr.decode().splitlines() == [
            f"wire-proxy: nothing to recover now: 1 spool(s) still held by a live process "
            f"({spool}); run `wire-proxy recover` again once it has exited"], res.stderr
        assert os.path.exists(spool)
    finally:
        writer.close()


def _kill_everything_of(folder: Path) -> None:
    """SIGKILL every process whose command line names `folder` (the proxy, its loaders, and a
    loader still between fork and exec, whose command line is the proxy's), and wait until
    each is dead: a killed process shows an empty command line while it is still tearing
    down, and holds its locks (the DB's, the spool's) until that is done."""
    name = str(folder).encode()
    killed: set[int] = set()
    while True:
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if name in cmd:
                pids.append(int(entry))
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        killed.update(pids)
        alive = [pid for pid in killed if _alive(pid)]
        if not pids and not alive:
            return
        time.sleep(0.05)  # (a poll while the killed ones die, not a synchronisation)


def _holders(path: Path) -> list[str]:
    """The processes with `path` open, by their command lines."""
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
            if any(os.readlink(f"/proc/{entry}/fd/{fd}") == str(path) for fd in fds):
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    out.append(f"{entry}: {f.read()!r}")
        except OSError:
            continue
    return out


def _alive(pid: int) -> bool:
    """Any of its threads not yet a zombie: a killed process's leader can be a zombie while
    its other threads still hold the files (and locks) they share."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            return True
    return False


def _write_quietly(pipe, frames) -> None:
    try:
        for f in frames:
            pipe.write(f)
        pipe.close()
    except OSError:
        # closed now, while the proxy's end is known gone: left to the garbage collector, the
        # buffered rest fails to flush there and pytest reports it as an unraisable exception
        try:
            pipe.close()
        except OSError:
            pass


CHATTY_AGENT = r"""
import os, signal, sys
n = 0
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
while not stop:  # (the handler only sets the flag: n stays the count of lines written)
    os.write(1, b"line %d\n" % n)
    n += 1
with open(sys.argv[1], "w") as f:
    f.write(str(n))
sys.exit(143)
"""


def test_client_hangup_ends_a_chatty_agent_and_counts_the_rest(tmp_path):
    """`wire-proxy -- AGENT | head -1`: the agent gets EOF then SIGTERM, the proxy ends, the
    recording keeps what came first and counts the rest: recorded + counted = what the agent
    wrote, exactly."""
    db = str(tmp_path / "h.db")
    count = tmp_path / "written"
    p = subprocess.Popen([WIRE_PROXY, "-q", "--db", db, "--", sys.executable, "-c",
                          CHATTY_AGENT, str(count)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"line 0\n"
    p.stdout.close()  # the client hangs up; its stdin stays open
    assert p.wait(timeout=120) == 143
    p.stdin.close()
    written = int(count.read_text())
    events = [m for (m,) in db_rows(db, "SELECT method FROM frames WHERE direction = 'proxy' "
                                        "ORDER BY seq")]
    assert events.index("client_hangup") < events.index("agent_stdin_closed") < \
        events.index("signal") < events.index("exit")
    assert db_rows(db, "SELECT exit_code, exit_signal FROM sessions") == [(143, None)]
    whole = _whole_frames(db, "a2c")
    assert whole == [b"line %d" % i for i in range(len(whole))]
    gaps = _gaps(db, "a2c")
    lost = sum(g["frames"] for g in gaps)
    assert len(whole) + _cut(gaps) + lost == written
    assert db_rows(db, "SELECT lost_frames FROM sessions") == [(lost,)]


def test_a_db_held_by_another_loader_does_not_hold_the_proxy(tmp_path):
    """The DB is held by another writer when the session ends: the proxy exits at once (not
    after --wait), the loader finishes in the background once the DB is free."""
    db = str(tmp_path / "s.db")
    p, sent = _proxy_with_pings(db, 20, "--wait", "600")

    def readable():
        try:
            return stream_of(db, "c2a") == sent
        except duckdb.IOException:
            return False
    assert wait_until(readable, timeout=60)
    holder = duckdb.connect(db)  # as another session's loader would
    try:
        more = b'{"jsonrpc":"2.0","method":"prompt","id":"late","params":{}}\n'
        p.stdin.write(more)
        p.stdin.close()
        assert p.stdout.read() == more
        assert p.wait(timeout=120) == 0  # with --wait 600 of old, this waited 600 s
        assert b"cannot be written now" in p.stderr.read()
        assert list(tmp_path.glob("*.spool")), "the session waits in its spool"
    finally:
        holder.close()
    sent += more
    assert wait_until(readable, timeout=120)  # the loader stored it once the DB was free
    assert not list(tmp_path.glob("*.spool"))
    assert db_rows(db, "SELECT lost_frames, end_reason FROM sessions") == [(0, "agent_exit")]


@pytest.mark.parametrize("no_loss", [False, True])
def test_no_loss_slows_the_relay_instead_of_dropping(tmp_path, no_loss):
    """A writer that cannot keep up (a queue of 256 KiB, written every 5 s): by default the
    relay never waits and the excess is dropped and marked; with no_loss nothing is dropped."""
    spool = str(tmp_path / "s.spool")
    writer = SpoolWriter(spool, {"session_id": "t", "started_wall_ns": 0}, max_pending=256 << 10,
                         flush_interval=5.0, no_loss=no_loss)
    data = FRAMES * 200  # ~16 MB
    assert _relay_through(writer, data) == data
    writer.close()
    rows = _rows_of(spool)
    recorded = [r for r in rows if r[4] == "c2a"]
    gaps = [json.loads(r[12]) for r in rows if r[9] == "recording_gap"]
    lost = sum(g["frames"] for g in gaps)
    assert lost + len(recorded) == data.count(b"\n")  # each frame counted once
    if no_loss:
        assert lost == 0 and writer.lost_frames == 0
        assert b"".join(r[5] + b"\n" for r in recorded) == data
    else:
        # the relay counts the newlines it could not record; a frame cut by the loss is a row
        assert lost + _cut(gaps) == writer.lost_frames > 0


def test_a_format_1_spool_left_by_an_older_release_is_still_recovered(tmp_path):
    from wire_recorder.recorder.spool import EVENT, MAGIC_V1, REC_V1

    db = str(tmp_path / "old.db")
    meta = {"session_id": "old1", "started_wall_ns": time.time_ns(), "db": db,
            "cwd": str(tmp_path)}
    body = MAGIC_V1 + json.dumps(meta).encode() + b"\n"
    for stream, data in ((C2A, FRAMES[:500]), (C2A, FRAMES[500:]), (A2C, FRAMES),
                         (EVENT, b'{"event":"end"}')):
        body += REC_V1.pack(stream, len(data), time.monotonic_ns(), time.time_ns()) + data
    spool = tmp_path / "old.db.old1.spool"
    spool.write_bytes(body)
    res = subprocess.run([WIRE_PROXY, "recover", db], capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert not spool.exists()
    assert stream_of(db, "c2a") == FRAMES and stream_of(db, "a2c") == FRAMES


def test_recover_reads_a_record_longer_than_one_read(tmp_path):
    """A spool record longer than the loader reads at once (READ_BYTES) is waited for, not
    taken for the end of the spool: recovery stopped there, marked the rest as a gap and
    deleted the spool, the only copy."""
    from wire_recorder.recorder.loader import READ_BYTES, ingest_spool

    db = str(tmp_path / "big.db")
    spool = f"{db}.20260101T000000-0badf00d.spool"
    writer = SpoolWriter(spool, {"session_id": "20260101T000000-0badf00d", "db": db,
                                 "started_wall_ns": time.time_ns(), "cwd": str(tmp_path)})
    frame = b'{"jsonrpc":"2.0","method":"event","params":{"pad":"' + b"q" * 1000 + b'"}}\n'
    n = 2 * READ_BYTES // len(frame) + 10
    writer.put(C2A, frame * n)  # one record
    writer.put(C2A, frame)
    writer.close(exit_status=0)
    summary = ingest_spool(spool, follow=False)
    assert summary["frames"] == n + 1
    assert db_rows(db, "SELECT count(*) FROM frames WHERE direction = 'c2a'") == [(n + 1,)]
    assert db_rows(db, "SELECT lost_frames FROM sessions") == [(0,)]
