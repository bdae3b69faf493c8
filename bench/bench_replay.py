"""Replay overhead on a 10,000-frame session, beyond the agent's own time (CLI target: <= 0.5 s).

    .venv/bin/python bench/bench_replay.py [--frames 10000] [--turns 10] [--repeat 3]

A synthetic Wire session (initialize, then turns of streamed ContentParts, a Shell ToolCall with
an ApprovalRequest answered by the client, ToolResult, StatusUpdates, TurnEnd) is written as a
transcript. The agent is a tiny script that plays the agent side of that session over real pipes
and makes a fresh uuid for every request (so the replay has to match and re-address answers),
checking that each answer comes back to the right id.

* agent alone: the same agent driven by a minimal client (writes the client frames, counts
  lines, answers by position): process start + the agent's own work + pipe transfer;
* replay (library): `replay_session()` against that agent, with matching, normalisation and the
  full comparison; overhead = replay - agent alone;
* replay (CLI): `wire-replay SESSION -- agent`, including the interpreter and import start-up,
  from the transcript and from the same session imported into a .db (as wire-proxy leaves it);
  command-line overhead = CLI - agent alone (target, issue 14: <= 0.5 s), split into what the
  command costs before any replay: the bare interpreter, `import wire_recorder.replay.cli`, and
  the whole command on a missing session file (imports + argument parsing, one error line).

Each figure is wall time and, beside it, CPU time (user + sys of this process and the children
it waited for): on a 2-core machine that other work keeps busy, wall times stretch by 2-3x while
CPU times move little, so the CPU overheads are the ones to compare between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wire_recorder.replay import ReplayOptions, replay_session  # noqa: E402

AGENT = r'''
import json, os, sys, uuid
plan = json.load(open(sys.argv[1]))
inp = sys.stdin.buffer
out = sys.stdout.fileno()
req_id = None
for step in plan:
    if step == "read":
        line = inp.readline()
        if not line:
            sys.exit(3)
        if req_id is not None and b'"id":"' + req_id.encode() + b'"' in line:
            req_id = None
        continue
    if step == "read_answer":
        line = inp.readline()
        if req_id is None or (b'"id":"' + req_id.encode() + b'"') not in line:
            sys.stderr.write("answer to the wrong id: %r\n" % line[:200]); sys.exit(4)
        continue
    lines = step
    if any("@REQ@" in s for s in lines):
        req_id = str(uuid.uuid4())
        lines = [s.replace("@REQ@", req_id) for s in lines]
    elif any("@ANS@" in s for s in lines):
        lines = [s.replace("@ANS@", last) for s in lines]
    if req_id is not None:
        last = req_id
    data = ("\n".join(lines) + "\n").encode()
    while data:
        data = data[os.write(out, data):]
inp.read()
'''


def _d(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def event(t, payload):
    return _d({"jsonrpc": "2.0", "method": "event", "params": {"type": t, "payload": payload}})


def build(frames_target: int, turns: int):
    """(transcript frames [(dir, line)], agent plan)."""
    per_turn_fixed = 16
    k = max(1, (frames_target - 2 - turns * per_turn_fixed) // (2 * turns))
    conv: list[tuple[str, str]] = []
    plan: list = []
    init = _d({"jsonrpc": "2.0", "method": "initialize", "id": "init-1",
               "params": {"protocol_version": "1.10", "client": {"name": "bench", "version": "0"}}})
    conv.append(("c2a", init))
    plan.append("read")
    r = _d({"jsonrpc": "2.0", "id": "init-1", "result": {"protocol_version": "1.10",
                                                          "server": {"name": "bench-agent"}}})
    conv.append(("a2c", r))
    plan.append([r])
    for t in range(1, turns + 1):
        prompt = _d({"jsonrpc": "2.0", "method": "prompt", "id": f"p-{t}",
                     "params": {"user_input": f"turn {t}: run the build"}})
        conv.append(("c2a", prompt))
        plan.append("read")
        rid = str(uuid.uuid4())
        block = [event("TurnBegin", {"user_input": f"turn {t}: run the build"}),
                 event("StepBegin", {"n": 1})]
        block += [event("ContentPart", {"type": "text", "text": f"chunk {i} of turn {t} "})
                  for i in range(k)]
        args = _d({"command": f"make target-{t}"})
        block.append(event("ToolCall", {"type": "function", "id": f"call-{t}",
                                        "function": {"name": "Shell", "arguments": args},
                                        "extras": None}))
        req = _d({"jsonrpc": "2.0", "method": "request", "id": "@REQ@", "params": {
            "type": "ApprovalRequest", "payload": {
                "id": "@REQ@", "tool_call_id": f"call-{t}", "sender": "Shell",
                "action": "run command", "description": f"Run command `make target-{t}`",
                "source_kind": "foreground_turn", "source_id": uuid.uuid4().hex,
                "agent_id": None, "subagent_type": None, "source_description": None,
                "display": [{"type": "shell", "language": "bash",
                             "command": f"make target-{t}"}]}}})
        block.append(req)
        status = event("StatusUpdate", {"context_usage": 0.01, "context_tokens": 1000 + t,
                                        "max_context_tokens": 100000,
                                        "token_usage": {"input_other": 1000, "output": t,
                                                        "input_cache_read": 0,
                                                        "input_cache_creation": 0},
                                        "message_id": f"msg-{t}-1", "plan_mode": False,
                                        "mcp_status": None})
        block.append(status)
        for line in block:
            conv.append(("a2c", line.replace("@REQ@", rid)))
        plan.append(block)
        ans = _d({"jsonrpc": "2.0", "id": rid, "result": {"request_id": rid, "response": "approve"}})
        conv.append(("c2a", ans))
        plan.append("read_answer")
        block = [event("ApprovalResponse", {"request_id": "@ANS@", "response": "approve",
                                            "feedback": ""}),
                 event("ToolResult", {"tool_call_id": f"call-{t}", "return_value": {
                     "is_error": False, "output": f"built target-{t}\n",
                     "message": "Command executed successfully.", "display": [],
                     "extras": None}}),
                 event("StepBegin", {"n": 2})]
        block += [event("ContentPart", {"type": "text", "text": f"result part {i} "})
                  for i in range(k)]
        block += [status.replace(f"msg-{t}-1", f"msg-{t}-2"), event("TurnEnd", {}),
                  _d({"jsonrpc": "2.0", "id": f"p-{t}", "result": {"status": "finished"}})]
        for line in block:
            conv.append(("a2c", line.replace("@ANS@", rid)))
        plan.append(block)
    return conv, plan


def write_transcript(path: Path, conv, command) -> None:
    session = {"session_id": "bench-10k", "name": "bench", "command": command,
               "protocol": "wire", "mono_start_ns": 0, "exit_code": 0,
               "started_at": "2026-01-01T00:00:00"}
    with open(path, "w", encoding="utf-8") as f:
        f.write(_d({"wire_transcript": 1, "session": session}) + "\n")
        t = 0.0
        for d, line in conv:
            t += 0.05
            f.write(f'{{"dir":"{d}","frame":{line},"t_ms":{t:.3f}}}\n')
        f.write('{"dir":"proxy","event":"client_eof","data":{},"t_ms":%.3f}\n' % (t + 0.05))


def cpu() -> float:
    """CPU seconds of this process and of the children it has waited for."""
    me, ch = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


class Clock:
    """Wall and CPU time of one measured piece."""

    def __init__(self) -> None:
        self.w0, self.c0 = time.perf_counter(), cpu()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.w0, cpu() - self.c0


def agent_alone(argv, conv) -> tuple[float, float]:
    """A minimal client: no parsing beyond finding request ids, answers by position."""
    clock = Clock()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    conv_req_id = live_req_id = ""  # set by each request before its answer is sent
    i = 0
    while i < len(conv):
        d, line = conv[i]
        if d == "c2a":
            if line.startswith('{"jsonrpc":"2.0","id":'):  # an answer: re-address it
                line = line.replace(conv_req_id, live_req_id)
            p.stdin.write(line.encode() + b"\n")
            p.stdin.flush()
            i += 1
            continue
        got = p.stdout.readline()
        if b'"method":"request"' in got:
            live_req_id = json.loads(got)["id"]
            conv_req_id = json.loads(line)["id"]
        i += 1
    p.stdin.close()
    p.stdout.read()
    if p.wait() != 0:
        raise SystemExit(f"bench agent failed with {p.returncode}")
    return clock.stop()


# A wheel install carries compiled modules; without them (PYTHONDONTWRITEBYTECODE in the
# environment of an editable install) each command would compile the edited ones again.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed_run(argv: list[str], ok: int = 0) -> tuple[float, float]:
    clock = Clock()
    p = subprocess.run(argv, capture_output=True, env=ENV)
    took = clock.stop()
    if p.returncode != ok:
        raise SystemExit(f"{argv[:3]} exited {p.returncode}: {p.stderr.decode()[-300:]}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        conv, plan = build(a.frames, a.turns)
        (tmp / "plan.json").write_text(json.dumps(plan))
        (tmp / "agent.py").write_text(AGENT)
        argv = [sys.executable, str(tmp / "agent.py"), str(tmp / "plan.json")]
        session = tmp / "bench.jsonl"
        write_transcript(session, conv, argv)
        n_agent = sum(1 for d, _ in conv if d == "a2c")
        print(f"session: {len(conv)} frames ({n_agent} agent, {len(conv) - n_agent} client), "
              f"{a.turns} approvals")
        db = tmp / "bench.db"  # the same session as wire-proxy leaves it: a .db
        subprocess.run([str(Path(sys.executable).parent / "wire-import"), str(session), "--db",
                        str(db), "-q"], env=ENV, check=True)
        alone, lib, cli, cli_db = [], [], [], []
        subprocess.run([sys.executable, "-c", "import wire_recorder.replay.cli"], env=ENV,
                       check=True)  # writes what is not compiled yet, outside the timings
        for _ in range(a.repeat):
            alone.append(agent_alone(argv, conv))
            clock = Clock()
            r = replay_session(str(session), argv, options=ReplayOptions(frame_timeout=30))
            lib.append(clock.stop())
            if not r.ok:
                from wire_recorder.replay import render_text

                print(render_text(r))
                return 1
            clock = Clock()
            p = subprocess.run([str(Path(sys.executable).parent / "wire-replay"), str(session),
                                "-q", "--", *argv], capture_output=True, env=ENV)
            cli.append(clock.stop())
            if p.returncode != 0:
                print(p.stdout.decode(), p.stderr.decode())
                return 1
            clock = Clock()
            p = subprocess.run([str(Path(sys.executable).parent / "wire-replay"), str(db),
                                "-q", "--", *argv], capture_output=True, env=ENV)
            cli_db.append(clock.stop())
            if p.returncode != 0:
                print(p.stdout.decode(), p.stderr.decode())
                return 1
        py = str(Path(sys.executable))
        wr = str(Path(sys.executable).parent / "wire-replay")
        bare = [timed_run([py, "-c", "pass"]) for _ in range(a.repeat)]
        imp = [timed_run([py, "-c", "import wire_recorder.replay.cli"]) for _ in range(a.repeat)]
        parse = [timed_run([wr, str(tmp / "missing.jsonl"), "-q", "--", *argv], ok=2)
                 for _ in range(a.repeat)]

        def med(xs, k):
            return statistics.median(x[k] for x in xs)

        def fig(xs):
            return f"{med(xs, 0):.3f} s (CPU {med(xs, 1):.3f} s)"

        print(f"machine: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
              f"on {os.cpu_count()} cores")
        print(f"agent alone (minimal client): {fig(alone)}  (runs: "
              f"{', '.join(f'{x[0]:.3f}' for x in alone)})")
        for name, xs in (("replay, library:             ", lib),
                         ("replay, CLI (incl. start-up):", cli),
                         ("replay, CLI of the .db:      ", cli_db)):
            print(f"{name} {fig(xs)}  -> overhead {med(xs, 0) - med(alone, 0):.3f} s "
                  f"(CPU {med(xs, 1) - med(alone, 1):.3f} s)")
        over, over_cpu = med(cli, 0) - med(alone, 0), med(cli, 1) - med(alone, 1)
        over_db = med(cli_db, 0) - med(alone, 0)
        print(f"command-line overhead (CLI - agent alone): {over:.3f} s (CPU {over_cpu:.3f} s)  "
              f"target <= 0.500 s  {'PASS' if over <= 0.5 else 'MISS'}; CLI - library "
              f"{med(cli, 0) - med(lib, 0):.3f} s (CPU {med(cli, 1) - med(lib, 1):.3f} s); "
              f"of the .db {over_db:.3f} s {'PASS' if over_db <= 0.5 else 'MISS'}")
        print(f"  start-up: python -c pass {fig(bare)}, + import replay.cli {fig(imp)}, "
              f"+ argument parsing (missing file) {fig(parse)}")
        print(f"requests matched: {r.stats.get('requests_matched')}, "
              f"frames compared: {r.stats.get('live_agent_frames')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
