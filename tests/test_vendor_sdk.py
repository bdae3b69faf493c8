"""The vendor's own Wire client, `@moonshot-ai/kimi-agent-sdk` (Node, .peers/node-sdk), used
unchanged by a small program (tests/harness/sdk/kimi_sdk_client.mjs): two prompts, an approval
the SDK answers, an external tool of the client's. It spawns its agent through its `executable`
option and ends every session with SIGTERM, never closing stdin.

Recorded through `wire-proxy` in front of the real `kimi --wire` (scripted echo LLM); the agent
side replays green with only `-- kimi --wire`; `wire-replay --serve` stands in for the agent in
front of the unchanged program (green, and red naming the change when the program answers or
prompts differently), by hand and through the pytest plugin; the SIGTERM the SDK asked for is no
error in `errors`, `wire-stats` or `wire-show`. Also: `--serve` ended by SIGTERM, SIGINT, SIGHUP
or EOF (the project's scripted client) writes its report and exits with the verdict."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sample_sessions.scenarios import SCENARIOS
from tests.harness.kimi_peer import KimiRun, msg_id, script, shell, text, tool_call, usage
from tests.harness.peers import find_node_sdk, need
from tests.harness.proxy import WIRE_PROXY, db_rows, settle
from tests.harness.replay import SAMPLES, WIRE_REPLAY, parallel, run_cli
from tests.harness.scripted_client import Approval, run_client
from wire_recorder.analysis.sources import open_workspace

pytest_plugins = ("pytester",)

CLIENT = Path(__file__).parent / "harness" / "sdk" / "kimi_sdk_client.mjs"
BIN = Path(sys.executable).parent
SCRIPTS = [
    script(msg_id("msg-1"), usage(120, 15, 30), text("I'll run it."), shell("call-1", "echo hello")),
    script(msg_id("msg-2"), usage(160, 6, 150), text("The command printed hello.")),
    script(msg_id("msg-3"), usage(200, 10, 150),
           tool_call("call-2", "lookup_weather", {"city": "Paris"})),
    script(msg_id("msg-4"), usage(240, 8, 150), text("It is sunny in Paris.")),
]


def errors_of(db: Path | str) -> list[tuple]:
    """(source, code) of each row of the `errors` view (as wire-query, the UI and wire-stats
    read it)."""
    settle(["--db", str(db)])
    with open_workspace([str(db)]) as ws:
        return ws.con.execute("SELECT source, code FROM errors ORDER BY seq").fetchall()


@pytest.fixture(scope="module")
def node_sdk() -> tuple[Path, Path]:
    return need(find_node_sdk, "the vendor's Node SDK")


def wrapper(path: Path, argv: list[str], pass_args: bool) -> str:
    """An executable for the SDK's `executable` option: argv, plus the SDK's own arguments
    (`--session <uuid> --work-dir DIR --wire --no-thinking`) when pass_args (an agent), not for
    `--serve` (it plays the agent itself)."""
    path.write_text("#!/bin/sh\nexec " + " ".join(map(shlex.quote, argv)) +
                    (' "$@"' if pass_args else "") + "\n")
    path.chmod(0o755)
    return str(path)


def run_sdk(node_sdk, executable: str, workdir: Path, env: dict | None = None,
            **changes: str) -> dict:
    """Run the SDK program to its end; its JSON line. changes: SDK_APPROVAL, SDK_PROMPT_2, …"""
    node, prefix = node_sdk
    e = dict(env if env is not None else os.environ)
    e.update(changes)
    p = subprocess.run([str(node), str(CLIENT), str(prefix), executable, str(workdir)],
                       env=e, capture_output=True, text=True, timeout=600)
    assert p.stdout.strip(), (p.returncode, p.stderr[-3000:])
    out = json.loads(p.stdout.splitlines()[-1])
    out["exit_code"], out["stderr"] = p.returncode, p.stderr
    return out


@pytest.fixture(scope="module")
def recorded(node_sdk, kimi_exe, tmp_path_factory):
    """The SDK program's session with the real kimi, recorded through wire-proxy."""
    root = tmp_path_factory.mktemp("sdk-record")
    run = KimiRun.create(SCRIPTS, kimi=kimi_exe, tmp_root=root)
    db = root / "sdk.db"
    proxy = [WIRE_PROXY, "-q", "--db", str(db), "--name", "sdk", "--"]
    exe = wrapper(root / "agent.sh", [*proxy, str(kimi_exe), "--config-file",
                                      str(run.config_path)], pass_args=True)
    out = run_sdk(node_sdk, exe, run.workdir, env=run.env())
    settle(proxy)
    yield db, out, run
    run.cleanup()


