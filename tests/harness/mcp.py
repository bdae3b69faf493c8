"""MCP sessions over stdio between the official SDKs, in both protocol eras: the scenario type,
its runner and its checks (the named scenarios are in sample_sessions/mcp_scenarios.py).

    from sample_sessions.mcp_scenarios import MCP_SCENARIOS
    from tests.harness.mcp import check_mcp_scenario, run_mcp_scenario
    result = run_mcp_scenario(MCP_SCENARIOS["mcp_demo_2026"])                      # server directly
    result = run_mcp_scenario(sc, ["wire-proxy", "--db", db, "--"])                # through the proxy
    assert check_mcp_scenario(sc, result) == []
    assert check_mcp_scenario(sc, result, frames=store.frames(session_id)) == []  # + the wire view

Each run uses the peer venvs `.peers/mcp2` (mcp 2.3.0, mcp-server-time, mcp-server-git) and
`.peers/mcp1` (mcp 1.30.0) from `bash scripts/setup-peers`: the client is
`tests/harness/sdk/mcp_client.py` under the scenario's client venv, and it spawns
`command_prefix + server argv` (the demo server `tests/harness/sdk/mcp_demo_server.py`, or a
reference server). The client answers the server's sampling, roots and elicitation requests with
fixed values and prints a JSON summary, which `check_mcp_scenario` checks; given the recorded
frames it also checks what the protocol era implies on the wire.

Runs happen in a scratch directory (HOME, the client's root, the server's cwd, a git repo), so
its path appears in roots and git arguments. This module runs under the project's Python; it
never imports the mcp SDK.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness.peers import peer_python
from tests.harness.wire import Problems

SDK = Path(__file__).resolve().parent / "sdk"
DEMO_SERVER = SDK / "mcp_demo_server.py"
MCP_CLIENT = SDK / "mcp_client.py"

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
PV_META = "io.modelcontextprotocol/protocolVersion"
INPUT_METHODS = ("sampling/createMessage", "roots/list", "elicitation/create")

# ---------------------------------------------------------------------------------------------
# the scenario type


@dataclass
class McpRun:
    """The scratch directories of one run."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def work(self) -> Path:  # the server's cwd and the client's one root
        return self.root / "work"

    @property
    def repo(self) -> Path:
        return self.root / "repo"


@dataclass
class Call:
    tool: str
    arguments: dict[str, Any] | Callable[[McpRun], dict[str, Any]]
    expect: Sequence[str] = ()  # substrings of the result text ("{work}", "{repo}" are filled in)
    error: bool = False  # the result is expected to be isError
    cancel: bool = False  # the client gives up at the first progress (notifications/cancelled)

    def args(self, run: McpRun) -> dict[str, Any]:
        return self.arguments(run) if callable(self.arguments) else dict(self.arguments)


@dataclass
class McpScenario:
    name: str
    description: str
    client: str  # peer venv of the client: "mcp2" or "mcp1"
    era: str  # mcp_client.py --era: "2026" (auto: discover, fall back) or "2025" (initialize)
    server: Callable[[McpRun], list[str]]
    calls: list[Call]
    # what the wire must show: "2026" (discover, no initialize), "2025" (initialize, no discover),
    # "fallback" (discover answered with an error, then initialize)
    expect_era: str
    expect_protocol_version: str
    expect_tools: Sequence[str] = ()
    expect_callbacks: dict[str, int] = field(default_factory=dict)  # counts; others must be 0
    expect_input_methods: Sequence[str] = ()  # server asks the client for these (either era)
    expect_progress: bool = False
    setup: Callable[[McpRun], None] | None = None
    timeout: float = 30.0
    client_args: Sequence[str] = ()  # more mcp_client.py options, e.g. --client-info JSON


def demo_server(venv: str, *args: str) -> Callable[[McpRun], list[str]]:
    return lambda run: [str(peer_python(venv)), str(DEMO_SERVER), *args]


# ---------------------------------------------------------------------------------------------
# running


@dataclass
class McpResult:
    argv: list[str]
    exit_code: int | None
    stdout: str
    stderr: str
    summary: dict[str, Any] | None
    timed_out: bool
    duration_s: float
    context: dict[str, Any] = field(default_factory=dict)
    stderr_bytes: bytes = b""  # the client's stderr as is: the server's (relayed) plus the client's


