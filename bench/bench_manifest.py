"""The work-dir manifest's cost to a short session (issue 27): a 2-frame session recorded by
`wire-proxy --wait 120 -- cat` in an empty folder and in a folder of N small files (default
10,000 in 100 folders), the two interleaved, each run in a fresh DB inside the folder.

Printed per folder (medians over the runs): the loader's wall time (its process from start to
exit, polled in /proc), its CPU time (user + system, last seen before it exits), the command's
end-to-end time (launch -> exit: the recording complete), the bytes of the DB left beside
it, and of them the catalog's (DuckDB's metadata blocks in use: mostly the analysis views the
loader stores, docs/design.md). The bar: from 10k files the DB <= 256 KB and the loader's wall
time within 2x of the empty folder's.

    .venv/bin/python bench/bench_manifest.py             # 7 runs each, ~1 min
    .venv/bin/python bench/bench_manifest.py --files 20000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import duckdb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import WIRE_PROXY  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
FRAME = b'{"jsonrpc":"2.0","id":1,"method":"x"}\n'


def make_tree(root: str, n: int) -> None:
    for i in range(n):
        d = os.path.join(root, "src", f"pkg{i // 100:03d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"module_{i:05d}.py"), "w") as f:
            f.write(f"# module {i}\n" + "x = 1\n" * 30)


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


def _cpu(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return None


def one(folder: str) -> dict:
    db = os.path.join(folder, f"s-{time.monotonic_ns()}.db")
    t0 = time.monotonic()
    p = subprocess.Popen([WIRE_PROXY, "-q", "--db", db, "--wait", "120", "--", "cat"], cwd=folder,
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert p.stdin is not None
    p.stdin.write(FRAME)
    p.stdin.close()
    loader = seen = None
    cpu = 0.0
    first = last = None
    while p.poll() is None or (loader is not None and os.path.exists(f"/proc/{loader}")):
        if loader is None and p.poll() is None:
            loader = _loader_of(p.pid)
            if loader is not None:
                first = time.monotonic()
        if loader is not None:
            c = _cpu(loader)
            if c is not None and os.path.exists(f"/proc/{loader}/cmdline"):
                cpu, last, seen = c, time.monotonic(), loader
        time.sleep(0.002)
    end = time.monotonic()
    p.wait()
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)
               if f.startswith(os.path.basename(db)))
    con = duckdb.connect(db, read_only=True)
    sub = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0] // 64
    catalog = sum((64 - len(free)) * sub
                  for *_, free in con.execute("PRAGMA metadata_info").fetchall())
    con.close()
    for f in os.listdir(folder):
        if f.startswith(os.path.basename(db)):
            os.unlink(os.path.join(folder, f))
    return {"loader_s": (last - first) if seen and first and last else float("nan"),
            "loader_cpu_s": cpu, "end_to_end_s": end - t0, "db_bytes": size,
            "catalog_bytes": catalog}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-manifest-")
    try:
        empty, big = os.path.join(tmp, "empty"), os.path.join(tmp, "big")
        os.makedirs(empty)
        make_tree(big, args.files)
        res: dict[str, list[dict]] = {"empty": [], "big": []}
        for _ in range(args.runs):
            for name, folder in (("empty", empty), ("big", big)):
                res[name].append(one(folder))
        print(f"load average {os.getloadavg()[0]:.1f}; {args.runs} runs each, interleaved")
        print(f"{'folder':<16}{'loader s':>10}{'loader cpu s':>14}{'end-to-end s':>14}"
              f"{'DB bytes':>11}{'catalog':>10}")
        med = {}
        for name, label in (("empty", "empty"), ("big", f"{args.files} files")):
            m = {k: statistics.median(r[k] for r in res[name]) for k in res[name][0]}
            med[name] = m
            print(f"{label:<16}{m['loader_s']:>10.2f}{m['loader_cpu_s']:>14.2f}"
                  f"{m['end_to_end_s']:>14.2f}{m['db_bytes']:>11.0f}{m['catalog_bytes']:>10.0f}")
        ratio = med["big"]["loader_s"] / med["empty"]["loader_s"]
        kb = med["big"]["db_bytes"] / 1000
        print(f"loader time {args.files} files / empty: {ratio:.2f}x (limit 2x: "
              f"{'PASS' if ratio <= 2 else 'MISS'}); DB {kb:.0f} KB (limit 256 KB: "
              f"{'PASS' if kb <= 256 else 'MISS'})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