def test_the_sdk_session_is_recorded_through_the_proxy(recorded):
    db, out, _ = recorded
    assert out["error"] is None and out["exit_code"] == 0, out
    assert [t["status"] for t in out["turns"]] == ["finished", "finished"]
    assert out["approvals"] == [{"sender": "Shell", "description": "Run command `echo hello`",
                                 "answer": "approve"}]
    assert out["tool_calls"] == ["Paris"]  # the client's external tool ran
    assert "It is sunny in Paris." in out["turns"][1]["text"]
    # the SDK ended the session with SIGTERM, forwarded by the proxy to kimi
    assert db_rows(str(db), "SELECT method, payload->>'signal' FROM frames WHERE "
                            "direction = 'proxy' AND method IN ('signal', 'exit') ORDER BY seq") \
        == [("signal", "SIGTERM"), ("exit", "SIGTERM")]
    assert db_rows(str(db), "SELECT exit_code FROM sessions") == [(143,)]
    assert out["agent_exits"] == [143]  # the proxy's exit, as the SDK saw it


def test_the_sdks_sigterm_is_not_an_error(recorded):
    db, _, _ = recorded
    assert errors_of(db) == []
    stats = subprocess.run([str(BIN / "wire-stats"), str(db), "--format", "json"],
                           capture_output=True, text=True, timeout=120)
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["overview"]["errors"] == {}
    show = subprocess.run([str(BIN / "wire-show"), str(db)], capture_output=True, text=True,
                          timeout=120)
    assert show.returncode == 0, show.stderr
    assert "0 errors" in show.stdout and "exit status 143 (SIGTERM)" in show.stdout
    # wire-ui: the session list (its "with errors" filter) and the session's own counts
    from wire_recorder.analysis.ui.data import Catalog

    cat = Catalog([str(db)], cache=None)
    cat.build()
    rows = cat.page()["rows"]
    assert [r["errors"] for r in rows] == [0] and cat.page(errors=True)["matched"] == 0
    assert cat.session(rows[0]["key"])["counts"]["errors"] == 0


def test_the_agent_side_replays_green_twice_with_only_kimi_wire(recorded, kimi_exe, tmp_path):
    db, _, _ = recorded

    def replay(n):
        home, work = tmp_path / f"home{n}", tmp_path / f"work{n}"
        home.mkdir()
        work.mkdir()
        p = run_cli([db, "--json", "--frame-timeout", "60", "--cwd", work, "--",
                     str(kimi_exe), "--wire"], env={"HOME": str(home)}, timeout=600)
        return p.returncode, json.loads(p.stdout or b"{}"), p.stderr.decode()

    for code, report, err in parallel(replay, [1, 2], workers=2):
        assert code == 0 and report["ok"], (report.get("divergences"), err[-2000:])
        assert report["stats"]["requests_matched"] == 2  # the approval and the external tool


def serve(node_sdk, db: Path, tmp: Path, name: str, **changes: str) -> tuple[dict, dict]:
    """The unchanged SDK program in front of `wire-replay DB --serve`: (its output, the report)."""
    report = tmp / f"{name}.json"
    exe = wrapper(tmp / f"{name}.sh", [WIRE_REPLAY, str(db), "--serve", "--frame-timeout", "60",
                                       "--report", str(report)], pass_args=False)
    work = tmp / f"{name}-work"
    work.mkdir()
    out = run_sdk(node_sdk, exe, work, **changes)
    assert report.exists(), out  # written before --serve exited: the SDK waited for that exit
    return out, json.loads(report.read_text())


