"""Benchmark: `wire-stats` over a million generated frames, and the size on disk per million.

    .venv/bin/python bench/bench_stats.py                 # 1,000,000 frames, temp folder
    .venv/bin/python bench/bench_stats.py --frames 200000 --keep /tmp/b.db

The frames are generated, not recorded, but shaped like the real agent's traffic: every frame is
built as kimi 1.51.0 serialises it and classified by `recorder.classify.classify` (the loader's
own code), so the extracted columns are exactly what the proxy would store. Per LLM step:
streamed think and text chunks (the bulk, as with a real model), a tool call with streamed
arguments, a StatusUpdate with token counts, a ToolResult, and for 40% of the calls an approval
round trip; one turn in ten delegates to a subagent. Timings are whole commands (process start,
imports, opening the file, the summary), median of several runs. The per-session summaries the
loader stores (analysis/summary.py) are written as it would; the same file without them is
timed too, and the after-load step's own cost for a small, a median and the largest session.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import orjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from wire_recorder.analysis.summary import read_summaries, store_summaries  # noqa: E402
from wire_recorder.recorder.classify import classify  # noqa: E402
from wire_recorder.recorder.model import wall_ts  # noqa: E402
from wire_recorder.recorder.store import open_store  # noqa: E402

TOOLS = [("Shell", 0.4, (5, 4000)), ("ReadFile", 0.0, (1, 30)), ("Grep", 0.0, (5, 300)),
         ("WriteFile", 0.4, (2, 40)), ("lookup_weather", 0.0, (50, 900))]
WORDS = ("the quick brown fox jumps over a lazy dog while reading files and running tests "
         "to find where tokens go").split()


def _ev(t: str, payload) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": "event", "params": {"type": t, "payload": payload}})


def _req(t: str, rid: str, payload) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": "request", "id": rid,
                         "params": {"type": t, "payload": payload}})


class Gen:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def words(self, n: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    def session(self, turns: int):
        """Yield (direction, raw bytes, ms since start) for one session."""
        r = self.rng
        t = 0.0

        def at(dt_ms: float):
            nonlocal t
            t += dt_ms
            return t

        yield "proxy", b'{"argv":["kimi","--wire"],"pid":1,"event":"spawn"}', at(0)
        yield "c2a", orjson.dumps({"jsonrpc": "2.0", "method": "initialize", "id": "init-1",
                                   "params": {"protocol_version": "1.10"}}), at(1)
        yield "a2c", orjson.dumps({"jsonrpc": "2.0", "id": "init-1", "result": {
            "protocol_version": "1.10", "server": {"name": "Kimi Code CLI", "version": "1.51.0"}}}), at(3000)
        call_n = 0
        for turn in range(1, turns + 1):
            pid = f"p-{turn}"
            text = self.words(r.randint(3, 20))
            yield "c2a", orjson.dumps({"jsonrpc": "2.0", "method": "prompt", "id": pid,
                                       "params": {"user_input": text}}), at(r.uniform(2000, 60000))
            yield "a2c", _ev("TurnBegin", {"user_input": text}), at(1)
            steps = r.randint(1, 6)
            for step in range(1, steps + 1):
                yield "a2c", _ev("StepBegin", {"n": step}), at(2)
                for _ in range(r.randint(3, 12)):
                    yield "a2c", _ev("ContentPart", {"type": "think", "think": self.words(6), "encrypted": None}), at(r.uniform(5, 40))
                for _ in range(r.randint(10, 30)):
                    yield "a2c", _ev("ContentPart", {"type": "text", "text": self.words(5)}), at(r.uniform(5, 40))
                last = step == steps
                calls = [] if last else [self._call(call_n + i) for i in range(r.choice((1, 1, 1, 2)))]
                call_n += len(calls)
                for cid, name, args, _, _ in calls:
                    yield "a2c", _ev("ToolCall", {"type": "function", "id": cid,
                                                  "function": {"name": name, "arguments": args[:10]},
                                                  "extras": None}), at(3)
                    rest = args[10:]
                    while rest:
                        yield "a2c", _ev("ToolCallPart", {"arguments_part": rest[:12]}), at(1)
                        rest = rest[12:]
                usage = {"input_other": r.randint(50, 4000), "output": r.randint(10, 800),
                         "input_cache_read": r.randint(0, 40000), "input_cache_creation": r.choice((0, 0, 0, 512))}
                ctx = usage["input_other"] + usage["input_cache_read"] + usage["input_cache_creation"]
                yield "a2c", _ev("StatusUpdate", {
                    "context_usage": round(ctx / 200000, 5), "context_tokens": ctx,
                    "max_context_tokens": 200000, "token_usage": usage,
                    "message_id": f"chatcmpl-{uuid.UUID(int=r.getrandbits(128)).hex[:24]}",
                    "plan_mode": False, "mcp_status": None}), at(2)
                for cid, name, _args, approval, dur in calls:
                    if approval:
                        rid = str(uuid.UUID(int=r.getrandbits(128)))
                        yield "a2c", _req("ApprovalRequest", rid, {
                            "id": rid, "tool_call_id": cid, "sender": name, "action": "run command",
                            "description": f"Run command `{self.words(3)}`", "source_kind": "foreground_turn",
                            "source_id": uuid.UUID(int=r.getrandbits(128)).hex, "agent_id": None,
                            "subagent_type": None, "source_description": None, "display": []}), at(1)
                        resp = r.choice(("approve", "approve", "approve", "approve_for_session", "reject"))
                        yield "c2a", orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": {
                            "request_id": rid, "response": resp}}), at(r.lognormvariate(7.5, 1.0))
                        yield "a2c", _ev("ApprovalResponse", {"request_id": rid, "response": resp,
                                                              "feedback": ""}), at(1)
                    if name == "Agent" or (turn % 10 == 0 and step == 1):
                        yield from self._subagent(cid, at)
                    yield "a2c", _ev("ToolResult", {"tool_call_id": cid, "return_value": {
                        "is_error": r.random() < 0.05, "output": self.words(r.randint(5, 120)),
                        "message": "Command executed successfully.", "display": [], "extras": None}}), at(dur)
            yield "a2c", _ev("TurnEnd", {}), at(1)
            yield "a2c", orjson.dumps({"jsonrpc": "2.0", "id": pid, "result": {"status": "finished"}}), at(1)
        yield "proxy", b'{"event":"client_eof"}', at(1)
        yield "stderr", b"To resume this session: kimi -r x", at(500)
        yield "proxy", b'{"code":0,"signal":null,"signum":null,"exit_status":0,"event":"exit"}', at(300)

    def _call(self, n: int):
        r = self.rng
        name, p_approval, (lo, hi) = r.choice(TOOLS)
        args = orjson.dumps({"command": self.words(r.randint(2, 8))}).decode()
        return f"call_{n:05d}", name, args, r.random() < p_approval, r.uniform(lo, hi)

    def _subagent(self, parent: str, at):
        r = self.rng
        agent = "a" + uuid.UUID(int=r.getrandbits(128)).hex[:8]

        def sub(t, payload):
            return _ev("SubagentEvent", {"parent_tool_call_id": parent, "agent_id": agent,
                                         "subagent_type": "coder", "event": {"type": t, "payload": payload}})
        yield "a2c", sub("TurnBegin", {"user_input": self.words(8)}), at(2)
        for step in (1, 2):
            yield "a2c", sub("StepBegin", {"n": step}), at(2)
            for _ in range(8):
                yield "a2c", sub("ContentPart", {"type": "text", "text": self.words(5)}), at(10)
            yield "a2c", sub("StatusUpdate", {"context_usage": 0.01, "context_tokens": 900,
                                              "max_context_tokens": 200000,
                                              "token_usage": {"input_other": 800, "output": 60,
                                                              "input_cache_read": 100, "input_cache_creation": 0},
                                              "message_id": "sub", "plan_mode": False, "mcp_status": None}), at(2)
        yield "a2c", sub("TurnEnd", {}), at(1)


def generate(db: str, n_frames: int, seed: int = 7, progress: bool = True) -> dict:
    """Write about n_frames frames (whole sessions) into db. Returns counts."""
    gen = Gen(seed)
    store = open_store(db)
    store.con.execute("SET checkpoint_threshold = '1GB'")
    start_wall = 1_790_000_000 * 10**9
    total = 0
    sessions = 0
    batch: list[tuple] = []
    t0 = time.time()
    while total < n_frames:
        sessions += 1
        sid = f"bench-{sessions:06d}"
        wall0 = start_wall + sessions * 3_600 * 10**9
        mono0 = sessions * 10**13
        seq = 0
        for direction, raw, ms in gen.session(turns=gen.rng.randint(3, 18)):
            seq += 1
            ns = int(ms * 1e6)
            if direction == "proxy":
                ev = orjson.loads(raw)
                name = ev.pop("event")
                row = (sid, seq, wall_ts(wall0 + ns), mono0 + ns, "proxy", raw, True, len(raw),
                       "lifecycle", name, None, None, orjson.dumps(ev).decode(), None, None, None, None)
            elif direction == "stderr":
                row = (sid, seq, wall_ts(wall0 + ns), mono0 + ns, "stderr", raw, True, len(raw),
                       "stderr", None, None, None, None, None, None, None, None)
            else:
                ex = classify(raw, direction)
                row = (sid, seq, wall_ts(wall0 + ns), mono0 + ns, direction, raw, True, len(raw),
                       ex.kind, ex.method, ex.rpc_id, ex.msg_type, ex.payload, ex.parse_error, ex.known, None, ex.anomaly)
            batch.append(row)
        total += seq
        store.upsert_session({"session_id": sid, "started_at": wall_ts(wall0),
                              "ended_at": wall_ts(wall0 + ns), "protocol": "wire",
                              "protocol_version": "1.10", "source": "proxy", "frame_count": seq,
                              "mono_start_ns": mono0, "command": '["kimi","--wire"]', "tags": "{}",
                              "exit_code": 0, "end_reason": "agent_exit"})
        if len(batch) >= 100_000:
            store.insert_frames(batch)
            batch = []
            if progress:
                sys.stderr.write(f"\r  generated {total:,} frames ({time.time() - t0:.0f} s)")
    store.insert_frames(batch)
    store.con.execute("CHECKPOINT")
    # what the loader's after-load step stores for each session, in one pass here
    store_summaries(store.con, [f"bench-{i:06d}" for i in range(1, sessions + 1)])
    store.close()
    if progress:
        sys.stderr.write(f"\r  generated {total:,} frames in {sessions} sessions ({time.time() - t0:.0f} s)\n")
    return {"frames": total, "sessions": sessions}


CPU: dict[str, list[float]] = {}


def timed(cmd: list[str], runs: int, label: str | None = None) -> list[float]:
    """Wall seconds per run; CPU seconds (user + sys of the child) go to CPU[cmd[0]]: on a
    shared machine the CPU time says more than the wall time."""
    import resource

    out = []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        out.append(time.perf_counter() - t)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        CPU.setdefault(label or cmd[0], []).append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        if p.returncode:
            raise SystemExit(f"{cmd} failed: {p.stderr.decode()}")
    return out


# `wire-stats`' whole-command target (issue 14)
TARGET_S = 0.400

# Run in a fresh interpreter: where a `wire-stats` run spends its time, step by step, the same
# calls the command makes (imports, attach, views, summary queries, rendering).
PARTS = r"""
import sys, time
if sys.argv[2] == "cpu":  # this process's CPU (all its threads) instead of wall time
    time.perf_counter = time.process_time
