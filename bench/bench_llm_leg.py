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
    .venv/bin/python bench/bench_llm_leg.py --agent kimi-code --calls 100
    .venv/bin/python bench/bench_llm_leg.py --bodies-from kc.db   # a recording's bodies

`--agent kimi-code`: Kimi Code 2.x's leg. It is the same forwarder (recorder/llm_leg.py's
ModelLeg and llm_forward.py's handler); what differs is how the agent is pointed (a scratch HOME
whose `.kimi-code/config.toml` copy names the leg: recorder/llm_upstream_kimicode.py) and the
agent's HTTP client (node's fetch, where kimi-cli has httpx). So the bench first records one real
Kimi Code session through `wire-proxy --llm` (tests/harness/kimicode_session.py: 4 model calls
against the model server) and takes its calls as stored (path, headers, body); then a stand-in
"Kimi Code" (a script of a package named as Kimi Code's, run by Kimi Code's own node, so that
wire-proxy recognises it and makes the scratch HOME) reads the leg's URL from the config copy in
its HOME, as Kimi Code does, and sends those calls with node's fetch, each through the leg and
directly in turn (the order alternating), the upstream streaming each the answer it gave in the
recording. Per call and over all: the paired differences, leg minus direct.
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
from collections.abc import Sequence
from typing import Any

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
                   "messages": [{"role": "user", "content": "x" * int(os.environ["BENCH_BODY"])}]}).encode()
bodies = [body]
if os.environ.get("BENCH_BODIES"):  # a recording's request bodies, in turn
    with open(os.environ["BENCH_BODIES"], "rb") as f:
        bodies = [b.encode() for b in json.load(f)]

def conn_for(base):
    u = urlsplit(base)
    return http.client.HTTPConnection(u.hostname, u.port), u.path.rstrip("/")

def call(conn, path, body):
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
        out[way].append(call(conn, path, bodies[k % len(bodies)]))
sys.stderr.write(json.dumps(out) + "\n")
"""


KC_SERVER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from tests.harness import model_server
from tests.harness.kimicode_session import TURNS
from tests.harness.model_server import StreamingModel
model_server._Handler.disable_nagle_algorithm = True
reps = int(sys.argv[2])
# call i of every round, through the leg and directly: the answer it got in the recording
model = StreamingModel([t for _ in range(reps) for t in TURNS for _ in (0, 1)])
model.start()
print(json.dumps({"base_url": model.base_url, "key": model.key, "model": model.model}),
      flush=True)
sys.stdin.read()
"""

KC_CLIENT = r"""
import fs from "node:fs";
const cfg = fs.readFileSync(process.env.HOME + "/.kimi-code/config.toml", "utf8");
const leg = /base_url\s*=\s*"([^"]+)"/.exec(cfg)[1];  // the copy wire-proxy wrote for the leg
const calls = JSON.parse(fs.readFileSync(process.env.BENCH_CALLS_FILE, "utf8"));
const reps = +process.env.BENCH_REPS, direct = process.env.BENCH_DIRECT;
const key = process.env.BENCH_KEY;
async function call(base, c) {
  const t0 = performance.now();
  const res = await fetch(base + c.path, {method: "POST", body: c.body,
    headers: {...c.headers, authorization: "Bearer " + key}});
  const reader = res.body.getReader();
  let first = null, n = 0;
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    if (first === null) first = performance.now() - t0;
    n += value.length;
  }
  if (res.status !== 200) throw new Error(base + ": status " + res.status);
  return [first / 1e3, (performance.now() - t0) / 1e3, n];
}
const out = {leg: [], direct: [], legUrl: leg};
let k = 0;
for (let r = 0; r < reps; r++) {
  for (const c of calls) {
    for (const way of (k++ % 2 === 0 ? ["leg", "direct"] : ["direct", "leg"])) {
      out[way].push(await call(way === "leg" ? leg : direct, c));
    }
  }
}
process.stderr.write(JSON.stringify(out) + "\n");
"""
# headers fetch sets itself (or refuses), and the credential (stored without it)
KC_SKIP = frozenset({"host", "content-length", "connection", "transfer-encoding",
                     "accept-encoding", "authorization", "api-key", "x-api-key"})