def test_serve_in_front_of_the_unchanged_sdk_program_is_green(recorded, node_sdk, tmp_path):
    db, recorded_out, _ = recorded
    out, report = serve(node_sdk, db, tmp_path, "green")
    assert report["ok"] and report["exit_code"] == 0, report.get("divergences")
    assert out["agent_exits"] == [0], out  # --serve's exit code, as the SDK saw it
    assert out["error"] is None and out["exit_code"] == 0
    # the program saw what it saw from the real kimi
    assert [t["text"] for t in out["turns"]] == [t["text"] for t in recorded_out["turns"]]
    assert out["tool_calls"] == ["Paris"]
    assert report["stats"]["answers_checked"] == 2


@pytest.mark.parametrize("changes,needle", [
    ({"SDK_APPROVAL": "reject"},
     "turn 1, step 1: the client answered ApprovalRequest Shell: Run command `echo hello` with "
     "'reject', recorded 'approve'"),
    ({"SDK_PROMPT_2": "What is the weather in Rome?"},
     '{"user_input":"What is the weather in Paris?"}, got request prompt'),
])
def test_serve_catches_a_changed_sdk_program(recorded, node_sdk, tmp_path, changes, needle):
    db, _, _ = recorded
    out, report = serve(node_sdk, db, tmp_path, "red", **changes)
    assert not report["ok"] and report["exit_code"] == 1
    assert out["agent_exits"] == [1], out
    first = report["first_divergence"]
    assert needle in f"{first['where']}: {first['message']}", first
    if "SDK_PROMPT_2" in changes:
        assert first["message"].endswith('{"user_input":"What is the weather in Rome?"}')


PLUGIN_TEST = """
import json, os, shlex, subprocess

def test_sdk_client(wire_agent, tmp_path):
    exe = tmp_path / "agent.sh"
    # recording: the SDK's own arguments go to kimi; --serve plays the agent and takes none
    tail = ' "$@"' if wire_agent.recording else ""
    exe.write_text("#!/bin/sh\\nexec " + " ".join(map(shlex.quote, wire_agent)) + tail + "\\n")
    exe.chmod(0o755)
    env = dict(os.environ, HOME={home!r}, KIMI_SCRIPTED_ECHO_SCRIPTS={scripts!r})
    p = subprocess.run([{node!r}, {client!r}, {prefix!r}, str(exe), {work!r}], env=env,
                       capture_output=True, text=True, timeout=600)
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["error"] is None, out
    assert [t["status"] for t in out["turns"]] == ["finished", "finished"]
"""


def test_the_pytest_plugin_records_and_serves_the_sdk_program(node_sdk, kimi_exe, pytester,
                                                                monkeypatch, tmp_path):
    run = KimiRun.create(SCRIPTS, kimi=kimi_exe, tmp_root=tmp_path)
    node, prefix = node_sdk
    pytester.makepyfile(test_sdk=PLUGIN_TEST.format(
        home=str(run.home), scripts=str(run.scripts_path), node=str(node), client=str(CLIENT),
        prefix=str(prefix), work=str(run.workdir)))
    agent = shlex.join([str(kimi_exe), "--config-file", str(run.config_path)])
    args = ("-p", "no:cacheprovider", "-o", f"wire_agent_command={agent}")
    cassette = pytester.path / "cassettes" / "test_sdk" / "test_sdk_client.jsonl"

    res = pytester.runpytest_subprocess(*args, "--wire-record-mode=once")
    res.assert_outcomes(passed=1)
    assert "recorded cassettes/test_sdk/test_sdk_client.jsonl" in res.stdout.str()
    assert cassette.exists()

    # replayed: --serve in front of the unchanged program, its verdict read from its report
    res = pytester.runpytest_subprocess(*args)
    res.assert_outcomes(passed=1)

    for env, needle in ((("SDK_APPROVAL", "reject"), "with 'reject', recorded 'approve'"),
                        (("SDK_PROMPT_1", "Run echo bye"), "Run echo bye")):
        monkeypatch.setenv(*env)
        res = pytester.runpytest_subprocess(*args)
        res.assert_outcomes(failed=1)
        out = res.stdout.str()
        assert "the client under test behaved differently from the recorded client" in out, out
        assert needle in out and "wrote no report" not in out, out
        monkeypatch.delenv(env[0])
    run.cleanup()


# -- --serve ended by a signal or EOF, with the project's scripted client ---------------------


