"""The loader (issue 14 items 1, 2, 7): its peak memory and how fast a recording is complete.

Each case pipes a file of frames through `wire-proxy --wait 0 -- cat` (the proxy hands what is
left to its loader and exits once the relay is done) and follows the loader process until it
exits, polling its VmHWM. Printed beside limits measured in the same run:

* `cat` and `cat | tee FILE | cat` over the same file (the relay's physical limit);
* a plain DuckDB load of the same frames (both directions, as many rows as the loader stores):
  `CREATE TABLE AS SELECT * FROM read_json(FILE, format='newline_delimited', records=false)` in
  a fresh file, in its own process (its time and its VmHWM).

Figures: rows/s end to end (launch -> last row committed: the loader exits), time from the end of
the relay (the proxy's exit) to the last row, loader VmHWM, rows stored and frames lost (`lost_frames`).

    .venv/bin/python bench/bench_loader.py --quick      # < 1 min: 200k frames, 256 MiB of 2 MiB
    .venv/bin/python bench/bench_loader.py              # 1M small frames, 1 GiB of 2 MiB
    .venv/bin/python bench/bench_loader.py --ten-million
    .venv/bin/python bench/bench_loader.py --busy       # also with a CPU burner on one core
    .venv/bin/python bench/bench_loader.py --large-values  # also 20 KB .. 600 KB frames
    .venv/bin/python bench/bench_loader.py --recover   # also `wire-proxy recover` of a 20 MB
                                                       # spool of tiny frames (issue 28)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import WIRE_PROXY, make_frame, page_cache_rates  # noqa: E402

TARGET_RSS_MB = 170  # MiB (issue 27: no worse than the loader before its bulk path)
TARGET_ROWS_S = 200_000
PLAIN_CPU = [0.0]  # the CPU seconds of the last plain DuckDB load (its process, start to end)


def _status_kb(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _cpu_s(pid: int) -> float | None:
    """The CPU seconds (user + system) a process has used so far: on a loaded machine a fairer
    measure than its wall time."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _loader_of(pid: int) -> int | None:
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                for kid in f.read().split():
                    with open(f"/proc/{kid}/cmdline", "rb") as c:
                        if b"recorder.loader" in c.read():
                            return int(kid)
    except OSError:
        return None
    return None


def write_frames(path: str, size: int, n: int) -> int:
    """n frames of `size` bytes (1,000 distinct ones repeated); returns the bytes written."""
    distinct = [make_frame(size, i) for i in range(min(n, 1000 if size < (1 << 16) else 2))]
    block = b"".join(distinct)
    total = 0
    with open(path, "wb") as f:
        left = n
        while left >= len(distinct):
            f.write(block)
            total += len(block)
            left -= len(distinct)
        for fr in distinct[:left]:
            f.write(fr)
            total += len(fr)
    return total


def timed(argv: list[str] | str, stdin: str, shell: bool = False) -> float:
    t0 = time.perf_counter()
    with open(stdin, "rb") as i, open(os.devnull, "wb") as o:
        subprocess.run(argv, stdin=i, stdout=o, shell=shell, check=True)
    return time.perf_counter() - t0


DUCKDB_LOAD = r"""
import sys, time, duckdb
src, db = sys.argv[1], sys.argv[2]
con = duckdb.connect(db)
con.execute("SET enable_progress_bar = false")  # a long load draws one on stdout
t = time.perf_counter()
con.execute("CREATE TABLE f AS SELECT * FROM read_json(?, format='newline_delimited', "
            "records=false, maximum_object_size=67108864)", [src])
con.close()
print(time.perf_counter() - t, time.process_time())
"""


def duckdb_load(frames: str, tmp: str) -> tuple[float, float, int]:
    """(seconds, VmHWM MB, rows) of a plain DuckDB load of both directions' frames."""
    both = os.path.join(tmp, "both.ndjson")
    with open(both, "wb") as out, open(frames, "rb") as i:
        data = i.read()
        out.write(data)
        out.write(data)
    os.sync()
    db = os.path.join(tmp, "plain.db")
    p = subprocess.Popen([sys.executable, "-c", DUCKDB_LOAD, both, db], stdout=subprocess.PIPE)
    hwm = 0
    while p.poll() is None:
        hwm = max(hwm, _status_kb(p.pid, "VmHWM") or 0)
        time.sleep(0.02)
    secs, cpu = (float(x) for x in p.stdout.read().split()) if p.stdout else (0.0, 0.0)
    import duckdb

    con = duckdb.connect(db, read_only=True)
    (rows,) = con.execute("SELECT count(*) FROM f").fetchall()[0]
    con.close()
    os.unlink(both)
    PLAIN_CPU[0] = cpu
    return secs, hwm / 1024, rows