t0 = time.perf_counter()
import io, json, sys
from wire_recorder.analysis import cli  # noqa: F401  (what the console script imports)
import duckdb
out = {"imports": time.perf_counter() - t0}
from wire_recorder.analysis.sources import attach_db, open_workspace
from wire_recorder.analysis.stats import render_summary, summarize
out["imports, summary modules"] = time.perf_counter() - t0 - out["imports"]
db = sys.argv[1]
t = time.perf_counter()
con = duckdb.connect(":memory:")
attach_db(con, db, "rec0")
con.close()
out["open the file (connect, attach, checks)"] = time.perf_counter() - t
last = [time.perf_counter()]
def step(prefix):
    def mark(name):
        now = time.perf_counter()
        out[prefix + (name or "rest")] = now - last[0]
        last[0] = now
    return mark
t = last[0] = time.perf_counter()
ws = open_workspace([db], views=False, progress=step("view "))
out["open_workspace (no views)"] = time.perf_counter() - t
last[0] = time.perf_counter()
s = summarize(ws, progress=step("query "))
t = time.perf_counter()
render_summary(s, out=io.StringIO())
out["render"] = time.perf_counter() - t
ws.close()
print(json.dumps(out))
"""


def parts(db: str, runs: int, clock: str = "wall") -> dict[str, float]:
    """Median seconds (clock: wall or cpu) of each part of a wire-stats run, each run in a
    fresh interpreter."""
    import json

    seen: dict[str, list[float]] = {}
    for _ in range(runs):
        p = subprocess.run([sys.executable, "-c", PARTS, db, clock], capture_output=True,
                           text=True)
        if p.returncode:
            raise SystemExit(f"parts failed: {p.stderr}")
        # the last line: anything else a module prints on stdout is not ours to parse
        for k, v in json.loads(p.stdout.strip().splitlines()[-1]).items():
            seen.setdefault(k, []).append(v)
    return {k: statistics.median(v) for k, v in seen.items()}


# The after-load step's cost in a fresh interpreter, as in a loader: one session each, the
# smallest, the median and the largest of the file (a loader stores one session).
HOOK = r"""
import json, sys, time
import duckdb  # noqa: F401  (a loader has it already)
from wire_recorder.recorder.store import open_store
t = time.perf_counter()
from wire_recorder.analysis.summary import write_summaries
out = {"import": time.perf_counter() - t}
with open_store(sys.argv[1]) as store:
    sizes = store.con.execute("SELECT session_id, count(*) FROM frames GROUP BY 1 ORDER BY 2, 1").fetchall()
    for label, (sid, n) in (("smallest", sizes[0]), ("median", sizes[len(sizes) // 2]),
                            ("largest", sizes[-1])):
        t, c = time.perf_counter(), time.process_time()
        write_summaries(store.con, [sid])
        out[f"{label} session ({n:,} rows)"] = (time.perf_counter() - t, time.process_time() - c)
    # below MIN_STORED_ROWS the step only counts the session's rows
    from wire_recorder.analysis.summary import after_load
    t, c = time.perf_counter(), time.process_time()
    after_load(store, "no-such-session")
    out["a session under MIN_STORED_ROWS (skipped)"] = (time.perf_counter() - t, time.process_time() - c)
print(json.dumps(out))
"""


def hook_cost(db: str) -> dict:
    import json

    p = subprocess.run([sys.executable, "-c", HOOK, db], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"hook cost failed: {p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", help="generate into (or reuse) this .db instead of a temp file")
    args = ap.parse_args()
    bindir = os.path.dirname(sys.executable)
    tmp = None
    db = args.keep
    if db is None:
        tmp = tempfile.mkdtemp(prefix="bench-stats-")
        db = os.path.join(tmp, "bench.db")
    if not os.path.exists(db):
        counts = generate(db, args.frames)
    else:
        counts = {}
        import duckdb

        with duckdb.connect(db, read_only=True) as con:
            stored = read_summaries(con) is not None
        if not stored:  # a file from before summaries, or of another layout
            with open_store(db) as store:
                store_summaries(store.con, [r["session_id"] for r in store.sessions()])
    from wire_recorder.analysis.sources import open_workspace
    from wire_recorder.analysis.stats import summarize

    with open_workspace([db]) as ws:
        frames, sessions, raw_bytes = ws.con.execute(
            "SELECT count(*), count(DISTINCT session_id), sum(byte_len) FROM frames").fetchone()
        mix = ws.con.execute("SELECT coalesce(msg_type, kind), count(*) FROM frames GROUP BY 1 "
                             "ORDER BY 2 DESC LIMIT 6").fetchall()
        warm = []
        for _ in range(args.runs):
            t = time.perf_counter()
            summarize(ws)
            warm.append(time.perf_counter() - t)
    size = os.path.getsize(db)
    stats_cmd = timed([os.path.join(bindir, "wire-stats"), db], args.runs)
    query_cmd = timed([os.path.join(bindir, "wire-query"), db,
                       "select tool_name, count(*), median(duration_ms) from tool_calls group by 1"],
                      args.runs)
    # the same file without its summaries (as written before them, or by another tool)
    import shutil

    scratch = tempfile.mkdtemp(prefix="bench-stats-")
    bare_db = os.path.join(scratch, "no-summaries.db")
    shutil.copy(db, bare_db)
    import duckdb

    with duckdb.connect(bare_db) as con:
        con.execute("DROP TABLE wr_session_summary")
    old_cmd = timed([os.path.join(bindir, "wire-stats"), bare_db], args.runs, "no summaries")
    shutil.rmtree(scratch, ignore_errors=True)
    hook = hook_cost(db)
    start_cmd = timed([sys.executable, "-c", "import duckdb, typer, rich, orjson"], args.runs,
                      "imports floor")
    bare_cmd = timed([sys.executable, "-c", "pass"], args.runs)
    part = parts(db, args.runs)
    part_cpu = parts(db, args.runs, "cpu")
    per_m = size / frames * 1e6
    print(f"frames: {frames:,} in {sessions} sessions ({counts or 'reused file'}); raw bytes "
          f"{raw_bytes / 1e6:.0f} MB; mix {', '.join(f'{k} {v:,}' for k, v in mix)}")
    print(f"size on disk: {size / 1e6:.0f} MB = {per_m / 1e6:.0f} MB per million frames")
    whole = statistics.median(stats_cmd)
    print(f"wire-stats, whole command: median {whole:.3f} s, target <= {TARGET_S:.3f} s "
          f"({'met' if whole <= TARGET_S else 'NOT met'})")
    print(f"  where it goes (medians, each run a fresh interpreter; wall, CPU):\n"
          f"    {'interpreter start (python -c pass)':44s} {statistics.median(bare_cmd):.3f} s")
    for k, v in part.items():
        print(f"    {k:44s} {v:.3f} s  {part_cpu.get(k, float('nan')):.3f} s CPU")
    print(f"    {'sum of the parts':44s} "
          f"{statistics.median(bare_cmd) + sum(v for k, v in part.items() if not k.startswith(('view ', 'open the'))):.3f} s"
          "  (open_workspace holds the attach and the views; the rest of the whole command: "
          "typer parsing the arguments, rich's progress bar)")
    print(f"wire-stats, whole command: median {whole:.3f} s "
          f"(min {min(stats_cmd):.3f}, max {max(stats_cmd):.3f}); CPU (user+sys, 2 DuckDB threads) "
          f"median {statistics.median(CPU[os.path.join(bindir, 'wire-stats')]):.3f} s; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"wire-stats on the same file without stored summaries (computed through the views): "
          f"median {statistics.median(old_cmd):.3f} s (min {min(old_cmd):.3f}, max {max(old_cmd):.3f}); "
          f"CPU median {statistics.median(CPU['no summaries']):.3f} s")
    print(f"after-load step (summary stored by the loader), fresh interpreter: import "
          f"{hook.pop('import'):.3f} s; " + "; ".join(
              f"{k} {w:.3f} s wall, {c:.3f} s CPU" for k, (w, c) in hook.items()))
    print(f"summary alone, warm, in process: median {statistics.median(warm):.3f} s")
    print(f"wire-query tool_calls median duration, whole command: median "
          f"{statistics.median(query_cmd):.3f} s")
    print(f"python start-up with duckdb+typer+rich+orjson imported: "
          f"median {statistics.median(start_cmd):.3f} s, CPU median "
          f"{statistics.median(CPU['imports floor']):.3f} s (the floor of any such command)")
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