def serve_approve_shell(tmp_path, ending: signal.Signals | None, **plan_changes):
    sc = SCENARIOS["approve_shell"]
    plan = dataclasses.replace(sc.plan, end_signal=ending, **plan_changes)
    report = tmp_path / "report.json"
    r = run_client([WIRE_REPLAY, str(SAMPLES / "approve_shell.jsonl"), "--serve",
                    "--frame-timeout", "60", "--report", str(report)], plan, timeout=120)
    return r, json.loads(report.read_text()) if report.exists() else None


@pytest.mark.parametrize("ending", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, None],
                         ids=["SIGTERM", "SIGINT", "SIGHUP", "EOF"])
def test_serve_ended_by_a_signal_or_eof_reports_green(tmp_path, ending):
    r, report = serve_approve_shell(tmp_path, ending)
    assert r.exit_code == 0, (r.exit_code, r.stderr.decode())
    assert r.problems == [] and r.stderr == b""
    assert report is not None and report["ok"] and not report["stopped"], report
    assert report["stats"]["answers_checked"] == 1


@pytest.mark.parametrize("ending", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, None],
                         ids=["SIGTERM", "SIGINT", "SIGHUP", "EOF"])
def test_serve_ended_by_a_signal_or_eof_reports_red(tmp_path, ending):
    r, report = serve_approve_shell(tmp_path, ending, approvals=[Approval.reject()])
    err = r.stderr.decode()
    assert r.exit_code == 1, (r.exit_code, err)
    assert "with 'reject', recorded 'approve'" in err and "Traceback" not in err
    assert report is not None and not report["ok"]
    assert "with 'reject', recorded 'approve'" in report["first_divergence"]["message"]


def test_serve_ended_by_sigterm_before_the_recorded_end_names_what_is_missing(tmp_path):
    r, report = serve_approve_shell(tmp_path, signal.SIGTERM, prompts=[])
    assert r.exit_code == 1, r.stderr.decode()
    assert report is not None and report["stopped"] == "client ended the session early (SIGTERM)"
    assert report["first_divergence"]["message"].startswith(
        "the client ended the session (SIGTERM) instead of sending request prompt")


# -- an exit the client asked for, and one it did not -------------------------------------------

AGENT = r"""
import os, signal, sys
signal.signal(signal.SIGTERM, lambda *_: sys.exit(int(sys.argv[1])))
os.write(1, b'{"jsonrpc":"2.0","method":"event","params":{"type":"TurnBegin","payload":{}}}\n')
if sys.argv[2] == "exit":
    sys.exit(int(sys.argv[1]))
signal.pause()
"""


@pytest.mark.parametrize("client_signal,status,error", [
    (True, 143, False),   # the SDK's case: SIGTERM forwarded, the agent exits 128 + 15
    (True, 3, True),      # asked to stop, but it failed on the way out
    (False, 143, True),   # nobody asked it to stop
])
def test_only_an_exit_the_client_asked_for_is_not_an_error(tmp_path, client_signal, status,
                                                            error):
    db = str(tmp_path / "x.db")
    args = ["-q", "--db", db, "--"]
    p = subprocess.Popen([WIRE_PROXY, *args, sys.executable, "-c", AGENT, str(status),
                          "wait" if client_signal else "exit"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline().startswith(b'{"jsonrpc"')  # the agent runs, its handler is set
    if client_signal:
        p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=120) == status
    p.stdin.close()
    p.stdout.close()
    p.stderr.close()
    rows = errors_of(db)
    assert rows == ([("exit", status)] if error else []), rows


def test_serve_blocked_writing_to_a_client_that_left_still_ends_on_sigterm(tmp_path):
    """The client stopped reading (a full pipe blocks --serve's write) and sends SIGTERM: the
    write ends, and the report comes with the verdict, instead of a wait for the SIGKILL the
    vendor SDK sends 3 s later."""
    import fcntl
    import termios

    from tests.harness.proxy import wait_until

    lines = (SAMPLES / "approve_shell.jsonl").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith('{"dir":"a2c"') and '"init-1"' in ln)
    big = {"jsonrpc": "2.0", "method": "event", "params": {"type": "ContentPart", "payload": {
        "type": "text", "text": "x" * 1_000_000}}}
    lines.insert(at + 1, json.dumps({"dir": "a2c", "frame": big}))
    rec = tmp_path / "big.jsonl"
    rec.write_text("\n".join(lines) + "\n")
    report = tmp_path / "report.json"
    r, w = os.pipe()  # --serve's stdout, never read
    p = subprocess.Popen([WIRE_REPLAY, str(rec), "--serve", "--frame-timeout", "600",
                          "--report", str(report)], stdin=subprocess.PIPE, stdout=w,
                         stderr=subprocess.PIPE)
    os.close(w)
    try:
        init = json.loads(lines[at - 1])["frame"]
        p.stdin.write(json.dumps(init).encode() + b"\n")
        p.stdin.flush()

        def blocked() -> bool:  # its main thread waits in the kernel's pipe write
            with open(f"/proc/{p.pid}/wchan") as f:
                return "pipe_write" in f.read()

        assert wait_until(blocked, timeout=120)
        pending = int.from_bytes(fcntl.ioctl(r, termios.FIONREAD, b"\0\0\0\0"), "little")
        assert pending < 1_000_000  # the big frame is stuck half way
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 1, p.stderr.read().decode()
    finally:
        if p.poll() is None:
            p.kill()
        os.close(r)
    got = json.loads(report.read_text())
    assert got["stopped"] == "client ended the session early (SIGTERM)"
    assert got["first_divergence"]["message"].startswith(
        "the client ended the session (SIGTERM) instead of sending request prompt")