def kimi_code(args: argparse.Namespace) -> int:
    sys.path.insert(0, ROOT)
    from tests.harness.kimicode import config_toml, find_kimicode
    from tests.harness.kimicode_session import TURNS, record_kimicode
    from tests.harness.llm_leg import exchanges

    node, _main = find_kimicode()
    reps = max(1, args.calls // len(TURNS))
    with tempfile.TemporaryDirectory(prefix="bench-llm-leg-kc-") as tmp:
        db = os.path.join(tmp, "kc.db")
        t = time.perf_counter()
        result, _model = record_kimicode(db, tmp, extra=("--llm",))
        if result.exit_code != 0:
            sys.stderr.write(result.client_stderr[-3000:])
            return 1
        ex = exchanges(db)
        if len(ex) != len(TURNS):
            sys.stderr.write(f"the session made {len(ex)} model calls, not {len(TURNS)}\n")
            return 1
        rec_s = time.perf_counter() - t
        calls = [{"path": e["request"]["path"], "body": e["request"]["request_body"],
                  "headers": {k: v for k, v in e["request"]["headers"]
                              if k.lower() not in KC_SKIP}} for e in ex]
        agent_ua = next((v for k, v in ex[0]["request"]["headers"] if k.lower() == "user-agent"),
                        "?")
        with open(os.path.join(tmp, "calls.json"), "w", encoding="utf-8") as f:
            json.dump(calls, f)
        pkg = os.path.join(tmp, "pkg")  # a package named as Kimi Code's: wire-proxy's test
        os.makedirs(os.path.join(pkg, "dist"))
        with open(os.path.join(pkg, "package.json"), "w", encoding="utf-8") as f:
            json.dump({"name": "@moonshot-ai/kimi-code", "type": "module"}, f)
        with open(os.path.join(pkg, "dist", "main.mjs"), "w", encoding="utf-8") as f:
            f.write(KC_CLIENT)
        server = subprocess.Popen([sys.executable, "-c", KC_SERVER, ROOT, str(reps)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            info = json.loads(server.stdout.readline())  # type: ignore[union-attr]
            home = os.path.join(tmp, "home")
            os.makedirs(os.path.join(home, ".kimi-code"))
            with open(os.path.join(home, ".kimi-code", "config.toml"), "w",
                      encoding="utf-8") as f:
                f.write(config_toml(info["base_url"], info["key"], info["model"]))
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("KIMI_", "OPENAI_", "ANTHROPIC_"))}
            env.update({"HOME": home, "BENCH_CALLS_FILE": os.path.join(tmp, "calls.json"),
                        "BENCH_REPS": str(reps), "BENCH_DIRECT": info["base_url"],
                        "BENCH_KEY": info["key"]})
            bench_db = os.path.join(tmp, "b.db")
            out, wall = through_the_leg(
                bench_db, [str(node), os.path.join(pkg, "dist", "main.mjs"), "acp"], env,
                ["--no-redact"] if args.no_redact else [])
        finally:
            server.stdin.close()  # type: ignore[union-attr]
            server.wait(timeout=30)
        if out is None:
            return 1
        import duckdb

        con = duckdb.connect(bench_db, read_only=True)
        try:
            (leg_event,) = con.execute("SELECT payload FROM frames WHERE method = 'llm_leg'")\
                .fetchall()[0]
            stored = con.execute("SELECT count(*) FROM frames WHERE method = 'llm_response'")\
                .fetchall()[0][0]
        finally:
            con.close()
    leg_event = json.loads(leg_event)
    print(f"Kimi Code's leg: the agent recognised as {leg_event.get('agent')!r} (the scratch "
          f"HOME's config copy names {out['legUrl'].rsplit('/', 1)[0]}/…), {stored} exchanges "
          f"stored; its {len(TURNS)} calls recorded from a real session in {rec_s:.1f} s "
          f"(User-Agent {agent_ua}), sent {reps} times each way with node's fetch "
          f"({len(calls) * reps} per way), {os.cpu_count()} CPUs, {wall:.1f} s"
          + (", recorded without redaction" if args.no_redact else ""))
    table(out, 34, [len(c["body"]) for c in calls])
    return 0


def through_the_leg(db: str, agent: list[str], env: dict[str, str],
                    options: Sequence[str] = ()) -> tuple[dict[str, Any] | None, float]:
    """Run the bench client as `agent` under `wire-proxy --llm`: its timings (the last JSON
    line it wrote on stderr) and the wall time; None (its stderr shown) when it failed."""
    t = time.perf_counter()
    p = subprocess.run([WIRE_PROXY, "--llm", "--db", db, "--wait", "120", *options, "--",
                        *agent], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=3600)
    wall = time.perf_counter() - t
    lines = [ln for ln in p.stderr.decode().splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        sys.stderr.write(p.stderr.decode())
        return None, wall
    return json.loads(lines[-1]), wall


def table(out: dict[str, Any], width: int, sizes: Sequence[int] = ()) -> None:
    """The p50/p90 of the calls sent direct and through the leg, and what the leg added; with
    `sizes` (the request bodies sent in turn, in bytes), what it added to each of them too."""
    print(f"{'':{width}}{'p50 ms':>10}{'p90 ms':>10}")
    n = len(sizes)
    for i, what in ((0, "first byte"), (1, "whole answer")):
        leg = [c[i] * 1e3 for c in out["leg"]]
        direct = [c[i] * 1e3 for c in out["direct"]]
        added = [a - b for a, b in zip(leg, direct, strict=True)]
        rows = [(f"direct, {what}", direct), (f"--llm, {what}", leg),
                (f"added by --llm, {what}", added)]
        rows += [(f"  call {j + 1} ({sizes[j]:,} B), added", added[j::n]) for j in range(n)]
        for label, xs in rows:
            print(f"{label:{width}}{statistics.median(xs):>10.2f}{pct(xs, 0.9):>10.2f}")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200, help="calls each way")
    ap.add_argument("--events", type=int, default=50, help="SSE events per answer")
    ap.add_argument("--body", type=int, default=2000,
                    help="bytes of prompt text per request (a real agent's are 40-85 KB)")
    ap.add_argument("--bodies-from", metavar="DB", help="send the request bodies a "
                    "recording made with --llm holds (e.g. a Kimi Code one), in turn")
    ap.add_argument("--agent", choices=("kimi", "kimi-code"), default="kimi",
                    help="kimi-code: a real Kimi Code session's calls through its leg")
    ap.add_argument("--no-redact", action="store_true",
                    help="kimi-code: record without redaction (its share of the cost)")
    args = ap.parse_args()
    if args.agent == "kimi-code":
        return kimi_code(args)
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
                   "BENCH_BODY": str(args.body),
                   "BENCH_DIRECT": info["base_url"], "BENCH_MODEL": info["model"],
                   "HOME": tmp}
            env.pop("OPENAI_BASE_URL", None)
            if args.bodies_from:
                sys.path.insert(0, ROOT)
                from tests.harness.llm_leg import exchanges

                bodies = [e["request"]["request_body"] for e in exchanges(args.bodies_from)]
                env["BENCH_BODIES"] = os.path.join(tmp, "bodies.json")
                with open(env["BENCH_BODIES"], "w", encoding="utf-8") as f:
                    json.dump(bodies, f)
            out, wall = through_the_leg(os.path.join(tmp, "b.db"),
                                        [agent, "--config-file", cfg, "--wire"], env)
        finally:
            server.stdin.close()  # type: ignore[union-attr]
            server.wait(timeout=30)
    if out is None:
        return 1
    print(f"{args.calls} calls each way, {args.events} SSE events per answer, "
          + (f"the request bodies of {args.bodies_from}, " if args.bodies_from else
             f"{args.body:,} bytes of prompt, ")
          + f"{os.cpu_count()} CPUs, {wall:.1f} s in all")
    table(out, 28)
    return 0


if __name__ == "__main__":
    sys.exit(main())
