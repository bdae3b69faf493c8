"""Helpers for the wire-replay tests: recording scenarios through the real proxy, fresh kimi
runs to replay against, and running the `wire-replay` CLI as a user would."""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_sessions"
BIN = Path(sys.executable).parent
WIRE_REPLAY = str(BIN / "wire-replay")
WIRE_PROXY = str(BIN / "wire-proxy")

# two cores; kimi start-up is CPU bound, three at a time keeps every run well inside its timeouts
WORKERS = 3


def parallel(fn: Callable[[Any], Any], items: Iterable[Any], workers: int = WORKERS) -> list:
    with cf.ThreadPoolExecutor(workers) as ex:
        return list(ex.map(fn, items))


def sample_names() -> list[str]:
    from sample_sessions.scenarios import SCENARIOS

    return [n for n in SCENARIOS if (SAMPLES / f"{n}.jsonl").exists()]


def record_scenario(name: str, db: str | os.PathLike, scripts: Sequence[str] | None = None):
    """Run a scenario through wire-proxy into db (a session named `name`); return the client
    result. `scripts` replaces the scenario's echo scripts."""
    import dataclasses

    from sample_sessions.scenarios import SCENARIOS
    from tests.harness.wire import run_scenario

    sc = SCENARIOS[name]
    if scripts is not None:
        sc = dataclasses.replace(sc, scripts=list(scripts))
    return run_scenario(sc, [WIRE_PROXY, "-q", "--db", str(db), "--name", name, "--"])


def session_ids(db: str | os.PathLike) -> dict[str, str]:
    from wire_recorder.recorder.store import open_store

    with open_store(str(db), read_only=True) as store:
        return {s["name"]: s["session_id"] for s in store.sessions()}


class Agent:
    """A fresh kimi run for one scenario (new HOME, work dir and scripts): what a replay needs to
    start `kimi --wire` again. Use as a context manager."""

    def __init__(self, name: str, scripts: Sequence[str] | None = None, tmp_root=None):
        from sample_sessions.scenarios import SCENARIOS
        from tests.harness.kimi_peer import KimiRun

        sc = SCENARIOS[name]
        self.run = KimiRun.create(list(scripts) if scripts is not None else sc.scripts,
                                  session_id=sc.session_id, tmp_root=tmp_root)

    @property
    def argv(self) -> list[str]:
        return self.run.argv()

    @property
    def env(self) -> dict[str, str]:
        return self.run.env()

    @property
    def cwd(self) -> str:
        return str(self.run.workdir)

    def cli_args(self) -> list[str]:
        """`--cwd DIR --env K=V … -- kimi …` for the wire-replay command line."""
        extra = {k: v for k, v in self.env.items() if os.environ.get(k) != v}
        args = ["--cwd", self.cwd]
        for k, v in sorted(extra.items()):
            args += ["--env", f"{k}={v}"]
        return args + ["--", *self.argv]

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc) -> None:
        self.run.cleanup()


def scripts_with(name: str, old: str, new: str) -> list[str]:
    from sample_sessions.scenarios import SCENARIOS

    out = [s.replace(old, new) for s in SCENARIOS[name].scripts]
    assert out != SCENARIOS[name].scripts, f"{old!r} not in the scripts of {name}"
    return out


def run_cli(args: Sequence[str | os.PathLike], timeout: float = 120, env: dict | None = None,
            input: bytes | None = None,
            cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    """Run wire-replay (in `cwd`); the test fails on a hang (timeout) rather than hanging
    itself."""
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([WIRE_REPLAY, *map(str, args)], capture_output=True, timeout=timeout,
                          env=e, input=input if input is not None else b"", cwd=cwd)


def cli_json(args: Sequence[str], **kw) -> tuple[int, dict]:
    p = run_cli(["--json", *args], **kw)
    assert p.stdout.strip(), f"no JSON on stdout; stderr: {p.stderr.decode()}"
    return p.returncode, json.loads(p.stdout)


def assert_one_line_error(p: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    err = p.stderr.decode()
    assert p.returncode == code, (p.returncode, err, p.stdout.decode()[-2000:])
    assert "Traceback" not in err and "Traceback" not in p.stdout.decode(), err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("wire-replay: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def live_requests(result) -> list[dict]:
    """The agent requests a replay received, parsed."""
    out = []
    for f in result.frames:
        if f.direction == "a2c":
            try:
                m = json.loads(f.raw)
            except ValueError:
                continue
            if isinstance(m, dict) and m.get("method") == "request":
                out.append(m)
    return out