def test_a_signal_after_eof_does_not_cut_the_report_short(tmp_path):
    """A client that closes stdin and then sends SIGTERM (the session over already, --serve
    writing its report): the text report still comes, with the verdict as the exit code."""
    from tests.harness.proxy import wait_until

    lines = (SAMPLES / "approve_shell.jsonl").read_text().splitlines()
    init = next(json.loads(ln)["frame"] for ln in lines if ln.startswith('{"dir":"c2a"'))
    report = tmp_path / "report.json"
    p = subprocess.Popen([WIRE_REPLAY, str(SAMPLES / "approve_shell.jsonl"), "--serve",
                          "--report", str(report)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(json.dumps(init).encode() + b"\n")
    p.stdin.close()  # before the prompt: red
    assert p.stdout.readline().startswith(b'{"jsonrpc":"2.0","id":"init-1"')
    assert wait_until(report.exists, timeout=120, interval=0.002)  # the session is over
    p.send_signal(signal.SIGTERM)  # (to the exited process's zombie, if it was that quick)
    assert p.wait(timeout=60) == 1
    err = p.stderr.read().decode()
    assert "the client closed its input instead of sending request prompt" in err, err


def test_a_sigterm_while_the_recording_loads_still_gets_a_report(tmp_path):
    """The client gives up at once (the SDK's close() right after spawning): SIGTERM arrives
    while --serve still loads the recording. It is held back until the session can take it,
    then ends the session as any client's SIGTERM does: a report, and the verdict."""
    from tests.harness.proxy import wait_until

    lines = (SAMPLES / "approve_shell.jsonl").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith('{"dir":"a2c"') and '"init-1"' in ln)
    part = json.dumps({"dir": "a2c", "frame": {"jsonrpc": "2.0", "method": "event", "params": {
        "type": "ContentPart", "payload": {"type": "text", "text": "x"}}}})
    lines[at + 1:at + 1] = [part] * 50_000  # a recording that takes a while to load
    rec = tmp_path / "long.jsonl"
    rec.write_text("\n".join(lines) + "\n")
    report = tmp_path / "report.json"
    p = subprocess.Popen([WIRE_REPLAY, str(rec), "--serve", "--report", str(report)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def held() -> bool:  # SIGTERM blocked and not caught yet: started, the session not yet
        with open(f"/proc/{p.pid}/status") as f:
            masks = dict(ln.split(":") for ln in f if ln.startswith(("SigBlk:", "SigCgt:")))
        bit = 1 << (signal.SIGTERM - 1)
        return bool(int(masks["SigBlk"], 16) & bit) and not int(masks["SigCgt"], 16) & bit

    try:
        assert wait_until(held, timeout=120, interval=0.002)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=300) == 1
    finally:
        if p.poll() is None:
            p.kill()
    got = json.loads(report.read_text())
    assert got["first_divergence"]["message"].startswith(
        "the client ended the session (SIGTERM) instead of sending request initialize"), got
    assert "the client ended the session (SIGTERM)" in p.stderr.read().decode()
