"""The model leg's added latency per call (`wire-proxy --llm`), beside a direct connection to
the same upstream, in the same run.

The upstream is tests/harness/model_server.py in a process of its own (an OpenAI-compatible
server streaming one HTTP chunk per SSE event). The "agent" is a small client run by
`wire-proxy --llm` under the name `kimi` (the proxy points programs of that name at the leg,
reading their `--config-file`): it makes the same streamed chat request alternately through the
leg (the base URL the proxy gave it) and directly to the upstream, over one kept-alive
connection each, as the openai client library does, and reports per call the time to the first
body byte and to the end of the answer. The table gives the medians and p90 of each, and of the
paired differences (leg minus direct, call k against call k).

    .venv/bin/python bench/bench_llm_leg.py            # 200 calls each way, ~1 min
    .venv/bin/python bench/bench_llm_leg.py --calls 50 --events 200
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WIRE_PROXY = os.path.join(ROOT, ".venv", "bin", "wire-proxy")

SERVER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from tests.harness import model_server
from tests.harness.model_server import StreamingModel, answer
# each event written at once, as a provider's server does: the leg's own cost is then visible
model_server._Handler.disable_nagle_algorithm = True
n, events = int(sys.argv[2]), int(sys.argv[3])
turn = answer(text=["piece %d " % i for i in range(events)], usage=(1000, events, 0))
model = StreamingModel([turn] * n)
model.start()
print(json.dumps({"base_url": model.base_url, "key": model.key, "model": model.model,
                  "config": model.config_toml()}), flush=True)
sys.stdin.read()
"""

CLIENT = r"""#!{python}
import http.client, json, os, sys, time
from urllib.parse import urlsplit
calls, direct, key = int(os.environ["BENCH_CALLS"]), os.environ["BENCH_DIRECT"], os.environ["BENCH_KEY"]
leg = os.environ["OPENAI_BASE_URL"]
body = json.dumps({"model": os.environ["BENCH_MODEL"], "stream": True,
                   "messages": [{"role": "user", "content": "x" * 2000}]}).encode()

def conn_for(base):
    u = urlsplit(base)
    return http.client.HTTPConnection(u.hostname, u.port), u.path.rstrip("/")

def call(conn, path):
    t0 = time.perf_counter()
    conn.request("POST", path + "/chat/completions", body=body,
                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    r = conn.getresponse()
    first = None
    n = 0
    while True:
        d = r.read1(65536)
        if not d:
            break
        if first is None:
            first = time.perf_counter() - t0
        n += len(d)
    assert r.status == 200, r.status
    return first, time.perf_counter() - t0, n

out = {"leg": [], "direct": []}
ways = {"leg": conn_for(leg), "direct": conn_for(direct)}
for k in range(calls):
    order = ("leg", "direct") if k % 2 == 0 else ("direct", "leg")
    for way in order:
        conn, path = ways[way]
        out[way].append(call(conn, path))
sys.stderr.write(json.dumps(out) + "\n")
"""


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200, help="calls each way")
    ap.add_argument("--events", type=int, default=50, help="SSE events per answer")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-llm-leg-") as tmp:
        server = subprocess.Popen([sys.executable, "-c", SERVER, ROOT, str(2 * args.calls + 10),
                                   str(args.events)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            info = json.loads(server.stdout.readline())  # type: ignore[union-attr]
            cfg = os.path.join(tmp, "config.toml")
            with open(cfg, "w", encoding="utf-8") as f:
                f.write(info["config"])
            agent = os.path.join(tmp, "bin", "kimi")  # the name the proxy knows to point
            os.makedirs(os.path.dirname(agent))
            with open(agent, "w", encoding="utf-8") as f:
                f.write(CLIENT.replace("{python}", sys.executable))
            os.chmod(agent, 0o755)
            env = {**os.environ, "BENCH_CALLS": str(args.calls), "BENCH_KEY": info["key"],
                   "BENCH_DIRECT": info["base_url"], "BENCH_MODEL": info["model"],
                   "HOME": tmp}
            env.pop("OPENAI_BASE_URL", None)
            t = time.perf_counter()
            p = subprocess.run([WIRE_PROXY, "--llm", "--db", os.path.join(tmp, "b.db"),
                                "--wait", "120", "--", agent, "--config-file", cfg, "--wire"],
                               env=env, stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=3600)
            wall = time.perf_counter() - t
        finally:
            server.stdin.close()  # type: ignore[union-attr]
            server.wait(timeout=30)
    lines = [ln for ln in p.stderr.decode().splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        sys.stderr.write(p.stderr.decode())
        return 1
    out = json.loads(lines[-1])
    print(f"{args.calls} calls each way, {args.events} SSE events per answer, "
          f"{os.cpu_count()} CPUs, {wall:.1f} s in all")
    print(f"{'':28}{'p50 ms':>10}{'p90 ms':>10}")
    for i, what in ((0, "first byte"), (1, "whole answer")):
        leg = [c[i] * 1e3 for c in out["leg"]]
        direct = [c[i] * 1e3 for c in out["direct"]]
        added = [a - b for a, b in zip(leg, direct, strict=True)]
        for label, xs in ((f"direct, {what}", direct), (f"--llm, {what}", leg),
                          (f"added by --llm, {what}", added)):
            print(f"{label:28}{statistics.median(xs):>10.2f}{pct(xs, 0.9):>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