NO_LOSS = [False]


def record(frames: str, n: int, tmp: str, name: str, bulk: str = "1",
           no_loss: bool = False) -> dict:
    db = os.path.join(tmp, f"{name}.db")
    env = dict(os.environ, WIRE_RECORDER_HOME=os.path.join(tmp, "home"), WIRE_RECORDER_BULK=bulk)
    t0 = time.perf_counter()
    with open(frames, "rb") as i, open(os.devnull, "wb") as o:
        p = subprocess.Popen([WIRE_PROXY, "-q", "--db", db, "--wait", "0",
                              *(["--no-loss"] if no_loss else []), "--", "cat"],
                             stdin=i, stdout=o, env=env)
        loader = None
        hwm = 0
        while p.poll() is None:
            loader = loader or _loader_of(p.pid)
            if loader:
                hwm = max(hwm, _status_kb(loader, "VmHWM") or 0)
            time.sleep(0.01)
    t_relay = time.perf_counter()
    cpu = 0.0
    while loader and os.path.exists(f"/proc/{loader}"):
        kb = _status_kb(loader, "VmHWM")
        if kb is None:  # a zombie has no memory left to read; it is done
            break
        hwm = max(hwm, kb)
        cpu = _cpu_s(loader) or cpu
        time.sleep(0.01)
    t_done = time.perf_counter()
    import duckdb

    from wire_recorder.recorder.handoff import wait_for_loaders

    wait_for_loaders(db)
    con = duckdb.connect(db, read_only=True)
    (rows,) = con.execute("SELECT count(*) FROM frames "
                          "WHERE direction IN ('c2a', 'a2c')").fetchall()[0]
    (lost,) = con.execute("SELECT sum(lost_frames) FROM sessions").fetchall()[0]
    con.close()
    return {"rc": p.returncode, "relay_s": t_relay - t0, "done_s": t_done - t0,
            "tail_s": t_done - t_relay, "hwm_mb": hwm / 1024, "cpu_s": cpu, "rows": rows, "lost": lost,
            "expected": 2 * n, "db_mb": os.path.getsize(db) / 1e6, "found_loader": bool(loader)}


TINY = b'{"jsonrpc":"2.0","method":"event","params":{"type":"StepBegin","payload":{"n":%d}}}\n'


