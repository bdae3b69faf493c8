"""wire-proxy's start and end, from a wheel install, beside their limits (issue 14, item 3).

Start: launch -> the agent's first instruction (its clock: `sh -c 'date +%s%N; exec cat'`), for
  the agent run directly, the floor (the same interpreter, site and .pth files included, exec-ing
  the agent at once: `python -c "import os, sys; os.execvp(...)"`), the floor plus `import re`
  (what the console-script wrapper pip generates imports before wire-proxy's own code), and
  wire-proxy recording. Target: the agent spawned within 10 ms of the proxy's own start, that is
  at most 10 ms beyond the floor.
End: the client's EOF (the agent, `cat`, exits on it) -> the proxy's exit, beside the same for
  the agent run directly; and -> the recording complete in its file (the spool gone), which the
  loader finishes after the proxy has exited; and the old contract (`--wait 60`: the proxy returns
  once the file is complete). Target: the proxy exits within 50 ms of the agent's exit.

    .venv/bin/python bench/bench_startup.py            # 30 launches a variant (~1 min + venv)
    .venv/bin/python bench/bench_startup.py --runs 10 --venv /tmp/wheel-venv --before /tmp/old

Without --venv it builds the wheel from this tree and installs it (pip's cache) into a temporary
venv, as a user would: the editable .venv starts differently (its finder .pth).
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT, TempDir, launch_echo_eof, make_frame, median, pct, say  # noqa: E402

SPAWN_BEYOND_FLOOR_MS = 10.0
EXIT_MAX_MS = 50.0
AGENT = ["sh", "-c", "date +%s%N; exec cat"]


def wheel_venv(tmp: TempDir) -> str:
    dist = tmp.file("dist")
    venv = tmp.file("venv")
    say("[venv] building the wheel and installing it into a fresh venv")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, ROOT],
                   check=True, capture_output=True)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", venv], check=True)
    (wheel,) = glob.glob(os.path.join(dist, "*.whl"))
    subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", wheel], check=True, capture_output=True)
    return venv


def once(argv: list[str], frame: bytes, spool_dir: str | None = None) -> dict:
    """launch_echo_eof, then (spool_dir) the time from EOF until no spool is left there."""
    out = launch_echo_eof(argv, frame)
    if spool_dir is not None:
        deadline = time.monotonic() + 60
        while glob.glob(os.path.join(spool_dir, "*.spool")) and time.monotonic() < deadline:
            time.sleep(0.001)
        out["complete_ms"] = (time.perf_counter_ns() - out["eof_ns"]) / 1e6
    return out


def _import_times(argv: list[str]) -> list[tuple[str, int]]:
    """(module, self µs) in import order, from -X importtime."""
    err = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL).stderr
    out = []
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line:
            self_part, _cumulative, name = line.split("|")
            try:
                out.append((name.strip(), int(self_part.split(":")[1])))
            except ValueError:
                continue  # the header line
    return out


def pre_spawn_imports(py: str, proxy: str, runs: int) -> dict[str, float]:
    """What wire-proxy imports before it spawns the agent beyond what the bare interpreter
    imports, in ms (each module's smallest self time over the runs: robust to a busy
    machine): the wrapper's `re` family and wire-proxy's own modules."""
    base = {m for m, _ in _import_times([py, "-X", "importtime", "-c", "pass"])}
    best: dict[str, int] = {}
    wrapper: set[str] = set()
    for _ in range(runs):
        seen = _import_times([py, "-X", "importtime", proxy, "--no-record", "--", "true"])
        names = [m for m, _ in seen]
        # the wrapper's imports come before wire_recorder's; the agent is spawned once
        # wire_recorder.recorder.proxy is imported (everything after comes after the spawn)
        first, cut = names.index("wire_recorder"), names.index("wire_recorder.recorder.proxy") + 1
        wrapper.update(m for m in names[:first] if m not in base)
        for m, us in seen[:cut]:
            if m not in base:
                best[m] = min(best.get(m, us), us)
    front = sum(us for m, us in best.items() if m in wrapper)
    return {"wrapper (import re, ...)": front / 1000,
            "wire-proxy's own": (sum(best.values()) - front) / 1000}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30, help="launches per variant")
    ap.add_argument("--venv", help="a venv with wire-recorder installed from its wheel")
    ap.add_argument("--before", help="another such venv (an older version) to compare with, "
                    "in the same run, its wire-proxy run with its own defaults")
    args = ap.parse_args()
    tmp = TempDir()
    os.chdir(tmp.path)
    os.environ["WIRE_RECORDER_HOME"] = tmp.file("home")
    try:
        venv = args.venv or wheel_venv(tmp)
        py, proxy = os.path.join(venv, "bin", "python"), os.path.join(venv, "bin", "wire-proxy")
        rec = tmp.file("rec")
        os.makedirs(rec, exist_ok=True)
        db = os.path.join(rec, "s.db")
        variants = {
            "direct": (AGENT, None),
            "floor": ([py, "-c", "import os, sys; os.execvp(sys.argv[1], sys.argv[1:])", *AGENT],
                      None),
            "floor + import re": ([py, "-c", "import re, os, sys; "
                                  "os.execvp(sys.argv[1], sys.argv[1:])", *AGENT], None),
            "wire-proxy": ([proxy, "-q", "--db", db, "--", *AGENT], rec),
            "wire-proxy --wait 60": ([proxy, "-q", "--wait", "60", "--db", db, "--", *AGENT],
                                     rec),
        }
        if args.before:
            variants["before: wire-proxy"] = (
                [os.path.join(args.before, "bin", "wire-proxy"), "-q", "--db", db, "--", *AGENT],
                rec)
        frame = make_frame(200, 1)
        res: dict[str, list[dict]] = {v: [] for v in variants}
        order = list(variants)
        say(f"[startup] {args.runs} launches a variant, agent {AGENT}, load "
            f"{os.getloadavg()[0]:.1f}")
        for r in range(args.runs):
            for v in order[r % len(order):] + order[:r % len(order)]:
                argv, spool_dir = variants[v]
                for f in glob.glob(os.path.join(rec, "*")):
                    os.remove(f)
                res[v].append(once(argv, frame, spool_dir))
        imports = pre_spawn_imports(py, proxy, max(5, args.runs // 2))
        if args.before:
            old = pre_spawn_imports(os.path.join(args.before, "bin", "python"),
                                    os.path.join(args.before, "bin", "wire-proxy"),
                                    max(5, args.runs // 2))
    finally:
        tmp.cleanup()

    def m(v: str, k: str) -> float:
        return median([x[k] for x in res[v]])

    def p90(v: str, k: str) -> float:
        return pct(sorted(x[k] for x in res[v]), 0.9)

    print(f"\nwire-proxy start and end ({args.runs} launches a variant, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}); medians (p90)")
    print(f"{'':34}{'launch->agent':>16}{'launch->1st RT':>16}{'EOF->exit':>14}"
          f"{'EOF->recorded':>15}")
    for v in variants:
        cells = [f"{m(v, k):7.1f} ({p90(v, k):5.1f})" for k in ("spawn_ms", "first_rt_ms",
                                                              "exit_ms")]
        done = (f"{m(v, 'complete_ms'):7.1f} ({p90(v, 'complete_ms'):5.1f})"
                if "complete_ms" in res[v][0] else "")
        print(f"{v:34}{cells[0]:>16}{cells[1]:>16}{cells[2]:>14}{done:>15}")
    beyond = m("wire-proxy", "spawn_ms") - m("floor", "spawn_ms")
    exit_added = m("wire-proxy", "exit_ms") - m("direct", "exit_ms")
    print("\nimported before the spawn beyond the bare interpreter (-X importtime, each "
          "module's best): " + ", ".join(f"{k} {v:.1f} ms" for k, v in imports.items())
          + ("; before: " + ", ".join(f"{k} {v:.1f} ms" for k, v in old.items())
             if args.before else ""))
    verdict = {True: "PASS", False: "MISS"}
    print(f"\nspawn beyond the floor: {beyond:.1f} ms (target <= {SPAWN_BEYOND_FLOOR_MS:.0f} ms: "
          f"{verdict[beyond <= SPAWN_BEYOND_FLOOR_MS]}); of it the wrapper's `import re`: "
          f"{m('floor + import re', 'spawn_ms') - m('floor', 'spawn_ms'):.1f} ms")
    print(f"exit after the agent's (EOF->exit, proxy - direct): {exit_added:.1f} ms "
          f"(target <= {EXIT_MAX_MS:.0f} ms: {verdict[exit_added <= EXIT_MAX_MS]}); the loader "
          f"completes the file {m('wire-proxy', 'complete_ms'):.0f} ms after EOF")
    return 0


if __name__ == "__main__":
    sys.exit(main())
