"""A burst of large frames through wire-proxy: where the time goes, and what the recording loses.

    .venv/bin/python bench/bench_burst.py                 # 5 runs of 1 GiB of 2 MiB frames
    .venv/bin/python bench/bench_burst.py --runs 1 --mib 256

Each run times, over the same stream (`proxy -- cat`, echoed back to the client):
  cat        a plain `cat` (the pipe's limit)
  relay      `wire-proxy --no-record` (relay threads only)
  record     `wire-proxy` (spool writer + loader): the default, which never slows the relay
  no-loss    `wire-proxy --no-loss` (the relay waits for the spool writer instead of dropping)
and prints each time as a ratio to `cat`, the time until the recording is complete (the proxy
waits for its loader), the frames the recording lost (sessions.lost_frames and the gap rows;
checked against the frames sent), and the peak RSS (VmHWM) of the proxy and of its loader.
Then, once, the parts alone on a quarter of the burst: the spool writer (queue, checksums,
writev) as MB/s, and the loader over that spool with and without redaction.
Exit status 2 when the relayed bytes differed from the input (a loss in the recording is a
measurement here, not a failure).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (  # noqa: E402
    TempDir,
    check_recording,
    is_loader_alive,
    proxy_prefix,
    run_stream,
    say,
    spool_leftovers,
    stop_loader,
    stream_for,
)

MB = 1 << 20


def recorded_loss(db: str) -> tuple[int, int]:
    """(sessions.lost_frames, sum of the frames the gap rows count)."""
    import duckdb
    import orjson

    if not os.path.exists(db):
        return (-1, -1)
    con = duckdb.connect(db, read_only=True)
    try:
        (lost,) = con.execute("SELECT coalesce(sum(lost_frames), 0) FROM sessions").fetchone()
        gaps = con.execute("SELECT payload FROM frames WHERE method = 'recording_gap'").fetchall()
        return int(lost), sum(int(orjson.loads(p).get("frames") or 0) for (p,) in gaps)
    finally:
        con.close()


def parts_alone(mib: int, frame: bytes, folder: str) -> None:
    """Where the time goes: the spool writer and the loader, each on its own."""
    import time

    from wire_recorder.recorder.loader import ingest_spool
    from wire_recorder.recorder.spool import A2C, C2A, SpoolWriter

    n = max(1, (mib << 20) // len(frame))
    for redact in (True, False):
        db = os.path.join(folder, f"parts-{redact}.db")
        spool = f"{db}.p.spool"
        meta = {"session_id": "p", "started_wall_ns": time.time_ns(), "db": db, "cwd": folder,
                "mono_start_ns": time.monotonic_ns(), "redact": redact}
        t0 = time.perf_counter()
        w = SpoolWriter(spool, meta, no_loss=True)
        for _ in range(n):
            for k in range(0, len(frame), 65536):
                w.put(C2A, frame[k:k + 65536])
                w.put(A2C, frame[k:k + 65536])
        w.close()
        t1 = time.perf_counter()
        ingest_spool(spool, follow=False)
        t2 = time.perf_counter()
        total = 2 * n * len(frame) / MB
        if redact:
            say(f"parts alone ({total:.0f} MiB spooled, both directions): spool writer "
                f"{total / (t1 - t0):.0f} MB/s")
        say(f"  loader, redaction {'on ' if redact else 'off'}: {total / (t2 - t1):.0f} MB/s "
            f"({t2 - t1:.1f} s)")
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mib", type=int, default=1024, help="burst size in MiB (default 1 GiB)")
    ap.add_argument("--frame-mib", type=int, default=2)
    ap.add_argument("--wait", type=float, default=300, help="proxy --wait (loader completion)")
    ap.add_argument("--src", help="benchmark the package in another source tree")
    args = ap.parse_args()
    prefix = proxy_prefix(args.src)
    if prefix is None:
        return 2
    size = args.frame_mib * MB
    stream = stream_for(size, args.mib // args.frame_mib)
    tmp = TempDir()
    bad = False
    rows = []
    say(f"{args.runs} run(s) of {stream.n_bytes / MB:.0f} MiB in {stream.n_frames} frames of "
        f"{args.frame_mib} MiB, proxy -- cat, echoed back")
    for run in range(1, args.runs + 1):
        tmp.clear()
        cat = run_stream(["cat"], stream, keep_output=False)
        bad |= not cat.identical
        out = {"run": run, "cat_s": cat.relay_s}
        for case, extra in (("relay", ["--no-record"]), ("record", []),
                            ("no-loss", ["--no-loss"])):
            db = tmp.file(f"{case}.db")
            argv = [*prefix, "-q", "--db", db, "--wait", str(args.wait), *extra, "--", "cat"]
            res = run_stream(argv, stream, keep_output=False, poll_rss=True,
                             stderr_path=tmp.file(f"{case}.stderr"))
            bad |= not res.identical
            pk = res.peak
            r = {"ratio": res.relay_s / cat.relay_s, "exit_s": res.exit_s,
                 "proxy_mb": pk.get("proxy_hwm_kb", 0) / 1024,
                 "loader_mb": pk.get("loader_hwm_kb", 0) / 1024}
            if case != "relay":
                # a spool left means the proxy gave up waiting (--wait); a loader still
                # winding down after it said "stored" is not unfinished
                if spool_leftovers(tmp.path) and is_loader_alive(pk.get("loader_pid")):
                    stop_loader(pk["loader_pid"])
                    r["lost"] = "unfinished"
                else:
                    chk = check_recording(db, stream, content=False)
                    lost, marked = recorded_loss(db)
                    sent = 2 * (stream.n_frames + 1)
                    stored = (chk["c2a"] or 0) + (chk["a2c"] or 0)
                    r["lost"] = f"{lost}/{sent} (gap rows {marked}, stored {stored})"
            out[case] = r
            tmp.clear()
        rows.append(out)
        say(f"run {run}: cat {cat.relay_s:.2f} s ({stream.n_bytes / cat.relay_s / MB:.0f} MB/s)")
        for case in ("relay", "record", "no-loss"):
            r = out[case]
            say(f"  {case:8} {r['ratio']:5.2f}x cat  recorded after {r['exit_s']:6.2f} s  "
                f"proxy {r['proxy_mb']:5.0f} MB  loader {r['loader_mb']:5.0f} MB  "
                f"lost {r.get('lost', '-')}")
    tmp.clear()
    parts_alone(args.mib // 4, stream.frames[0], tmp.path)
    tmp.cleanup()
    if bad:
        say("!! the relayed bytes differed from the input")
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
