"""Benchmark: what the `wire_replay` pytest plugin costs a pytest run that does not use it.

    .venv/bin/python bench/bench_plugin.py                  # 21 runs of each, this venv
    .venv/bin/python bench/bench_plugin.py --runs 41 --python /path/to/venv/bin/python

pytest loads every `pytest11` entry point of the environment, so wire-recorder's plugin is
imported by each pytest run there, whether a test uses it or not. A temp project with a few
trivial tests (no conftest, unrelated to wire-recorder) is run with the plugin and with
`-p no:wire_replay`, alternating so that drift on a shared machine hits both alike; each run is a
whole `python -m pytest` process. Prints wall and CPU time medians and the median of the paired
differences (target < 20 ms; CPU time is the steadier figure on a busy machine), the import of
the plugin module alone in a fresh interpreter against `import pytest`, and the plugin's import
timed in-process once pytest is loaded.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_MS = 20.0
TESTS = """
import pytest


def test_add():
    assert 1 + 1 == 2


@pytest.mark.parametrize("n", range(5))
def test_square(n):
    assert n * n >= 0


def test_tmp(tmp_path):
    (tmp_path / "f").write_text("x")
    assert (tmp_path / "f").read_text() == "x"
"""


def clean_env() -> dict[str, str]:
    # the repository must not be importable from the project: only the installed package counts
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS",
                                                            "PYTEST_PLUGINS")}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv: list[str], cwd: str) -> tuple[float, float]:
    """(wall ms, CPU ms) of one run; CPU time (user + sys of the process and its children) is
    what the plugin adds whatever else the machine is doing."""
    c0, t0 = _cpu(), time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=clean_env())
    wall, cpu = (time.perf_counter() - t0) * 1000, (_cpu() - c0) * 1000
    if p.returncode != 0:
        sys.exit(f"bench_plugin: {' '.join(argv)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return wall, cpu


def plugin_import_ms(python: str, cwd: str) -> float:
    """The plugin module's import in an interpreter that has pytest loaded already (ms, measured
    in-process): the plugin's own part of the cost, free of the noise of whole-process timings."""
    code = ("import time, pytest; t = time.perf_counter(); "
            "import wire_recorder.replay.pytest_plugin; print(time.perf_counter() - t)")
    p = subprocess.run([python, "-c", code], cwd=cwd, capture_output=True, text=True,
                       env=clean_env())
    if p.returncode != 0:
        sys.exit(f"bench_plugin: importing the plugin failed:\n{p.stderr}")
    return float(p.stdout) * 1000


def plugin_registered(python: str) -> bool:
    code = ("import importlib.metadata as m; import sys; "
            "sys.exit(0 if any(e.name == 'wire_replay' for e in "
            "m.entry_points(group='pytest11')) else 1)")
    return subprocess.run([python, "-c", code], env=clean_env()).returncode == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21, help="runs of each variant (default 21)")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter of the environment to measure (default: this one)")
    args = ap.parse_args()
    if not plugin_registered(args.python):
        sys.exit(f"bench_plugin: no pytest11 entry point `wire_replay` in {args.python}'s "
                 "environment; install wire-recorder there")
    with tempfile.TemporaryDirectory(prefix="bench-plugin-") as proj:
        with open(os.path.join(proj, "test_trivial.py"), "w") as f:
            f.write(TESTS)
        with open(os.path.join(proj, "pytest.ini"), "w") as f:
            f.write("[pytest]\n")
        base = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        variants = {
            "pytest, plugin loaded": base,
            "pytest, -p no:wire_replay": [*base, "-p", "no:wire_replay"],
            "import the plugin module": [args.python, "-c",
                                         "import wire_recorder.replay.pytest_plugin"],
            "import pytest": [args.python, "-c", "import pytest"],
        }
        wall: dict[str, list[float]] = {k: [] for k in variants}
        cpu: dict[str, list[float]] = {k: [] for k in variants}
        for argv in variants.values():  # warm-up: page cache, .pyc files
            timed(argv, proj)
        for _ in range(args.runs):
            for name, argv in variants.items():
                w, c = timed(argv, proj)
                wall[name].append(w)
                cpu[name].append(c)
        in_run = [plugin_import_ms(args.python, proj) for _ in range(args.runs)]
    print(f"{'':28} {'wall median':>12} {'wall min':>9} {'CPU median':>11}   "
          f"(ms; {args.runs} runs each, {args.python})")
    for name in variants:
        print(f"{name:28} {statistics.median(wall[name]):12.1f} {min(wall[name]):9.1f} "
              f"{statistics.median(cpu[name]):11.1f}")

    def paired(series: dict[str, list[float]], a: str, b: str) -> float:
        # runs of a and b alternate: the median of the pairwise differences cancels slow drift
        return statistics.median(x - y for x, y in zip(series[a], series[b], strict=True))

    on, off = "pytest, plugin loaded", "pytest, -p no:wire_replay"
    d_wall, d_cpu = paired(wall, on, off), paired(cpu, on, off)
    d_imp = paired(cpu, "import the plugin module", "import pytest")
    # judged on CPU time: on a shared machine the wall-clock difference is mostly other load
    verdict = "PASS" if d_cpu < TARGET_MS else "MISS"
    print(f"\nplugin cost per pytest run (median of paired differences): wall {d_wall:+.1f} ms, "
          f"CPU {d_cpu:+.1f} ms (target < {TARGET_MS:.0f} ms: {verdict}); "
          f"plugin import over `import pytest`: CPU {d_imp:+.1f} ms")
    print(f"the plugin module's import once pytest is loaded (in-process, median): "
          f"{statistics.median(in_run):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
