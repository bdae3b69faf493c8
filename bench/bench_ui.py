"""Benchmark: wire-ui — start to URL, the index of 10,000 sessions served, and the first paint of
a 100,000-frame session's view in headless Chromium.

    .venv/bin/python bench/bench_ui.py                       # 10,000 sessions + one of 100,000 frames
    .venv/bin/python bench/bench_ui.py --sessions 2000 --frames 20000   # quicker

The recordings are generated as bench_stats.py makes them (kimi 1.51.0's frames, classified by
the loader's own code): many one-turn sessions in one file for the index, one long session in
another for the session view. Numbers:

* start → URL: from spawning `wire-ui --no-browser` to its URL line on stdout (median of 5);
* index built: the background read of every session (attach, views, the index query), once;
* index served: GET /api/index of the first page sorted by start, and with a search word and a
  sort on tokens (median of 20 each) — what the page asks on every keystroke;
* files cold / warm: folders of 10,000 one-session files (wire-proxy's default layout,
  `--files`), with the summary the loader stores and without it (older files): the index built
  with no cache (first rows shown, every row, then the search text), then again as a second
  start does (rows of unchanged files from the index cache), beside the floor measured in the
  same run (ATTACH, one read, DETACH a file) and the cache's size;
* first paint: from navigating Chromium to the session to the first conversation items in the
  DOM (the first 500 items are asked for beside the header, cards and timeline, and drawn
  first); cold (read from the file) and warm (cached on the server).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import orjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from bench_stats import Gen  # noqa: E402

from wire_recorder.recorder.classify import classify  # noqa: E402
from wire_recorder.recorder.model import wall_ts  # noqa: E402
from wire_recorder.recorder.store import open_store  # noqa: E402

BIN = os.path.join(ROOT, ".venv", "bin")


def write(db: str, sessions: int, turns: int, prefix: str) -> int:
    gen = Gen(11)
    store = open_store(db)
    total = 0
    batch: list[tuple] = []
    for n in range(1, sessions + 1):
        sid = f"{prefix}-{n:06d}"
        wall0 = 1_790_000_000 * 10**9 + n * 3_600 * 10**9
        mono0 = n * 10**13
        seq = 0
        ns = 0
        for direction, raw, ms in gen.session(turns=turns):
            seq += 1
            ns = int(ms * 1e6)
            if direction in ("proxy", "stderr"):
                kind = "lifecycle" if direction == "proxy" else "stderr"
                method = orjson.loads(raw).get("event") if direction == "proxy" else None
                row = (sid, seq, wall_ts(wall0 + ns), mono0 + ns, direction, raw, True, len(raw),
                       kind, method, None, None, None, None, None, None, None)
            else:
                ex = classify(raw, direction)
                row = (sid, seq, wall_ts(wall0 + ns), mono0 + ns, direction, raw, True, len(raw),
                       ex.kind, ex.method, ex.rpc_id, ex.msg_type, ex.payload, ex.parse_error,
                       ex.known, None, ex.anomaly)
            batch.append(row)
        total += seq
        store.upsert_session({"session_id": sid, "name": f"{prefix} {n}", "started_at": wall_ts(wall0),
                              "ended_at": wall_ts(wall0 + ns), "protocol": "wire",
                              "protocol_version": "1.10", "source": "proxy", "frame_count": seq,
                              "mono_start_ns": mono0, "command": '["kimi","--wire"]',
                              "tags": json.dumps({"n": str(n % 7)}), "exit_code": 0,
                              "end_reason": "agent_exit"})
        if len(batch) >= 100_000:
            store.insert_frames(batch)
            batch = []
    store.insert_frames(batch)
    store.con.execute("CHECKPOINT")
    store.close()
    return total


def start(paths: list[str]) -> tuple[subprocess.Popen, str, float]:
    t0 = time.perf_counter()
    p = subprocess.Popen([os.path.join(BIN, "wire-ui"), "--no-browser", *paths],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout
    url = p.stdout.readline().strip()
    return p, url, time.perf_counter() - t0


def get(base: str, token: str, path: str) -> tuple[dict, float]:
    t0 = time.perf_counter()
    sep = "&" if "?" in path else "?"
    with urllib.request.urlopen(f"{base}{path}{sep}token={token}", timeout=600) as r:
        body = r.read()
    return orjson.loads(body), time.perf_counter() - t0


def attach_floor(files: list[str]) -> float:
    """ms a file of the least any index must do: ATTACH read-only, read one row, DETACH (one
    core, the same files)."""
    import duckdb

    con = duckdb.connect(":memory:", config={"threads": 1})
    t = time.perf_counter()
    for f in files:
        con.execute(f"ATTACH '{f}' AS r (READ_ONLY)")
        con.execute("SELECT value FROM r.meta LIMIT 1").fetchall()
        con.execute("DETACH r")
    con.close()
    return (time.perf_counter() - t) / len(files) * 1000


def timed_build(folder: str, cache: str) -> dict:
    """One index build as wire-ui's background thread runs it: when the first rows, every row
    and the search text were served."""
    import threading

    from wire_recorder.analysis.ui.data import Catalog

    cat = Catalog([folder], cache=cache)
    th = threading.Thread(target=cat.build)
    t = time.perf_counter()
    th.start()
    first = rows = None
    while th.is_alive():
        if first is None and cat.rows:
            first = time.perf_counter() - t
        if rows is None and cat.ready:
            rows = time.perf_counter() - t
        time.sleep(0.005)
    th.join()
    done = time.perf_counter() - t
    return {"first": first if first is not None else done, "rows": rows if rows is not None else done,
            "search": done, "sessions": len(cat.rows), "read": cat.files_read,
            "problems": cat.problems[:2]}


def files_case(d: str, n: int) -> None:
    """wire-proxy's default layout: a file per session. `n` copies of one small recording in a
    folder, with the summary the loader stores (`stored`) and without (`computed`: files of an
    older wire-recorder); the index built cold (no cache) and warm (a second start: rows of
    unchanged files from the index cache), as wire-ui's background build does it. The floor:
    an ATTACH, one read and a DETACH a file, on one core, and that over two cores for n files."""
    import shutil

    from wire_recorder.analysis.summary import write_summaries

    seed = os.path.join(d, "seed.db")
    if not os.path.exists(seed):
        write(seed, 1, 1, "one")
    seeds = {"computed": seed, "stored": os.path.join(d, "seed-summary.db")}
    if not os.path.exists(seeds["stored"]):
        shutil.copyfile(seed, seeds["stored"])
        st = open_store(seeds["stored"])
        write_summaries(st.con)
        st.con.execute("CHECKPOINT")
        st.close()
    for label, src in seeds.items():
        folder = os.path.join(d, f"sessions-{label}")
        os.makedirs(folder, exist_ok=True)
        for i in range(n):
            f = os.path.join(folder, f"{i:06d}.db")
            if not os.path.exists(f):
                shutil.copyfile(src, f)
    some = sorted(os.listdir(os.path.join(d, "sessions-stored")))[:min(n, 2000)]
    floor = attach_floor([os.path.join(d, "sessions-stored", f) for f in some])
    print(f"files: {n:,} one-session files; floor (attach + one read + detach) "
          f"{floor:.2f} ms a file on one core = {floor * n / 2000:.1f} s for {n:,} on two")
    for label in seeds:
        cache = os.path.join(d, f"ui-index-{label}.bin")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(cache)
        for run in ("cold", "warm"):
            r = timed_build(os.path.join(d, f"sessions-{label}"), cache)
            print(f"files_{label}_{run:4}  first rows {r['first']:7.3f} s  all rows {r['rows']:7.3f} s "
                  f"({r['rows'] / n * 1000:.2f} ms a file: {r['rows'] * 1000 / n / floor:.1f}x "
                  f"the one-core floor, {r['rows'] * 1000 / n / floor * 2:.1f}x the two-core "
                  f"one)  search text {r['search']:7.3f} s  "
                  f"({r['sessions']:,} sessions, {r['read']:,} files read) {r['problems'] or ''}")
        import zlib

        size = os.path.getsize(cache)
        with open(cache, "rb") as fh:
            plain = len(zlib.decompress(fh.read()))
        # the copies' text is all alike, which flatters the compression: both sizes shown
        print(f"files_{label}_cache   {size / 1e6:.1f} MB ({size / n:,.0f} B a session; "
              f"{plain / n:,.0f} B a session before compression)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=10_000,
                    help="the file-per-session folder case (0: skip it)")
    ap.add_argument("--only-files", action="store_true", help="run the folder case alone")
    ap.add_argument("--keep", help="a folder to keep the generated files in")
    args = ap.parse_args()
    d = args.keep or tempfile.mkdtemp(prefix="bench-ui-")
    os.makedirs(d, exist_ok=True)
    if args.files:
        files_case(d, args.files)
    if args.only_files:
        return
    many, big = os.path.join(d, "many.db"), os.path.join(d, "big.db")
    if not os.path.exists(many):
        t = time.time()
        n = write(many, args.sessions, 1, "s")
        print(f"generated {args.sessions:,} sessions ({n:,} frames) in {time.time() - t:.0f} s")
    if not os.path.exists(big):
        t = time.time()
        turns = max(1, args.frames // 140)
        n = write(big, 1, turns, "big")
        print(f"generated one session of {n:,} frames in {time.time() - t:.0f} s")
    out: dict[str, float] = {}

    starts = []
    for _ in range(5):
        p, url, dt = start([many])
        starts.append(dt)
        p.terminate()
        p.wait()
    out["start_to_url_s"] = statistics.median(starts)

    p, url, _ = start([many, big])
    try:
        base, token = url.split("/?token=")
        t0 = time.perf_counter()
        while True:
            d0, _ = get(base, token, "/api/index")
            if d0["ready"]:
                break
            time.sleep(0.05)
        out["index_built_s"] = time.perf_counter() - t0
        out["index_server_build_ms"] = d0["build_ms"]
        out["sessions"] = d0["total"]
        out["index_page_s"] = statistics.median(get(base, token, "/api/index?sort=started_at")[1] for _ in range(20))
        out["index_search_s"] = statistics.median(
            get(base, token, "/api/index?q=tests&sort=tokens&desc=1")[1] for _ in range(20))
        key = get(base, token, "/api/index?q=big-000001")[0]["rows"][0]["key"]
        chromium = "/usr/lib/chromium/chromium" if os.path.exists("/usr/lib/chromium/chromium") else None
        if chromium:
            from tests.harness.browser import Browser

            with tempfile.TemporaryDirectory() as prof, Browser(chromium, Path(prof)) as b:
                b.goto(url)
                b.wait_for("document.querySelectorAll('tr.row').length")
                for label in ("first_paint_cold_s", "first_paint_warm_s"):
                    b.eval("location.hash = ''")
                    b.wait_for("document.querySelectorAll('tr.row').length")
                    t0 = time.perf_counter()
                    b.eval(f"location.hash = '#s/' + encodeURIComponent({json.dumps(key)})")
                    b.wait_for("document.querySelectorAll('.item').length >= 500", timeout=600)
                    out[label] = time.perf_counter() - t0
                out["items_painted"] = b.eval("document.querySelectorAll('.item').length")
        q = urllib.parse.quote(key)
        s, out["session_api_warm_s"] = get(base, token, f"/api/session?k={q}")
        it, out["items_api_warm_s"] = get(base, token, f"/api/items?k={q}&from=0")
        out["big_frames"] = s["counts"]["frames"]
        out["big_items_first_page"] = len(it["items"])
    finally:
        p.terminate()
        p.wait()
    # the two requests of a session's first paint, each cold, on a server of their own
    for first in ("items", "session"):
        p, url, _ = start([many, big])
        try:
            base, token = url.split("/?token=")
            while not get(base, token, "/api/index")[0]["ready"]:
                time.sleep(0.05)
            key = get(base, token, "/api/index?q=big-000001")[0]["rows"][0]["key"]
            q = urllib.parse.quote(key)
            out[f"{first}_api_cold_s"] = get(base, token, f"/api/{first}?k={q}&from=0")[1]
        finally:
            p.terminate()
            p.wait()
    for k, v in out.items():
        print(f"{k:24} {v:,.3f}" if isinstance(v, float) else f"{k:24} {v:,}")


if __name__ == "__main__":
    main()
