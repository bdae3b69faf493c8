#!/usr/bin/env python3
"""What redaction on capture costs: `wire-proxy -- cat` with redaction on (the default) against
`wire-proxy --no-redact -- cat`, in the same run, each next to plain `cat`.

    .venv/bin/python bench/bench_redact.py [--quick] [--src DIR]

For 200 B and 2 KiB frames, without secrets and with one in every frame (a fake `sk-proj-...`
key in the text, and a value under `api_key`), it measures, best of N runs in rotating order:

  relay     frames/s from the first byte written to the last byte read back (what the client and
            the agent see), as a ratio to `cat`; the bar is that redaction moves this ratio by
            at most 10% (redacted / not redacted >= 0.90)
  recorded  frames/s of both directions until the proxy exits, i.e. until its loader has stored
            every row (the sustained recording rate), redacted / not redacted

First, in this process (`--micro` alone skips the proxy runs): the Redactor's own cost per frame
(`redact_bytes`, best of several rounds) for 2 MiB frames without a secret and with one at the
start or at the end, in MB/s, beside the limit measured over the same bytes in the same run (a
`bytes.find` of a byte that is not there, i.e. memchr, and `re.search` of a trivial literal);
and for 2 KiB frames without and with a secret, in us per frame. With `--src DIR` the micro
figures are those of DIR/recorder/redact.py (e.g. a checkout of an earlier commit).

Each proxy run is checked: every frame of both directions stored, no recording gap, and in the
frames with secrets none left in the redacted DB (all of them in the unredacted one). The exit
status is 2 only when such a check failed; the 10% bar is printed as PASS/MISS.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import string
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (  # noqa: E402
    ROOT,
    Stream,
    TempDir,
    make_frame,
    proxy_argv,
    proxy_prefix,
    run_stream,
    say,
    spool_leftovers,
)
from bench_proxy import Report, git_rev, print_table, size_name  # noqa: E402

CONFIGS = {
    "quick": {"frames": {200: 60_000, 2048: 8_000}, "reps": 3},
    "full": {"frames": {200: 200_000, 2048: 40_000}, "reps": 5},
}
MAX_RELAY_MOVE = 0.10  # redaction may move the relay's ratio to cat by at most this much
SECRET_PREFIX = b"sk-proj-"
ALNUM = (string.ascii_letters + string.digits).encode()


def _key(i: int) -> bytes:
    d = hashlib.sha256(b"bench-key-%d" % i).digest()
    return SECRET_PREFIX + bytes(ALNUM[b % len(ALNUM)] for b in d[:24])


def make_secret_frame(size: int, i: int) -> bytes:
    """A Wire-like event of exactly `size` bytes with a fake key in its text and a value under
    `api_key`: both are redacted on capture."""
    key = _key(i)
    head = (b'{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart","api_key":"'
            + key[-12:] + b'","payload":{"type":"text","text":"')
    tail = b'"}}}\n'
    body = b"f%08d key %s " % (i, key)
    pad = size - len(head) - len(tail) - len(body)
    if pad < 0:
        raise ValueError(f"frame size {size} too small")
    frame = head + body + (b"abcdefghijklmnopqrstuvwxyz0123456789 " * (pad // 37 + 1))[:pad] + tail
    assert len(frame) == size
    return frame


def stream_of(size: int, total: int, secret: bool) -> Stream:
    distinct = max(1, min(total, (256 << 10) // size, 1000))
    make = make_secret_frame if secret else make_frame
    return Stream(size, [make(size, i) for i in range(distinct)], max(1, total // distinct))


def _load_redact(src: str | None):
    """recorder.redact of the installed package, or of DIR/recorder/redact.py."""
    if not src:
        from wire_recorder.recorder import redact

        return redact
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_redact_src",
                                                  os.path.join(src, "recorder", "redact.py"))
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _best(fn, data: bytes, rounds: int) -> float:
    """Seconds per call of fn(data), best of `rounds` rounds of enough calls for ~20 ms."""
    n = max(1, int(0.02 / max(_once(fn, data), 1e-7)))
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn(data)
        best = min(best, (time.perf_counter() - t) / n)
    return best


def _once(fn, data: bytes) -> float:
    t = time.perf_counter()
    fn(data)
    return time.perf_counter() - t


def micro(src: str | None, rounds: int) -> dict:
    """The Redactor's cost per frame, in this process, beside memchr and a trivial re.search."""
    import re

    mod = _load_redact(src)
    r = mod.Redactor(env_values={})
    big = 2 << 20
    secret_start = make_secret_frame(big, 1)
    plain = make_frame(big, 1)
    key = _key(7)
    # the secret in the last 100 bytes of the frame's text
    secret_end = plain[: big - 105] + b" " + key + plain[big - 104 + len(key):]
    assert len(secret_end) == big and key in secret_end
    cases = {"2 MiB no secret": plain, "2 MiB secret at start": secret_start,
             "2 MiB secret at end": secret_end}
    trivial = re.compile(rb"\x00never")
    out: dict = {}
    print(f"\nredact_bytes in-process ({'src ' + src if src else 'installed'}), best of {rounds}:")
    for name, data in cases.items():
        red = r.redact_bytes(data)
        if (key in data and key in red) or (name.endswith("no secret") and red is not data):
            raise SystemExit(f"micro: {name}: the redaction is not what it should be")
        s = _best(r.redact_bytes, data, rounds)
        lim_find = _best(lambda d: d.find(b"\x00"), data, rounds)
        lim_re = _best(trivial.search, data, rounds)
        out[name] = {"redact_MBps": len(data) / s / 1e6, "memchr_MBps": len(data) / lim_find / 1e6,
                     "re_trivial_MBps": len(data) / lim_re / 1e6}
        print(f"  {name:24s} {len(data) / s / 1e6:9,.0f} MB/s   (memchr {len(data) / lim_find / 1e6:9,.0f}"
              f" MB/s, re.search of a literal {len(data) / lim_re / 1e6:7,.0f} MB/s)")
    for name, data in {"2 KiB no secret": make_frame(2048, 1),
                       "2 KiB with secrets": make_secret_frame(2048, 1)}.items():
        s = _best(r.redact_bytes, data, rounds)
        lim_re = _best(trivial.search, data, rounds)
        out[name] = {"redact_us": s * 1e6, "re_trivial_us": lim_re * 1e6}
        print(f"  {name:24s} {s * 1e6:9.1f} us/frame (re.search of a literal {lim_re * 1e6:.2f} us)")
    return out