def run_mcp_scenario(
    scenario: McpScenario,
    command_prefix: Sequence[str] = (),
    timeout: float | None = None,
    *,
    keep: bool = False,
    env: dict[str, str] | None = None,
) -> McpResult:
    """Run one scenario: scratch dirs, `client -- command_prefix + server argv`, collect the summary.

    `env` adds variables to the client's environment and passes them on to the command (the SDK
    gives the server only PATH, HOME and what is passed explicitly). `result.context` gets
    scenario, root, work, repo, server argv (the scratch dir is deleted unless keep=True).
    Raises McpPeerMissing when a peer is not installed.
    """
    client_py = peer_python(scenario.client)
    run = McpRun(Path(tempfile.mkdtemp(prefix=f"wr-{scenario.name}-")))
    try:
        run.home.mkdir()
        run.work.mkdir()
        if scenario.setup:
            scenario.setup(run)
        server = scenario.server(run)
        argv = [str(client_py), str(MCP_CLIENT), "--era", scenario.era, "--roots-dir", str(run.work),
                "--cwd", str(run.work), "--timeout", str(timeout or scenario.timeout)]
        for call in scenario.calls:
            argv += ["--call", f"{call.tool}={json.dumps(call.args(run), ensure_ascii=False)}"]
            if call.error:
                argv += ["--allow-error", call.tool]
            if call.cancel:
                argv += ["--cancel", call.tool]
        argv += list(scenario.client_args)
        client_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(run.home),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        for name, value in (env or {}).items():
            client_env[name] = value
            argv += ["--env", name]
        argv += ["--", *map(str, command_prefix), *server]
        t0 = time.monotonic()
        timed_out = False
        try:
            proc = subprocess.run(argv, cwd=run.work, env=client_env, capture_output=True,
                                  timeout=(timeout or scenario.timeout) + 15)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as e:
            timed_out, code, out, err = True, None, e.stdout or b"", e.stderr or b""
        stdout = out.decode("utf-8", "replace")
        try:
            summary = json.loads(stdout)
        except json.JSONDecodeError:
            summary = None
        return McpResult(
            argv=argv, exit_code=code, stdout=stdout, stderr=err.decode("utf-8", "replace"),
            summary=summary, timed_out=timed_out, duration_s=time.monotonic() - t0, stderr_bytes=err,
            context={"scenario": scenario.name, "root": str(run.root), "work": str(run.work),
                     "work_uri": run.work.resolve().as_uri(), "repo": str(run.repo), "server": server},
        )
    finally:
        if not keep:
            shutil.rmtree(run.root, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# checks


def _fill(text: str, context: dict[str, Any]) -> str:
    for key in ("work_uri", "work", "repo"):
        text = text.replace("{" + key + "}", str(context.get(key, "")))
    return text


def check_mcp_scenario(scenario: McpScenario, result: McpResult, frames: Iterable[Any] | None = None) -> list[str]:
    """Problems with a run (empty = as intended): the client's summary, and with `frames` (the
    recorded frames: recorder Frame objects, or (direction, message dict) pairs) the wire."""
    p = Problems()
    p.expect(not result.timed_out, "hard timeout")
    p.expect(result.exit_code == 0, f"client exit code {result.exit_code}: {result.stderr.strip()[-500:]}")
    s = result.summary
    if not isinstance(s, dict):
        p.append(f"no JSON summary on stdout: {result.stdout[:300]!r}")
        return list(p)
    p.expect(s.get("error") is None, f"client error: {s.get('error')}")
    p.expect(s.get("protocol_version") == scenario.expect_protocol_version,
             f"negotiated {s.get('protocol_version')}, expected {scenario.expect_protocol_version}")
    missing = sorted(set(scenario.expect_tools) - set(s.get("tools") or []))
    p.expect(not missing, f"tools not listed: {missing}")
    results = s.get("results") or []
    p.expect(len(results) == len(scenario.calls), f"{len(results)} results for {len(scenario.calls)} calls")
    for call, r in zip(scenario.calls, results, strict=False):
        p.expect(r.get("tool") == call.tool, f"result for {r.get('tool')}, expected {call.tool}")
        p.expect(r.get("is_error") == call.error, f"{call.tool}: is_error {r.get('is_error')}, expected {call.error}")
        p.expect(bool(r.get("cancelled")) == call.cancel,
                 f"{call.tool}: cancelled {r.get('cancelled')}, expected {call.cancel}")
        text = "\n".join(c if isinstance(c, str) else json.dumps(c) for c in r.get("content") or [])
        for expected in call.expect:
            want = _fill(expected, result.context)
            p.expect(want in text, f"{call.tool}: {want!r} not in {text[:300]!r}")
    callbacks = s.get("callbacks") or {}
    for name, n in callbacks.items():
        count = scenario.expect_callbacks.get(name, 0)
        p.expect(n == count, f"callback {name} fired {n} times, expected {count}")
    if frames is not None:
        p.extend(wire_problems(scenario, frames))
    return list(p)


def wire_messages(frames: Iterable[Any]) -> list[tuple[str, Any]]:
    """(direction, parsed message) for every c2a/a2c frame, in order (None when not JSON)."""
    out: list[tuple[str, Any]] = []
    for f in frames:
        if isinstance(f, tuple):
            out.append(f)
            continue
        if f.direction not in ("c2a", "a2c"):
            continue
        try:
            out.append((f.direction, json.loads(f.raw)))
        except (ValueError, TypeError):
            out.append((f.direction, None))
    return out


def _meta_pv(msg: dict) -> Any:
    params = msg.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get(PV_META) if isinstance(meta, dict) else None


def wire_problems(scenario: McpScenario, frames: Iterable[Any]) -> list[str]:
    """What the scenario's era implies about the frames on the wire."""
    p = Problems()
    msgs = wire_messages(frames)
    bad = [d for d, m in msgs if not isinstance(m, dict)]
    p.expect(not bad, f"{len(bad)} frames that are not JSON objects")
    msgs = [(d, m) for d, m in msgs if isinstance(m, dict)]
    requests = [(d, m) for d, m in msgs if "method" in m and "id" in m]
    answers = {(d, m["id"]): m for d, m in msgs if "method" not in m and "id" in m}
    other = {"c2a": "a2c", "a2c": "c2a"}
    # a request the client cancelled gets no answer (the spec: the server SHOULD NOT send one)
    cancelled = {((m.get("params") or {}).get("requestId")) for d, m in msgs
                 if d == "c2a" and m.get("method") == "notifications/cancelled"}
    want_cancelled = sum(c.cancel for c in scenario.calls)
    p.expect(len(cancelled) == want_cancelled,
             f"{len(cancelled)} notifications/cancelled, expected {want_cancelled}")
    for d, m in requests:  # every request answered exactly once, by the other side
        if d == "c2a" and m["id"] in cancelled:
            p.expect((other[d], m["id"]) not in answers, f"cancelled {m['method']} id {m['id']} answered")
            continue
        p.expect((other[d], m["id"]) in answers, f"{d} {m['method']} id {m['id']} never answered")
    ids = [(d, m["id"]) for d, m in requests]
    p.expect(len(ids) == len(set(ids)), "a request id is used twice in one direction")
    c2a_methods = [m["method"] for d, m in msgs if d == "c2a" and "method" in m]
    a2c_requests = [m for d, m in requests if d == "a2c"]
    if not p.expect(c2a_methods, "no client frames"):
        return list(p)
    calls = [m for d, m in requests if d == "c2a" and m["method"] == "tools/call"]
    first_calls = [m for m in calls if "inputResponses" not in (m.get("params") or {})]
    p.expect([m["params"].get("name") for m in first_calls] == [c.tool for c in scenario.calls],
             f"tools/call order {[m['params'].get('name') for m in first_calls]}")

    def result_of(m: dict) -> dict:
        r = answers.get(("a2c", m["id"]), {}).get("result")
        return r if isinstance(r, dict) else {}

    if scenario.expect_era == "2026":
        p.expect(c2a_methods[0] == "server/discover", f"first client frame {c2a_methods[0]}, not server/discover")
        p.expect("initialize" not in c2a_methods and "notifications/initialized" not in c2a_methods,
                 "initialize in a 2026-07-28 session")
        disc = next((m for d, m in requests if m["method"] == "server/discover"), None)
        if disc is not None:
            p.expect(MODERN in (result_of(disc).get("supportedVersions") or []),
                     f"discover result {answers.get(('a2c', disc['id']))}")
        no_pv = [m["method"] for d, m in requests if d == "c2a" and _meta_pv(m) != MODERN]
        p.expect(not no_pv, f"requests without _meta protocolVersion {MODERN}: {no_pv}")
        p.expect(not a2c_requests, f"server->client requests in 2026: {[m['method'] for m in a2c_requests]}")
        asked: list[str] = []
        for i, m in enumerate(calls):
            if m["id"] in cancelled:
                continue
            r = result_of(m)
            if r.get("resultType") != "input_required":
                p.expect(r.get("resultType") == "complete",
                         f"tools/call id {m['id']}: resultType {r.get('resultType')}")
                continue
            reqs = r.get("inputRequests") or {}
            state = r.get("requestState")
            asked += [q.get("method") for q in reqs.values()]
            p.expect(isinstance(state, str) and state, f"input_required without requestState: {r}")
            if i + 1 >= len(calls):
                p.append(f"no retry after input_required (id {m['id']})")
                continue
            retry = calls[i + 1]
            rp = retry.get("params") or {}
            p.expect(retry["id"] != m["id"], "the retry reuses the request id")
            p.expect(rp.get("name") == m["params"].get("name"), "the retry calls another tool")
            p.expect(rp.get("requestState") == state, "the retry does not echo requestState")
            p.expect(set(rp.get("inputResponses") or {}) == set(reqs),
                     f"inputResponses keys {sorted(rp.get('inputResponses') or {})} != {sorted(reqs)}")
        p.expect(sorted(asked) == sorted(scenario.expect_input_methods),
                 f"input requests {sorted(asked)}, expected {sorted(scenario.expect_input_methods)}")
    else:
        init_at = c2a_methods.index("initialize") if "initialize" in c2a_methods else -1
        if scenario.expect_era == "fallback":
            p.expect(c2a_methods[0] == "server/discover", f"first client frame {c2a_methods[0]}, not server/discover")
            disc = next((m for d, m in requests if m["method"] == "server/discover"), None)
            ans = answers.get(("a2c", disc["id"])) if disc else None
            p.expect(ans is not None and "error" in ans, f"server/discover not answered with an error: {ans}")
            p.expect(init_at == 1, f"initialize is client frame {init_at}, expected right after the discover")
            p.expect(c2a_methods.count("server/discover") == 1,
                     f"server/discover sent {c2a_methods.count('server/discover')} times")
        else:
            p.expect(init_at == 0, f"first client frame {c2a_methods[0]}, not initialize")
            p.expect("server/discover" not in c2a_methods, "server/discover in a handshake-era session")
        init = next((m for d, m in requests if m["method"] == "initialize"), None)
        if init is not None:
            p.expect(result_of(init).get("protocolVersion") == scenario.expect_protocol_version,
                     f"initialize result {result_of(init).get('protocolVersion')}")
            p.expect(c2a_methods[init_at + 1:init_at + 2] == ["notifications/initialized"],
                     "notifications/initialized does not follow initialize")
        p.expect(not any("inputResponses" in (m.get("params") or {}) for m in calls), "inputResponses in handshake era")
        p.expect(not any(result_of(m).get("resultType") == "input_required" for m in calls),
                 "input_required result in handshake era")
        got = sorted(m["method"] for m in a2c_requests if m["method"] != "ping")
        p.expect(got == sorted(scenario.expect_input_methods),
                 f"server->client requests {got}, expected {sorted(scenario.expect_input_methods)}")
        for m in a2c_requests:
            ans = answers.get(("c2a", m["id"]))
            p.expect(ans is not None and "result" in ans, f"{m['method']} id {m['id']} answered with {ans}")
    if scenario.expect_progress:
        tokens = {((m.get("params") or {}).get("_meta") or {}).get("progressToken") for m in calls}
        prog = [m for d, m in msgs if d == "a2c" and m.get("method") == "notifications/progress"]
        p.expect(prog, "no notifications/progress")
        p.expect(all((m.get("params") or {}).get("progressToken") in tokens for m in prog),
                 "a progress notification for an unknown progressToken")
    return list(p)