def recover_case(tmp: str, spool_mb: int = 20) -> bool:
    """`wire-proxy recover` of a spool of tiny frames left by a killed proxy (issue 28: 40-78 s
    for 20 MB), beside a plain DuckDB load of the same lines."""
    import uuid

    from wire_recorder.recorder.spool import A2C, C2A, SpoolWriter

    db = os.path.join(tmp, "recover.db")
    sid = uuid.uuid4().hex
    path = f"{db}.{sid}.spool"
    meta = {"session_id": sid, "db": db, "name": None, "tags": {}, "command": ["cat"],
            "cwd": tmp, "protocol": None, "started_wall_ns": time.time_ns(),
            "mono_start_ns": time.monotonic_ns(), "proxy_version": "bench", "proxy_pid": 1,
            "host": "bench", "quiet": True, "redact": True, "snapshot_workdir": False}
    block = b"".join(TINY % i for i in range(1000))
    lines = os.path.join(tmp, "tiny.ndjson")
    w = SpoolWriter(path, meta, no_loss=True)
    n = 0
    with open(lines, "wb") as f:
        while os.path.getsize(path) < spool_mb << 20:
            stream = C2A if n // 1000 % 2 else A2C  # blocks of frames each way in turn
            for i in range(0, len(block), 4096):  # records as a relay's reads would make them
                w.put(stream, block[i:i + 4096])
            f.write(block)
            n += 1000
    w._closed = True  # a killed proxy: no end marker  # noqa: SLF001
    w._wake.set()  # noqa: SLF001
    w._thread.join()  # noqa: SLF001
    if w._map is not None:  # noqa: SLF001 - the mapping holds the spool's lock too
        w._map.close()  # noqa: SLF001
    os.close(w.fd)
    size = os.path.getsize(path)
    print(f"\n== recover: a {size / 2**20:.0f} MiB spool of {n:,} frames of {len(TINY) + 1} B")
    secs_plain, hwm_plain, rows_plain = duckdb_load_one(lines, tmp)
    print(f"   plain DuckDB read_json load: {rows_plain:,} rows in {secs_plain:.2f} s = "
          f"{rows_plain / secs_plain:,.0f} rows/s, VmHWM {hwm_plain:.0f} MB; CPU "
          f"{PLAIN_CPU[0]:.2f} s")
    import shutil

    import duckdb

    shutil.copy(path, path + ".copy")
    ok = True
    for label, bulk in (("frame by frame (WIRE_RECORDER_BULK=0)", "0"), ("in bulk", "1")):
        if bulk == "1":
            os.rename(db, db + ".old")
            os.rename(path + ".copy", path)
        env = dict(os.environ, WIRE_RECORDER_HOME=os.path.join(tmp, "home"),
                   WIRE_RECORDER_BULK=bulk)
        t0 = time.perf_counter()
        p = subprocess.Popen([WIRE_PROXY, "recover", path], env=env)
        hwm = 0
        cpu = 0.0
        while p.poll() is None:
            hwm = max(hwm, _status_kb(p.pid, "VmHWM") or 0)
            cpu = _cpu_s(p.pid) or cpu
            time.sleep(0.01)
        secs = time.perf_counter() - t0
        con = duckdb.connect(db, read_only=True)
        (rows,) = con.execute("SELECT count(*) FROM frames WHERE direction IN ('c2a', 'a2c')"
                              ).fetchall()[0]
        con.close()
        print(f"   wire-proxy recover, {label}: {secs:.2f} s, {rows / secs:,.0f} rows/s "
              f"= {(rows / secs) / (rows_plain / secs_plain):.2f}x the plain load; VmHWM "
              f"{hwm / 1024:.0f} MB; rows {rows:,} of {n:,}; exit {p.returncode}; CPU "
              f"{cpu:.2f} s = {PLAIN_CPU[0] / max(cpu, 1e-9):.2f}x the plain load's per row")
        ok = ok and rows == n and p.returncode == 0
    os.unlink(lines)
    return ok


def duckdb_load_one(lines: str, tmp: str) -> tuple[float, float, int]:
    db = os.path.join(tmp, "plain1.db")
    p = subprocess.Popen([sys.executable, "-c", DUCKDB_LOAD, lines, db], stdout=subprocess.PIPE)
    hwm = 0
    while p.poll() is None:
        hwm = max(hwm, _status_kb(p.pid, "VmHWM") or 0)
        time.sleep(0.02)
    secs, cpu = (float(x) for x in p.stdout.read().split()) if p.stdout else (0.0, 0.0)
    import duckdb

    con = duckdb.connect(db, read_only=True)
    (rows,) = con.execute("SELECT count(*) FROM f").fetchall()[0]
    con.close()
    os.unlink(db)
    PLAIN_CPU[0] = cpu
    return secs, hwm / 1024, rows


