"""Benchmark: bytes on disk per small session (issue 14 item 5; target: a few frames <= 256 KB).

    .venv/bin/python bench/bench_files.py                  # ~20 s
    .venv/bin/python bench/bench_files.py --long 0         # small sessions only

Each session is recorded by the real `wire-proxy -- cat` (N client frames echoed: 2N frames plus
the proxy's lifecycle rows), from an empty work dir, one file per session as by default. Printed
beside it, measured in the same run:

* the same rows in a plain DuckDB file with one table (`CREATE TABLE frames AS ...`, DuckDB's
  defaults): the floor for any DuckDB file;
* the recording copied into files of other block sizes (`COPY FROM DATABASE`): 256 KiB is
  DuckDB's default (what recordings used before), 64 KiB the smallest at which DuckDB still
  bit-packs integer columns;
* one file per day: 20 two-frame sessions appended to one file, bytes per session;
* a long session (`--long N` generated frames shaped like kimi's, bench_stats.py's generator):
  what the small blocks cost there, the same rows copied at 256 KiB beside it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import duckdb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from _common import WIRE_PROXY, TempDir, make_frame  # noqa: E402

from wire_recorder.recorder.store import (  # noqa: E402
    BLOCK_SIZE,
    GROW_ROWS,
    LOADING_BLOCK_SIZE,
    STORAGE_COMPATIBILITY,
)

TARGET = 256 * 1024
SIZES = (1, 2, 10, 100)
OTHER_BLOCKS = (64 * 1024, 256 * 1024)


def record(db: str, n: int, cwd: str) -> None:
    data = b"".join(make_frame(200, i) for i in range(n))
    # --wait: the file is measured right after; by default the proxy exits before its loader
    p = subprocess.run([WIRE_PROXY, "-q", "--wait", "600", "--db", db, "--", "cat"], input=data,
                       cwd=cwd, capture_output=True, timeout=120)
    if p.returncode != 0 or p.stdout != data:
        raise SystemExit(f"wire-proxy failed ({p.returncode}): {p.stderr.decode()[-500:]}")


def on_disk(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + ".wal", path + ".blobs")
               if os.path.exists(p))


def plain_one_table(db: str, out: str) -> int:
    """The recording's frames in a plain DuckDB file with one table, DuckDB's defaults."""
    con = duckdb.connect(out)
    try:
        con.execute(f"ATTACH '{db}' AS rec (READ_ONLY)")
        con.execute("CREATE TABLE frames AS SELECT * FROM rec.frames")
    finally:
        con.close()
    return on_disk(out)


def copied(db: str, out: str, block: int) -> int:
    """The whole recording (every table) in a new file of `block`-byte blocks."""
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{db}' AS rec (READ_ONLY)")
        con.execute(f"ATTACH '{out}' AS out (BLOCK_SIZE {block}, "
                    f"STORAGE_VERSION '{STORAGE_COMPATIBILITY}')")
        con.execute("COPY FROM DATABASE rec TO out")
        con.execute("DETACH out")
    finally:
        con.close()
    return on_disk(out)


def rows(db: str) -> int:
    con = duckdb.connect(db, read_only=True)
    try:
        row = con.execute("SELECT count(*) FROM frames").fetchone()
        return row[0] if row else 0
    finally:
        con.close()


def kb(n: int) -> str:
    return f"{n / 1024:,.0f} KiB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--long", type=int, default=100_000, help="frames of the long session (0: none)")
    a = ap.parse_args()
    tmp = TempDir()
    os.environ["WIRE_RECORDER_HOME"] = tmp.file("home")
    work = tmp.file("work")
    os.makedirs(work)
    ok = True
    try:
        print(f"recordings: {BLOCK_SIZE // 1024} KiB blocks, storage {STORAGE_COMPATIBILITY}; "
              f"target <= {kb(TARGET)} for a few frames")
        head = ["client frames", "rows", "recording", "plain DuckDB, 1 table"] + \
            [f"same at {b // 1024} KiB blocks" for b in OTHER_BLOCKS] + ["target"]
        print(" | ".join(head))
        for n in SIZES:
            db = tmp.file(f"s{n}.db")
            record(db, n, work)
            size = on_disk(db)
            plain = plain_one_table(db, tmp.file(f"plain{n}.db"))
            others = [copied(db, tmp.file(f"s{n}-{b}.db"), b) for b in OTHER_BLOCKS]
            verdict = "PASS" if size <= TARGET else "MISS"
            ok = ok and size <= TARGET
            print(" | ".join([str(n), str(rows(db)), f"{size:,} B", f"{plain:,} B"] +
                             [f"{o:,} B" for o in others] + [verdict]))

        day = tmp.file("day.db")
        sizes = []
        for _ in range(20):
            record(day, 2, work)
            sizes.append(on_disk(day))
        per = (sizes[-1] - sizes[0]) / (len(sizes) - 1)
        print(f"one file per day: 20 two-frame sessions in {sizes[-1]:,} B "
              f"({sizes[-1] / 20:,.0f} B per session; each after the first adds {per:,.0f} B)")

        if a.long:
            from bench_stats import generate

            long_db = tmp.file("long.db")
            generate(long_db, a.long, progress=False)
            size = on_disk(long_db)
            big = copied(long_db, tmp.file("long-256.db"), 256 * 1024)
            print(f"long session, {a.long:,} frames: {size:,} B ({size / a.long:,.0f} B/frame); "
                  f"at 256 KiB blocks {big:,} B ({big / a.long:,.0f} B/frame): "
                  f"{size / big:.2f}x")
        print(f"chosen: {BLOCK_SIZE // 1024} KiB blocks for new files (recorder/store.py "
              f"BLOCK_SIZE), copied into {LOADING_BLOCK_SIZE // 1024} KiB blocks by the loader "
              f"once a session in a file it created has {GROW_ROWS:,} rows; one file per session")
    finally:
        tmp.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
