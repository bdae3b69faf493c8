"""Shared helpers for the benchmarks: frame generators, pipe drivers, percentiles, RSS polling.

Plain stdlib (duckdb only where a recording is checked). Every driver talks to the program under
test through its own pipes, so the harness cost is the same for the anchor and for the proxy.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_BIN = os.path.join(ROOT, ".venv", "bin")
WIRE_PROXY = os.path.join(VENV_BIN, "wire-proxy")

READ_CHUNK = 1 << 20


# -- the machine ---------------------------------------------------------------------------------
def page_cache_rates(folder: str, mib: int = 512) -> tuple[float, float]:
    """MB/s of writing `mib` MiB into a new file in `folder`, then of writing them again over it.
    In a VM that hands freed memory back to its host the first runs slower (here 808 MB/s
    against 5.3 GB/s): the page cache the spool lands in then fills slower than a burst relays,
    and the default mode drops (counted, marked). Printed so a run's losses can be read."""
    path = os.path.join(folder, "page-cache-probe")
    block = b"\0" * (1 << 20)
    rates = []
    try:
        with open(path, "wb") as f:
            for _ in range(2):
                f.seek(0)
                t = time.perf_counter()
                for _ in range(mib):
                    f.write(block)
                f.flush()
                rates.append(mib * (1 << 20) / (time.perf_counter() - t) / 1e6)
    finally:
        os.unlink(path)
    return rates[0], rates[1]