def check(db: str, stream: Stream, secret: bool, redacted: bool) -> list[str]:
    """Every frame of both directions stored, no gap; secrets gone iff redacted."""
    import duckdb

    if not os.path.exists(db):
        return [f"{db} was not written"]
    con = duckdb.connect(db, read_only=True)
    try:
        problems = []
        expected = stream.n_frames + 1  # + the warm-up frame
        for direction in ("c2a", "a2c"):
            (n,) = con.execute("SELECT count(*) FROM frames WHERE direction = ?", [direction]).fetchone()
            if n != expected:
                problems.append(f"{direction}: {n} frames stored, expected {expected}")
        (gaps,) = con.execute("SELECT count(*) FROM frames WHERE direction = 'proxy' "
                              "AND method = 'recording_gap'").fetchone()
        if gaps:
            problems.append(f"{gaps} recording_gap rows")
        (leaked,) = con.execute("SELECT count(*) FROM frames WHERE direction IN ('c2a', 'a2c') AND "
                                "contains(CAST(raw AS VARCHAR), ?)", [SECRET_PREFIX.decode()]).fetchone()
        want = 0 if (redacted or not secret) else 2 * stream.n_frames
        if leaked != want:
            problems.append(f"{leaked} stored frames hold a key, expected {want}")
        return problems
    finally:
        con.close()