def burner() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def case(label: str, size: int, n: int, tmp: str, busy: bool, plain: bool,
         frame_by_frame: bool = False) -> bool:
    frames = os.path.join(tmp, f"frames-{size}.ndjson")
    total = write_frames(frames, size, n)
    print(f"\n== {label}: {n:,} frames of {size:,} B ({total / 2**20:,.0f} MiB each way)")
    # Each timed step starts with no dirty pages of the one before (the 2 GB input file of the
    # 10M case left behind slowed the proxy's spool writes, which then dropped frames).
    os.sync()
    t_cat = timed(["cat"], frames)
    os.sync()
    t_tee = timed(f"cat | tee {tmp}/tee.out | cat", frames, shell=True)
    os.unlink(f"{tmp}/tee.out")
    print(f"   cat {t_cat:.2f} s   cat|tee|cat {t_tee:.2f} s")
    if plain:
        secs, hwm, rows = duckdb_load(frames, tmp)
        print(f"   plain DuckDB read_json load: {rows:,} rows in {secs:.2f} s = "
              f"{rows / secs:,.0f} rows/s, VmHWM {hwm:.0f} MB; its process's CPU "
              f"{PLAIN_CPU[0]:.2f} s")
    ok = True
    runs = [(burn, "1") for burn in ([False, True] if busy else [False])]
    if frame_by_frame:  # the loader as before the bulk path, in the same run, first
        runs.insert(0, (False, "0"))
    for burn, bulk in runs:
        os.sync()
        b = burner() if burn else None
        try:
            r = record(frames, n, tmp, f"{size}-{int(burn)}-{bulk}", bulk, NO_LOSS[0])
        finally:
            if b is not None:
                b.kill()
                b.wait()
        tag = "busy (a CPU burner on one core)" if burn else "quiet"
        if NO_LOSS[0]:
            tag += ", --no-loss"
        if bulk == "0":
            tag += ", frame by frame (WIRE_RECORDER_BULK=0)"
        rate = r["rows"] / r["done_s"]
        print(f"   wire-proxy, {tag}: relay {r['relay_s']:.2f} s, recording complete at "
              f"{r['done_s']:.2f} s ({r['tail_s']:.2f} s after the relay)")
        print(f"     rows/s end to end {rate:,.0f} (target >= {TARGET_ROWS_S:,} for 200 B)"
              f"{'' if not plain else f' = {rate / (rows / secs):.2f}x the plain load'}")
        cpu = max(r["cpu_s"], 1e-9)
        print(f"     loader CPU {cpu:.2f} s = {r['rows'] / cpu:,.0f} rows a CPU second"
              + ("" if not plain or not PLAIN_CPU[0] else
                 f" = {(r['rows'] / cpu) / (rows / PLAIN_CPU[0]):.2f}x the plain load's"))
        print(f"     loader VmHWM {r['hwm_mb']:.0f} MiB (target <= {TARGET_RSS_MB} MiB)"
              f"{'' if r['found_loader'] else ' (loader not seen)'}; DB {r['db_mb']:.0f} MB")
        print(f"     rows {r['rows']:,} of {r['expected']:,}; lost_frames {r['lost']}; "
              f"proxy exit {r['rc']}")
        ok = ok and r["rows"] + (r["lost"] or 0) == r["expected"]
    os.unlink(frames)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ten-million", action="store_true")
    ap.add_argument("--busy", action="store_true")
    ap.add_argument("--large-values", action="store_true",
                    help="also frames larger than a DuckDB block (20 KB, 64 KiB, 200 KB, 600 KB; "
                         "256 MiB each way, --quick 64): the loader's memory with such values")
    ap.add_argument("--recover", action="store_true",
                    help="also `wire-proxy recover` of a 20 MB spool of tiny frames")
    ap.add_argument("--only-recover", action="store_true")
    ap.add_argument("--only-small", action="store_true", help="the small frames only")
    ap.add_argument("--frame-by-frame", action="store_true",
                    help="small frames also loaded frame by frame (WIRE_RECORDER_BULK=0)")
    ap.add_argument("--no-loss", action="store_true",
                    help="record with wire-proxy --no-loss (the relay waits for the spool): a "
                         "file fed through cat outruns the page cache of a first write here, "
                         "and 10M frames then lose millions, counted (default with "
                         "--ten-million)")
    args = ap.parse_args()
    NO_LOSS[0] = args.no_loss or args.ten_million
    print(f"uptime: {os.getloadavg()}")
    # the loader's after-close step that writes wire-ui's index entry runs in its process too
    print(f"WIRE_UI_RECORD_INDEX={os.environ.get('WIRE_UI_RECORD_INDEX', '(unset: on)')}")
    small = 200_000 if args.quick else 10_000_000 if args.ten_million else 1_000_000
    big_mib = 256 if args.quick else 1024
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-loader-") as tmp:
        first, again = page_cache_rates(tmp)
        print(f"page cache: 512 MiB written into a new file at {first:,.0f} MB/s, over it again at "
              f"{again:,.0f} MB/s (a first write much slower: memory the VM's host took back; "
              f"default-mode bursts may then drop, counted)")
        if args.recover or args.only_recover:
            ok &= recover_case(tmp)
        if args.only_recover:
            print(f"\nuptime: {os.getloadavg()}")
            return 0 if ok else 2
        ok &= case("small frames", 200, small // 2, tmp, args.busy, plain=True,
                   frame_by_frame=args.frame_by_frame)
        if not args.only_small:
            ok &= case("2 MiB frames", 2 << 20, big_mib // 2, tmp, False, plain=False)
        if args.large_values:
            each_way = (64 if args.quick else 256) << 20
            for size in (20_000, 64 << 10, 200_000, 600_000):
                ok &= case(f"{size:,} B frames", size, each_way // size, tmp, False, plain=False)
    print(f"\nuptime: {os.getloadavg()}")
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