# -- frames -------------------------------------------------------------------------------------
def make_frame(size: int, i: int) -> bytes:
    """One Wire-like JSON-RPC event line of exactly `size` bytes (newline included)."""
    head = (b'{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart",'
            b'"payload":{"type":"text","text":"')
    tail = b'"}}}\n'
    tag = b"f%08d " % i
    pad = size - len(head) - len(tail) - len(tag)
    if pad < 0:
        raise ValueError(f"frame size {size} too small")
    filler = (b"abcdefghijklmnopqrstuvwxyz0123456789 " * (pad // 37 + 1))[:pad]
    frame = head + tag + filler + tail
    assert len(frame) == size
    return frame


@dataclass
class Stream:
    """`reps` copies of a block of distinct frames, after one warm-up frame."""
    size: int
    frames: list[bytes]
    reps: int
    warm: bytes = b""
    block: bytes = b""

    def __post_init__(self):
        self.block = b"".join(self.frames)
        # small, so that writing it before reading its echo can never fill both pipes
        self.warm = make_frame(min(self.size, 200), 99_999_999)

    @property
    def n_frames(self) -> int:  # timed frames (the warm-up frame is not counted)
        return len(self.frames) * self.reps

    @property
    def n_bytes(self) -> int:
        return len(self.block) * self.reps

    def expected_md5s(self) -> list[str]:
        per = [hashlib.md5(f[:-1]).hexdigest() for f in self.frames]
        return [hashlib.md5(self.warm[:-1]).hexdigest()] + per * self.reps


def stream_for(size: int, total_frames: int) -> Stream:
    distinct = max(1, min(total_frames, (256 << 10) // size, 1000))
    if size >= (1 << 20):
        distinct = min(2, total_frames)
    reps = max(1, total_frames // distinct)
    return Stream(size, [make_frame(size, i) for i in range(distinct)], reps)


# -- process helpers ----------------------------------------------------------------------------
def write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def launch_echo_eof(argv: list[str], frame: bytes, stderr_path: str | None = None) -> dict:
    """Launch argv (its agent prints its clock first: `sh -c 'date +%s%N; exec cat'`), send one
    frame at once, read its echo, then close stdin and read to EOF. Times launch -> the agent's
    first instruction (spawn_ms), launch -> echo (first_rt_ms), EOF sent -> exit (exit_ms);
    eof_ns is when EOF was sent (perf_counter_ns), for what the caller times after it."""
    errf = open(stderr_path, "wb") if stderr_path else subprocess.DEVNULL
    t_launch = time.time_ns()
    c0 = time.perf_counter_ns()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf,
                         bufsize=0)
    if stderr_path:
        errf.close()
    write_all(p.stdin.fileno(), frame)
    buf = b""
    t_echo = None
    while True:
        d = os.read(p.stdout.fileno(), 65536)
        if not d:
            break
        buf += d
        nl = buf.find(b"\n")
        if nl >= 0 and len(buf) - nl - 1 >= len(frame):
            t_echo = time.perf_counter_ns()
            break
    spawn_ns = int(buf[:buf.find(b"\n")])
    c1 = time.perf_counter_ns()
    p.stdin.close()
    while os.read(p.stdout.fileno(), 65536):
        pass
    p.wait()
    c2 = time.perf_counter_ns()
    p.stdout.close()
    return {"spawn_ms": (spawn_ns - t_launch) / 1e6,
            "first_rt_ms": (t_echo - c0) / 1e6 if t_echo else float("nan"),
            "exit_ms": (c2 - c1) / 1e6, "eof_ns": c1}


def proxy_prefix(src: str | None) -> list[str] | None:
    """The command that runs wire-proxy: the .venv's, or (src) the package of another source
    tree (an OLD checkout, e.g. `git worktree add /tmp/old REV`), to compare two versions in one
    run. None (said why) when there is none."""
    if src:
        return src_proxy_prefix(src)
    if not os.path.exists(WIRE_PROXY):
        say(f"{WIRE_PROXY} not found: install the package into .venv first")
        return None
    return [WIRE_PROXY]


def src_proxy_prefix(src: str) -> list[str] | None:
    """wire-proxy from the source tree `src`, in this interpreter (its dependencies), whatever
    that tree's layout: `src/wire_recorder/`, a tree whose pyproject maps `wire_recorder.recorder`
    to `recorder/` (a folder of links made here stands in for the package), or an older tree
    whose package is the top-level `recorder` (it points its loader at itself). The path goes
    into the command's own environment (`env PYTHONPATH=...`), never into ours: the other
    variants of a run must not see it."""
    src = os.path.abspath(src)
    if os.path.isdir(os.path.join(src, "wire_recorder", "recorder")):
        root, module = src, "wire_recorder.recorder.proxy_cli"
    elif not os.path.exists(os.path.join(src, "recorder", "proxy_cli.py")):
        say(f"{src}: no recorder/proxy_cli.py there (not a checkout of this repository)")
        return None
    else:
        try:
            with open(os.path.join(src, "pyproject.toml")) as f:
                mapped = '"wire_recorder.recorder" = "recorder"' in f.read()
        except OSError:
            mapped = False
        if mapped:
            root = tempfile.mkdtemp(prefix="wire-bench-src-")
            os.mkdir(os.path.join(root, "wire_recorder"))
            for name in ("recorder", "replay", "analysis"):
                if os.path.isdir(os.path.join(src, name)):
                    os.symlink(os.path.join(src, name), os.path.join(root, "wire_recorder", name))
            module = "wire_recorder.recorder.proxy_cli"
        else:
            root, module = src, "recorder.proxy_cli"
    return ["env", f"PYTHONPATH={root}", sys.executable, "-c",
            f"import sys; sys.path.insert(0, {root!r}); from {module} import main; "
            "sys.exit(main())"]


def relay_floor_argv(agent: list[str]) -> list[str]:
    """The relay's design with nothing recorded (`_thread_relay.py`), in the proxy's interpreter."""
    python = os.path.join(VENV_BIN, "python")
    return [python if os.path.exists(python) else sys.executable,
            os.path.join(ROOT, "bench", "_thread_relay.py"), *agent]


def proxy_argv(db: str, agent: list[str], *extra: str, wait: float = 900) -> list[str]:
    return [WIRE_PROXY, "-q", "--db", db, "--wait", str(wait), *extra, "--", *agent]


def is_loader_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"wire_recorder.recorder.loader" in f.read()
    except OSError:
        return False


def stop_loader(pid: int) -> None:
    """Stop a loader this benchmark started (by its pid) and wait until it is gone."""
    import signal
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return
    for _ in range(500):
        if not is_loader_alive(pid):
            return
        time.sleep(0.01)


class RssPoller(threading.Thread):
    """Polls VmHWM/VmRSS of a process and of its `recorder.loader` child."""

    def __init__(self, pid: int, interval: float = 0.02):
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.stop = threading.Event()
        self.peak = {"proxy_hwm_kb": 0, "proxy_rss_kb": 0, "loader_hwm_kb": 0,
                     "loader_rss_kb": 0, "agent_hwm_kb": 0}
        self.loader_pid = None
        self.agent_pid = None

    @staticmethod
    def _status(pid: int) -> dict:
        out = {}
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith(("VmHWM", "VmRSS")):
                        k, v = line.split(":", 1)
                        out[k] = int(v.split()[0])
        except OSError:
            pass
        return out

    def _children(self) -> list[int]:
        kids = []
        try:
            for tid in os.listdir(f"/proc/{self.pid}/task"):
                with open(f"/proc/{self.pid}/task/{tid}/children") as f:
                    kids += [int(x) for x in f.read().split()]
        except OSError:
            pass
        return kids

    def _find_kids(self) -> None:
        for kid in self._children():
            try:
                with open(f"/proc/{kid}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"wire_recorder.recorder.loader" in cmd:
                self.loader_pid = kid
            elif self.agent_pid is None:
                self.agent_pid = kid

    def run(self) -> None:
        while not self.stop.is_set():
            if self.loader_pid is None or self.agent_pid is None:
                self._find_kids()
            s = self._status(self.pid)
            if s:
                self.peak["proxy_hwm_kb"] = max(self.peak["proxy_hwm_kb"], s.get("VmHWM", 0))
                self.peak["proxy_rss_kb"] = max(self.peak["proxy_rss_kb"], s.get("VmRSS", 0))
            if self.loader_pid:
                s = self._status(self.loader_pid)
                if s:
                    self.peak["loader_hwm_kb"] = max(self.peak["loader_hwm_kb"], s.get("VmHWM", 0))
                    self.peak["loader_rss_kb"] = max(self.peak["loader_rss_kb"], s.get("VmRSS", 0))
            if self.agent_pid:
                s = self._status(self.agent_pid)
                if s:
                    self.peak["agent_hwm_kb"] = max(self.peak["agent_hwm_kb"], s.get("VmHWM", 0))
            self.stop.wait(self.interval)


@dataclass
class PipeRun:
    relay_s: float          # first timed byte written -> last byte read back
    exit_s: float           # first timed byte written -> process exited (recording complete)
    identical: bool
    out_bytes: int
    rc: int
    stderr: str = ""
    peak: dict = field(default_factory=dict)


def run_stream(argv: list[str], stream: Stream, *, keep_output: bool = True,
               poll_rss: bool = False, stderr_path: str | None = None,
               timeout: float = 900) -> PipeRun:
    """Feed warm-up frame, wait for its echo, then time `stream` through argv and read it back.

    keep_output=True reads into one preallocated buffer and compares after timing (cheapest for
    the harness); False compares chunk by chunk against the periodic stream (bounded memory)."""
    errf = open(stderr_path, "wb") if stderr_path else subprocess.DEVNULL
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf,
                         bufsize=0)
    if stderr_path:
        errf.close()
    poller = None
    if poll_rss:
        poller = RssPoller(p.pid)
        poller.start()
    wfd, rfd = p.stdin.fileno(), p.stdout.fileno()
    # warm-up: process started, first frame through
    write_all(wfd, stream.warm)
    got = 0
    while got < len(stream.warm):
        d = os.read(rfd, 65536)
        if not d:
            break
        got += len(d)
    warm_ok = got == len(stream.warm)
    block, reps = stream.block, stream.reps
    total = len(block) * reps
    werr: list = []

    def writer():
        try:
            mv = memoryview(block)
            for _ in range(reps):
                write_all(wfd, mv)
        except OSError as e:
            werr.append(e)
        finally:
            try:
                p.stdin.close()
            except OSError:
                pass

    identical = warm_ok
    if keep_output:
        buf = bytearray(b"\x01") * (total + 1)  # touched up front: no page faults while timed
        mv = memoryview(buf)
        t0 = time.perf_counter()
        wt = threading.Thread(target=writer, daemon=True)
        wt.start()
        pos = 0
        readv = os.readv
        while True:
            n = readv(rfd, [mv[pos:pos + READ_CHUNK]])
            if not n:
                break
            pos += n
            if pos >= total:  # the proxy keeps stdout open until its loader is done
                break
        t1 = time.perf_counter()
        identical = identical and pos == total and buf[:total] == block * reps
        del mv
    else:
        L = len(block)
        block2 = block + block
        t0 = time.perf_counter()
        wt = threading.Thread(target=writer, daemon=True)
        wt.start()
        pos = 0
        read = os.read
        rsize = min(READ_CHUNK, L)
        while True:
            d = read(rfd, rsize)
            if not d:
                break
            off = pos % L
            if identical and d != block2[off:off + len(d)]:
                identical = False
            pos += len(d)
            if pos >= total:
                break
        t1 = time.perf_counter()
        identical = identical and pos == total
    # drain whatever else comes (nothing, if identical)
    while os.read(rfd, 65536):
        identical = False
    try:
        rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    t2 = time.perf_counter()
    wt.join()
    p.stdout.close()
    peak = {}
    if poller:
        poller.stop.set()
        poller.join()
        peak = dict(poller.peak, loader_pid=poller.loader_pid)
    err = ""
    if stderr_path:
        with open(stderr_path, "rb") as f:
            err = f.read().decode(errors="replace")
    return PipeRun(t1 - t0, t2 - t0, identical and not werr, pos, rc, err, peak)


# -- recording check ------------------------------------------------------------------------------
def check_recording(db: str, stream: Stream, content: bool = True) -> dict:
    """Does the DB hold exactly the frames sent, in both directions? Returns counts + problems."""
    import duckdb

    problems = []
    if not os.path.exists(db):
        return {"c2a": 0, "a2c": 0, "rows": 0, "expected_per_direction": stream.n_frames + 1,
                "end_reason": None, "problems": [f"{db} was not written"]}
    con = duckdb.connect(db, read_only=True)
    try:
        sessions = con.execute(
            "SELECT session_id, frame_count, lost_frames, lost_bytes, end_reason FROM sessions"
        ).fetchall()
        if len(sessions) != 1:
            problems.append(f"{len(sessions)} sessions in the DB (expected 1)")
        sid = sessions[0][0] if sessions else None
        expected_n = stream.n_frames + 1
        expected_bytes = stream.n_bytes + len(stream.warm) - expected_n  # newlines not stored
        counts = {}
        for direction in ("c2a", "a2c"):
            n, nbytes, nl = con.execute(
                "SELECT count(*), coalesce(sum(byte_len), 0), coalesce(sum(newline::INT), 0) "
                "FROM frames WHERE session_id = ? AND direction = ?", [sid, direction]).fetchone()
            counts[direction] = n
            if n != expected_n or nbytes != expected_bytes or nl != expected_n:
                problems.append(f"{direction}: {n} frames / {nbytes} bytes in the DB, expected "
                                f"{expected_n} / {expected_bytes} (lost {expected_n - n} frames)")
            elif content:
                got = _frame_md5s(con, db, sid, direction)
                if got != stream.expected_md5s():
                    bad = sum(1 for a, b in zip(got, stream.expected_md5s(), strict=False) if a != b)
                    problems.append(f"{direction}: {bad} frames differ from what was sent")
        gaps = con.execute("SELECT count(*) FROM frames WHERE direction = 'proxy' AND "
                           "method = 'recording_gap'").fetchone()[0]
        if gaps:
            problems.append(f"{gaps} recording_gap rows")
        if sessions and (sessions[0][2] or sessions[0][3]):
            problems.append(f"session says lost_frames={sessions[0][2]} lost_bytes={sessions[0][3]}")
        total_rows = con.execute("SELECT count(*) FROM frames").fetchone()[0]
        seq = con.execute("SELECT min(seq), max(seq), count(DISTINCT seq) FROM frames").fetchone()
        if seq[0] != 1 or seq[1] != total_rows or seq[2] != total_rows:
            problems.append(f"seq not 1..{total_rows}: {seq}")
        return {"c2a": counts.get("c2a"), "a2c": counts.get("a2c"), "rows": total_rows,
                "expected_per_direction": expected_n,
                "end_reason": sessions[0][4] if sessions else None, "problems": problems}
    finally:
        con.close()


def _frame_md5s(con, db: str, sid: str, direction: str) -> list[str]:
    """md5 of every frame's bytes, reading large frames from the DB's .blobs sidecar."""
    import hashlib

    has_blobs = con.execute("SELECT count(*) FROM duckdb_columns() WHERE table_name = 'frames' "
                            "AND column_name = 'blob_offset'").fetchone()[0]
    off = "blob_offset" if has_blobs else "NULL"
    rows = con.execute(f"SELECT md5(raw), {off}, byte_len FROM frames WHERE session_id = ? AND "
                       "direction = ? ORDER BY seq", [sid, direction]).fetchall()
    if not any(r[1] is not None for r in rows):
        return [r[0] for r in rows]
    out = []
    with open(db + ".blobs", "rb") as f:
        for digest, offset, n in rows:
            if offset is not None:
                f.seek(offset)
                digest = hashlib.md5(f.read(n)).hexdigest()
            out.append(digest)
    return out


def spool_leftovers(folder: str) -> list[str]:
    return [n for n in os.listdir(folder) if n.endswith(".spool")]


# -- stats ------------------------------------------------------------------------------------------
def pct(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    k = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[k]


def median(vals: list[float]) -> float:
    s = sorted(vals)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


class TempDir:
    def __init__(self, prefix: str = "wire-bench-"):
        self.path = tempfile.mkdtemp(prefix=prefix)

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def clear(self) -> None:
        for n in os.listdir(self.path):
            p = os.path.join(self.path, n)
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)

    def cleanup(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def say(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()