def bench(cfg: dict, rep: Report, tmp: TempDir, proxy_cmd) -> None:
    for size, total in cfg["frames"].items():
        for secret in (False, True):
            stream = stream_of(size, total, secret)
            case = f"{size_name(size)} {'with' if secret else 'no'} secrets"
            say(f"[{case}] {stream.n_frames} frames ({stream.n_bytes / 1e6:.0f} MB), best of {cfg['reps']}")
            variants = {"cat": None, "redact": [], "no-redact": ["--no-redact"]}
            runs: dict[str, list] = {v: [] for v in variants}
            for r in range(cfg["reps"]):
                order = list(variants)
                order = order[r % len(order):] + order[:r % len(order)]
                for v in order:
                    tmp.clear()
                    if v == "cat":
                        res = run_stream(["cat"], stream)
                    else:
                        db = tmp.file("r.db")
                        res = run_stream(proxy_cmd(db, ["cat"], variants[v]), stream,
                                         stderr_path=tmp.file("stderr.txt"))
                        problems = check(db, stream, secret, redacted=(v == "redact"))
                        problems += [f"spool left: {x}" for x in spool_leftovers(tmp.path)]
                        if problems:
                            rep.lost(f"{case} {v} run {r}: {problems} stderr: {res.stderr.strip()[:300]}")
                    if not res.identical or res.rc != 0:
                        rep.errors.append(f"{case} {v}: output identical={res.identical} rc={res.rc}")
                        say(f"  !! {rep.errors[-1]}")
                    runs[v].append(res)
                    say(f"  {v:9s} run {r}: relay {stream.n_frames / res.relay_s:10,.0f} frames/s"
                        + (f", recorded {2 * (stream.n_frames + 1) / res.exit_s:10,.0f} frames/s"
                           if v != "cat" else ""))
            relay = {v: stream.n_frames / min(x.relay_s for x in rs) for v, rs in runs.items()}
            recorded = {v: 2 * (stream.n_frames + 1) / min(x.exit_s for x in rs)
                        for v, rs in runs.items() if v != "cat"}
            rep.data[case] = {"frames": stream.n_frames, "bytes": stream.n_bytes,
                              "relay_s": {v: [x.relay_s for x in rs] for v, rs in runs.items()},
                              "exit_s": {v: [x.exit_s for x in rs] for v, rs in runs.items()}}
            sec = "relay"
            rep.row(sec, case, "cat frames/s", relay["cat"])
            for v in ("no-redact", "redact"):
                rep.row(sec, case, f"proxy {v} frames/s", relay[v], "", "cat", relay[v] / relay["cat"])
            move = (relay["redact"] / relay["cat"]) / (relay["no-redact"] / relay["cat"])
            rep.row(sec, case, "redact / no-redact (ratio to cat)", move, "", None, None,
                    f">= {1 - MAX_RELAY_MOVE:.2f}", move >= 1 - MAX_RELAY_MOVE)
            sec = "recorded"
            for v in ("no-redact", "redact"):
                rep.row(sec, case, f"proxy {v} frames/s (c2a+a2c)", recorded[v])
            rep.row(sec, case, "redact / no-redact", recorded["redact"] / recorded["no-redact"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer frames and runs (~2 min)")
    ap.add_argument("--src", help="benchmark the recorder package found in DIR (a scratch copy "
                    "of the repo) instead of the installed wire-proxy")
    ap.add_argument("--no-json", action="store_true")
    ap.add_argument("--micro", action="store_true", help="only the in-process figures (~10 s)")
    args = ap.parse_args()
    mode = "quick" if args.quick else "full"
    cfg = CONFIGS[mode]
    micro_data = micro(args.src, 3 if args.quick else 7)
    if args.micro:
        return 0
    prefix = proxy_prefix(args.src)
    if prefix is None:
        return 1

    def proxy_cmd(db: str, agent: list[str], extra: list[str]) -> list[str]:
        argv = proxy_argv(db, agent)
        cut = argv.index("--")
        return prefix + argv[1:cut] + extra + argv[cut:]

    rep = Report()
    tmp = TempDir(prefix="wire-bench-redact-")
    # from the temp dir: no project config of this checkout applies, and `python -m` in the
    # loader cannot pick up ./recorder instead of --src
    os.chdir(tmp.path)
    os.environ["WIRE_RECORDER_HOME"] = tmp.file("home")
    started = time.time()
    try:
        bench(cfg, rep, tmp, proxy_cmd)
    finally:
        tmp.cleanup()
    elapsed = time.time() - started

    print()
    print(f"redaction benchmark ({mode}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
          f"{elapsed:.0f} s, src {args.src or 'installed'} @ {git_rev()})")
    print_table(rep)
    misses = [f"{r['case']} {r['metric']}" for r in rep.rows if r["pass"] is False]
    print()
    print(f"bar (relay ratio moved by <= {MAX_RELAY_MOVE:.0%}): "
          f"{sum(1 for r in rep.rows if r['pass'])} pass, {len(misses)} missed"
          + (": " + "; ".join(misses) if misses else ""))
    if rep.loss:
        print("\n!!! RECORDING CHECK FAILED !!!\n" + "\n".join("  " + x for x in rep.loss))
    if rep.errors:
        print("\nERRORS:\n" + "\n".join("  " + x for x in rep.errors))
    if not args.no_json:
        out_dir = os.path.join(ROOT, "bench", "results")
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, f"bench_redact-{time.strftime('%Y%m%dT%H%M%S')}-{mode}.json")
        with open(path, "w") as f:
            json.dump({"mode": mode, "src": args.src, "git": git_rev(), "started": started,
                       "elapsed_s": elapsed, "cpus": os.cpu_count(), "loadavg": os.getloadavg(),
                       "python": platform.python_version(), "config": {k: str(v) for k, v in cfg.items()},
                       "micro": micro_data, "rows": rep.rows, "data": rep.data, "loss": rep.loss, "errors": rep.errors},
                      f, indent=1, default=str)
        print(f"\nresults: {os.path.relpath(path, ROOT)}")
    return 2 if rep.loss or rep.errors else 0


if __name__ == "__main__":
    sys.exit(main())
