"""Benchmark: readers over one session of 10^7 small frames (issue 28, item 4).

    .venv/bin/python bench/bench_big.py                    # 10,000,000 frames, temp folder
    .venv/bin/python bench/bench_big.py --frames 1000000 --keep /tmp/big.db

The recording is a real one (sample_sessions/approve_shell.jsonl, imported) whose session is
then grown with DuckDB SQL, in the store's own schema, by N streamed `ContentPart` events (the
bulk of a real session), a few seconds for 10^7. Each reader runs as a whole command; its wall
time and peak RSS (the process and its children, from wait4) are printed. The target is
<= 512 MB RSS for each (measured here, not asserted in tests).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)


# what the added frames are: streamed text events, or (`rpc`) requests of the agent to the
# client and their answers in turn (every pair a row of the request views)
KINDS = {
    "text": ("'a2c'", "'notification'", "'event'", "NULL", "'ContentPart'",
             """'{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart",'
               || '"payload":{"type":"text","text":"w' || (i % 97) || ' "}}}'"""),
    "rpc": ("CASE WHEN i % 2 = 1 THEN 'a2c' ELSE 'c2a' END",
            "CASE WHEN i % 2 = 1 THEN 'request' ELSE 'response' END",
            "CASE WHEN i % 2 = 1 THEN 'request' END", "'q' || ((i + 1) // 2)",
            "CASE WHEN i % 2 = 1 THEN 'ApprovalRequest' END",
            """CASE WHEN i % 2 = 1 THEN '{"jsonrpc":"2.0","method":"request","id":"q'
               || ((i + 1) // 2) || '","params":{"type":"ApprovalRequest","payload":{"id":"q'
               || ((i + 1) // 2) || '","tool_call_id":"t","sender":"Shell","action":"run",'
               || '"description":"ls"}}}' ELSE '{"jsonrpc":"2.0","id":"q' || (i // 2)
               || '","result":{"request_id":"q' || (i // 2) || '","response":"approve"}}' END"""),
}


def grow(db: str, frames: int, kind: str = "text") -> str:
    """Add `frames` frames of `kind` (KINDS) to the file's only session (after its own frames);
    returns the session id."""
    import duckdb

    con = duckdb.connect(db)
    try:
        sid, last, mono = con.execute(
            "SELECT session_id, max(seq), max(mono_ns) FROM frames GROUP BY ALL").fetchone()
        con.execute("""
            INSERT INTO frames (session_id, seq, ts, mono_ns, direction, raw, newline, byte_len,
                                kind, method, rpc_id, msg_type, payload, parse_error, known,
                                blob_offset, anomaly)
            SELECT $sid, $last + i, TIMESTAMP '2026-01-01' + to_microseconds(i), $mono + i * 1000,
                   {d}, encode(r), true, octet_length(encode(r)), {k}, {m}, {rid}, {t}, r::JSON,
                   NULL, true, NULL, NULL
            FROM (SELECT i, {raw} AS r FROM range(1, $n + 1) t(i))""".format(
            **dict(zip(("d", "k", "m", "rid", "t", "raw"), KINDS[kind], strict=True))),
            {"sid": sid, "last": last, "mono": mono, "n": frames})
        con.execute("UPDATE sessions SET frame_count = frame_count + $n", {"n": frames})
        # the stored summary (if any) described the small session: let readers compute theirs
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        for t in ("session_summaries", "ui_index"):
            if t in tables:
                con.execute(f"DELETE FROM {t}")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return sid


def build(path: str, frames: int, kind: str = "text") -> str:
    src = os.path.join(ROOT, "sample_sessions", "approve_shell.jsonl")
    subprocess.run([os.path.join(BIN, "wire-import"), src, "--db", path, "-q"], check=True)
    return grow(path, frames, kind)


def measure(argv: list[str], stdin=None) -> tuple[float, float, int, str]:
    """(seconds, peak RSS MB of the command and its children, exit code, last line)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=stdin)
    assert proc.stdout
    last = b""
    for line in proc.stdout:
        last = line or last
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    return took, usage.ru_maxrss / 1024, code, last.decode(errors="replace").strip()[:120]


def ui_session_view(db: str, cache: str) -> tuple[float, float, int, str]:
    """wire-ui started on the file; the session view (its header and first page) asked for."""
    import http.client
    import json
    import urllib.parse

    env = {**os.environ, "XDG_CACHE_HOME": cache}
    t0 = time.monotonic()
    ui = subprocess.Popen([os.path.join(BIN, "wire-ui"), "--no-browser", db],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert ui.stdout
        url = urllib.parse.urlsplit(ui.stdout.readline().strip())
        token = urllib.parse.parse_qs(url.query)["token"][0]

        def get(path: str) -> dict:
            c = http.client.HTTPConnection("127.0.0.1", url.port, timeout=600)
            c.request("GET", f"{path}{'&' if '?' in path else '?'}token={token}")
            out = json.loads(c.getresponse().read())
            c.close()
            return out

        index = get("/api/index")
        while not index.get("ready"):
            time.sleep(0.5)
            index = get("/api/index")
        key = urllib.parse.quote(index["rows"][0]["key"])
        get(f"/api/session?k={key}")
        page = get(f"/api/items?k={key}&from=0&n=200")
        get(f"/api/frames?k={key}&seq=5000000&n=100")
        took = time.monotonic() - t0
        with open(f"/proc/{ui.pid}/status") as fh:
            hwm = next(int(x.split()[1]) for x in fh if x.startswith("VmHWM"))
        return took, hwm / 1024, 0, f"{len(page['items'])} items, more={page['more']}"
    finally:
        ui.terminate()
        ui.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=10_000_000)
    ap.add_argument("--keep", help="build (or reuse) the recording here")
    ap.add_argument("--only", default="show,check,stats,ui")
    ap.add_argument("--kind", choices=sorted(KINDS), default="text",
                    help="the frames added: streamed text, or approval requests and answers")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="wr-big-")
    try:
        db = args.keep or os.path.join(tmp, "big.db")
        if not os.path.exists(db):
            t0 = time.monotonic()
            build(db, args.frames, args.kind)
            print(f"built {db}: {args.frames:,} frames, {os.path.getsize(db) / 1e6:.0f} MB, "
                  f"{time.monotonic() - t0:.1f} s")
        runs = {"show": [os.path.join(BIN, "wire-show"), db],
                "check": [os.path.join(BIN, "wire-check"), db],
                "stats": [os.path.join(BIN, "wire-stats"), db]}
        for name in args.only.split(","):
            if name == "ui":
                took, rss, code, last = ui_session_view(db, os.path.join(tmp, "cache"))
            else:
                took, rss, code, last = measure(runs[name], stdin=subprocess.DEVNULL)
            print(f"wire-{name:6} {took:7.1f} s  {rss:7.0f} MB peak RSS  exit {code}  | {last}")
            sys.stdout.flush()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        resource.getrusage(resource.RUSAGE_CHILDREN)


if __name__ == "__main__":
    main()
