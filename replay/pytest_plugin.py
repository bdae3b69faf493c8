"""pytest plugin (entry point `wire_replay`): record and replay sessions inside tests, the way
pytest-recording users know it. Each test has a cassette, `cassettes/<module>/<test>.jsonl`
beside its file (a format-2 transcript: reviewable, diffable, replayable).

Client under test — the `wire_agent` fixture is the argv your client spawns in place of the
agent:

    @pytest.mark.wire_agent(["kimi", "--wire"])
    def test_my_client(wire_agent):
        assert my_client.run(argv=wire_agent) == "ok"

With no cassette yet (record mode `once`), or in `all`/`rewrite`, it is `wire-proxy` in front of
the real agent; after the test the recording becomes the cassette. Otherwise it is
`wire-replay CASSETTE --serve`, and after the test a client that behaved differently from the
recorded one fails the test with the report (no agent, no LLM, no network).

Agent under test — the `wire_replay` fixture replays the cassette against the agent command
(kimi's LLM pinned to what the recording says the model answered):

    @pytest.mark.wire_agent(["kimi", "--wire"])
    def test_my_agent(wire_replay):
        wire_replay()

The agent command comes from the marker, the `wire_agent_command` ini option, or a
`wire_agent_command` fixture of your own; never from a recording. Record modes
(`--wire-record-mode`, ini `wire_record_mode`; default `none`, as pytest-recording): see docs/replay.md.

This module is loaded by every pytest run in an environment that has wire-recorder: it imports
nothing heavy until a test uses a fixture.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from .options import RecordMode, values

RECORD_MODES = values(RecordMode)
CASSETTES = "cassettes"
_CHECKS = pytest.StashKey[list]()  # per test item: what to verify after the test function
_NOTES = pytest.StashKey[list]()  # per session: lines for the terminal summary


def visible(text: str, lines: bool = False) -> str:
    """recorder.visible, imported when first needed (the plugin stays light at pytest start)."""
    from wire_recorder.recorder.visible import visible as escape

    return escape(text, lines=lines)



def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("wire-replay", "record and replay agent sessions (wire-recorder)")
    group.addoption("--wire-record-mode", choices=RECORD_MODES, default=None,
                    help="none: replay only, a missing cassette fails (default); once: record "
                         "cassettes that do not exist yet, replay the others; all: re-record "
                         "every cassette, keeping those that did not change; rewrite: delete "
                         "each cassette and record it from scratch")
    group.addoption("--wire-frame-timeout", type=float, default=None,
                    help="seconds of silence allowed while a frame is expected (default 30)")
    parser.addini("wire_record_mode", "default record mode (none|once|all|rewrite)",
                  default="none")
    parser.addini("wire_agent_command", "the agent command (shell words), e.g. kimi --wire",
                  default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "wire_agent(command=None, *, cassette=None, **options): the agent command (a list or "
        "shell words) and the cassette for the wire_agent and wire_replay fixtures")
    config.addinivalue_line(
        "markers",
        "wire_replay(recording=None, agent=None, *, env=None, cwd=None, session=None, "
        "record=None, **options): default arguments for the `wire_replay` fixture")
    config.stash[_NOTES] = []


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    notes = config.stash.get(_NOTES, [])
    if notes:
        terminalreporter.section("wire-replay cassettes")
        for text in notes:
            terminalreporter.write(text if text.endswith("\n") else text + "\n")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    # the checks run in the call phase, so a client that diverged fails the test itself (not
    # its teardown), and a recording is kept only when the test passed
    try:
        result = yield
    except pytest.skip.Exception:
        raise  # nothing ran to check or keep
    except BaseException:
        for check in item.stash.get(_CHECKS, []):
            check(item, False)
        raise
    for check in item.stash.get(_CHECKS, []):
        check(item, True)
    return result


def _mode(config: pytest.Config) -> str:
    mode = config.getoption("--wire-record-mode") or config.getini("wire_record_mode") or "none"
    if mode not in RECORD_MODES:
        raise pytest.UsageError(f"wire_record_mode {mode!r}: use one of {', '.join(RECORD_MODES)}")
    return mode


def _note(config: pytest.Config, text: str) -> None:
    config.stash.setdefault(_NOTES, []).append(visible(text, lines=True))


def _argv(command: Any) -> list[str] | None:
    if command is None or command == "" or command == []:
        return None
    if isinstance(command, str):
        return shlex.split(command)
    return [str(c) for c in command]


def _marker(request: pytest.FixtureRequest, name: str) -> tuple[tuple, dict]:
    m = request.node.get_closest_marker(name)
    return (tuple(m.args), dict(m.kwargs)) if m is not None else ((), {})


def _tool(name: str, module: str) -> list[str]:
    """The installed console script beside this interpreter, else the module it runs."""
    exe = Path(sys.executable).parent / name
    return [str(exe)] if exe.exists() else [sys.executable, "-P", "-m", module]


def default_cassette(item: pytest.Item) -> Path:
    """`cassettes/<module>/<test>.jsonl` beside the test file (a class's tests: `Class.test`)."""
    path = Path(str(item.path))
    cls = getattr(item, "cls", None)
    name = f"{cls.__name__}.{item.name}" if cls is not None else item.name
    name = re.sub(r"[^\w.-]+", "-", name).strip("-")
    return path.parent / CASSETTES / path.stem / f"{name}.jsonl"


def _shown(config: pytest.Config, path: Path) -> str:
    try:
        return str(path.relative_to(config.rootpath))
    except ValueError:
        return str(path)


@pytest.fixture
def wire_record_mode(request: pytest.FixtureRequest) -> str:
    """The record mode in force (none, once, all or rewrite)."""
    return _mode(request.config)


@pytest.fixture
def wire_agent_command(request: pytest.FixtureRequest) -> list[str] | None:
    """The agent command: the `wire_agent` marker's, else the `wire_replay` marker's `agent`,
    else the `wire_agent_command` ini option. Override this fixture to compute it."""
    args, kwargs = _marker(request, "wire_agent")
    cmd = _argv(args[0] if args else kwargs.get("command"))
    if cmd is None:
        rargs, rkwargs = _marker(request, "wire_replay")
        cmd = _argv(rargs[1] if len(rargs) > 1 else rkwargs.get("agent"))
    return cmd if cmd is not None else _argv(request.config.getini("wire_agent_command"))


@pytest.fixture
def wire_cassette(request: pytest.FixtureRequest) -> Path:
    """The test's cassette: the markers' `cassette`/`recording` (relative to the rootdir), else
    `cassettes/<module>/<test>.jsonl` beside the test file."""
    args, kwargs = _marker(request, "wire_agent")
    given = kwargs.get("cassette")
    if given is None:
        rargs, rkwargs = _marker(request, "wire_replay")
        given = rargs[0] if rargs else rkwargs.get("recording")
    if given is None:
        return default_cassette(request.node)
    p = Path(given)
    return p if p.is_absolute() else Path(request.config.rootpath) / p


class AgentArgv(list[str]):
    """The `wire_agent` fixture's value: the argv to spawn (a list of str), plus what it is."""

    cassette: Path
    recording: bool  # True: wire-proxy in front of the real agent; False: wire-replay --serve


class _ClientSession:
    """One test's use of `wire_agent`: set up the argv, verify or keep the session after."""

    def __init__(self, request: pytest.FixtureRequest, command: list[str] | None,
                 cassette: Path, tmp: Path):
        self.config = request.config
        self.mode = _mode(request.config)
        self.cassette = cassette
        self.tmp = tmp
        self.name = request.node.name
        _, kwargs = _marker(request, "wire_agent")
        ft = kwargs.get("frame_timeout", self.config.getoption("--wire-frame-timeout"))
        self.frame_timeout = float(ft) if ft is not None else 30.0
        exists = cassette.exists()
        self.recording = self.mode in ("all", "rewrite") or (self.mode == "once" and not exists)
        # a .jsonl cassette is the session's transcript (reviewable, diffable: the default); a
        # cassette named *.db is the recording itself
        self.as_db = cassette.suffix == ".db"
        if not self.recording and not exists:
            pytest.fail(f"wire_agent: cassette {cassette} does not exist (record mode none; run "
                        f"with --wire-record-mode=once to record it)", pytrace=False)
        if self.recording and command is None:
            why = "does not exist" if not exists else f"is re-recorded (record mode {self.mode})"
            pytest.fail(f"wire_agent: cassette {_shown(self.config, cassette)} {why}, and no agent "
                        f"command to record it from: give @pytest.mark.wire_agent([...]) or the "
                        f"wire_agent_command ini option", pytrace=False)
        if self.recording:
            if self.mode == "rewrite" and exists:
                cassette.unlink()
            self.db = tmp / "session.db"
            argv = [*_tool("wire-proxy", "wire_recorder.recorder.proxy_cli"), "-q",
                    "--db", str(self.db), "--name", self.name, "--", *(command or [])]
        else:
            self.report = tmp / "report.json"
            argv = [*_tool("wire-replay", "wire_recorder.replay.cli"), str(cassette), "--serve",
                    "--frame-timeout", f"{self.frame_timeout:g}", "--report", str(self.report)]
        self.argv = AgentArgv(argv)
        self.argv.cassette, self.argv.recording = cassette, self.recording

    def check(self, item: pytest.Item, passed: bool) -> None:
        if self.recording:
            self._keep(passed)
        else:
            self._verify(item, passed)

    # -- client under test: was it the recorded client? ---------------------------------------
    def _verify(self, item: pytest.Item, passed: bool) -> None:
        report = self._read_report(wait=passed)
        if report is None:
            if passed:
                # a client's SIGTERM, SIGINT, SIGHUP or EOF gets a report; SIGKILL cannot
                pytest.fail(f"wire_agent: wire-replay --serve of {self.cassette} wrote no report: "
                            f"the client never started the agent command, it is still running, "
                            f"or the client killed it (SIGKILL)", pytrace=False)
            return
        if report.get("ok"):
            return
        text = _report_text(report)
        if passed:
            pytest.fail(f"the client under test behaved differently from the recorded client "
                        f"({_shown(self.config, self.cassette)}):\n{text}", pytrace=False)
        item.add_report_section("call", "wire-replay --serve", text)

    def _read_report(self, wait: bool) -> dict | None:
        # the client may have left its agent to end by itself: give --serve the time its own
        # timeout allows to finish and write the report
        deadline = time.monotonic() + (self.frame_timeout + 10 if wait else 0)
        while True:
            try:
                return json.loads(self.report.read_bytes())
            except (FileNotFoundError, ValueError):
                if time.monotonic() >= deadline:
                    return None
            time.sleep(0.05)

    # -- recording: keep the session as the cassette ------------------------------------------
    def _keep(self, passed: bool) -> None:
        shown = _shown(self.config, self.cassette)
        if not passed:
            _note(self.config, f"not recorded {shown}: the test failed")
            return
        from wire_recorder.recorder.errors import UserError

        try:
            sessions = self._stored_sessions()
            if not sessions:
                pytest.fail(f"wire_agent: nothing was recorded for {shown}: the client never "
                            f"started the agent command", pytrace=False)
            if len(sessions) > 1:
                pytest.fail(f"wire_agent: the client started the agent {len(sessions)} times; a "
                            f"cassette holds one session", pytrace=False)
            from wire_recorder.recorder.transcript import export_transcript, write_cassette

            new = self.tmp / "cassette.jsonl"
            export_transcript(str(self.db), str(new), sessions[0])
            data = new.read_bytes()
            old = None
            if self.cassette.exists():
                if self.as_db:  # compared as transcripts: the DB's bytes say nothing
                    was = self.tmp / "old.jsonl"
                    export_transcript(str(self.cassette), str(was))
                    old = was.read_bytes()
                else:
                    old = self.cassette.read_bytes()
        except UserError as e:
            error = e.one_line()
        else:
            error = None
        if error is not None:
            pytest.fail(f"wire_agent: {visible(error)}", pytrace=False)
        frames = len(data.splitlines()) - 1
        if old is not None and _same_session(old, data):
            _note(self.config, f"unchanged {shown}: {frames} frames, no change; not rewritten")
            return
        self.cassette.parent.mkdir(parents=True, exist_ok=True)
        if self.as_db:
            # the recording itself; frames over 256 KiB live in its .blobs file beside it
            blobs = Path(f"{self.cassette}.blobs")
            if blobs.exists():
                blobs.unlink()
            shutil.copyfile(self.db, self.cassette)
            if Path(f"{self.db}.blobs").exists():
                shutil.copyfile(f"{self.db}.blobs", blobs)
        else:  # 0600 (a transcript holds what the recording holds), whole or not at all
            write_cassette(str(self.cassette), data)
        if old is None:
            verb = "rewritten" if self.mode == "rewrite" else "recorded"
            _note(self.config, f"{verb} {shown}: {frames} frames")
        else:
            _note(self.config, f"updated {shown}: {frames} frames, "
                               f"{_changed_lines(old, data)} changed (review the diff)")

    def _stored_sessions(self) -> list[str]:
        from wire_recorder.recorder.recover import recover
        from wire_recorder.recorder.store import open_store

        # the proxy waits for its loader, but one that outlived it may still hold the spool
        deadline = time.monotonic() + 60
        while list(self.tmp.glob("*.spool")) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self.db.exists():
            return []
        recover(str(self.db))
        with open_store(str(self.db), read_only=True) as store:
            return [s["session_id"] for s in store.sessions()]


def _same_session(old: bytes, new: bytes) -> bool:
    """The same transcript but for the header's work dir manifest: that describes the place the
    agent ran in (the cassettes folder included, which recording itself changes), not what was
    said; a cassette is rewritten for a change in the session only."""
    def body(data: bytes) -> tuple[Any, bytes]:
        head, _, rest = data.partition(b"\n")
        try:
            header = json.loads(head)
        except ValueError:
            return head, rest
        if isinstance(header, dict):
            header.pop("workdir", None)
        return header, rest
    return body(old) == body(new)


def _changed_lines(old: bytes, new: bytes) -> str:
    import difflib

    diff = difflib.ndiff(old.decode(errors="replace").splitlines(),
                         new.decode(errors="replace").splitlines())
    minus = plus = 0
    for line in diff:
        minus += line.startswith("- ")
        plus += line.startswith("+ ")
    return f"-{minus} +{plus} lines"


def _report_text(report: dict) -> str:
    lines = []
    first = report.get("first_divergence")
    if first:
        lines.append(f"first divergence: {_headline(first)}")
    for d in report.get("divergences", [])[:20]:
        lines.append(f"  {d.get('kind', '?')}: {_headline(d)}")
        lines.extend(f"      {x}" for x in (d.get("details") or [])[:3])
    if report.get("stopped"):
        lines.append(f"stopped early: {report['stopped']}")
    # recorded names and frames: shown, never obeyed by the terminal
    return visible("\n".join(lines) or json.dumps(report, indent=1)[:4000], lines=True)


def _headline(d: Any) -> str:
    if isinstance(d, dict):
        where = d.get("where") or ""
        return f"{where}: {d.get('message', '')}" if where else str(d.get("message", ""))
    return str(d)


@pytest.fixture
def wire_agent(request: pytest.FixtureRequest, wire_agent_command: list[str] | None,
               wire_cassette: Path, tmp_path_factory: pytest.TempPathFactory) -> AgentArgv:
    """The argv your client under test spawns in place of the agent: `wire-proxy -- AGENT`
    while recording the cassette, `wire-replay CASSETTE --serve` when replaying it. After the
    test, a client that behaved differently from the recorded one fails the test."""
    tmp = tmp_path_factory.mktemp("wire-agent")
    session = _ClientSession(request, wire_agent_command, wire_cassette, tmp)
    request.node.stash.setdefault(_CHECKS, []).append(session.check)
    return session.argv


class WireReplay:
    """The `wire_replay` fixture's value: call it to replay a cassette against the agent."""

    def __init__(self, request: pytest.FixtureRequest, command: list[str] | None,
                 cassette: Path):
        self.request = request
        self.config = request.config
        self.record_mode = _mode(request.config)
        self.command = command
        self.cassette = cassette
        args, kwargs = _marker(request, "wire_replay")
        self.defaults: dict[str, Any] = dict(kwargs)
        self.defaults.pop("recording", None)
        self.defaults.pop("agent", None)
        _, akwargs = _marker(request, "wire_agent")
        for k, v in akwargs.items():
            if k not in ("command", "cassette"):
                self.defaults.setdefault(k, v)
        self.results: list = []

    def path(self, recording: str | os.PathLike) -> Path:
        p = Path(recording)
        return p if p.is_absolute() else Path(self.config.rootpath) / p

    def __call__(self, recording: str | os.PathLike | None = None,
                 agent: Sequence[str] | str | None = None, *, env: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike | None = None, session: str | None = None,
                 record: Callable[[str], Any] | None = None, mode: str | None = None,
                 fail: bool = True, **options: Any):
        """Replay `recording` (default: the test's cassette) against `agent` (default: the
        marker's or ini's agent command); fail the test on divergence (unless fail=False).
        Returns the ReplayResult. `options` are ReplayOptions fields (match_on, ignore, speed,
        frame_timeout, timeout, on_unmatched, …); `ignore` may hold strings."""
        from wire_recorder.recorder.errors import UserError

        from .driver import ReplayOptions, replay_session
        from .normalize import IgnoreRule
        from .report import render_text
        from .update import change_summary, update_recording

        d = self.defaults
        path = self.path(recording) if recording is not None else self.cassette
        argv = _argv(agent) if agent is not None else self.command
        if argv is None:
            # never the command stored in the recording: a shared recording must not run code
            pytest.fail("wire_replay: no agent command (give agent=[...], "
                        "@pytest.mark.wire_agent([...]) or the wire_agent_command ini option)",
                        pytrace=False)
        env = env if env is not None else d.get("env")
        cwd = cwd if cwd is not None else d.get("cwd")
        session = session if session is not None else d.get("session")
        record = record if record is not None else d.get("record")
        mode = mode or self.record_mode
        opts = {k: v for k, v in d.items() if k not in ("env", "cwd", "session", "record")}
        opts.update(options)
        if "ignore" in opts:
            opts["ignore"] = [IgnoreRule.parse(i) if isinstance(i, str) else i
                              for i in opts["ignore"]]
        ft = self.config.getoption("--wire-frame-timeout")
        if ft is not None:
            opts.setdefault("frame_timeout", ft)
        shown = _shown(self.config, path)
        try:
            if not path.exists():
                if mode == "none" or record is None:
                    why = "record mode is none" if mode == "none" else \
                        "an agent under test replays a client's session: record it first (a " \
                        "test using the wire_agent fixture, or wire-proxy), or pass record="
                    pytest.fail(f"wire_replay: cassette {shown} does not exist ({why})",
                                pytrace=False)
                record(str(path))
                if not path.exists():
                    pytest.fail(f"wire_replay: record({path}) did not create the cassette",
                                pytrace=False)
                mode = "none"  # the fresh recording must replay too
            result = replay_session(str(path), argv, env=env,
                                    cwd=str(cwd) if cwd is not None else None,
                                    session_id=session, options=ReplayOptions(**opts))
        except UserError as e:
            error = e.one_line()
        else:
            error = None
        if error is not None:  # outside the except: no "during handling" context in the report
            pytest.fail(f"wire_replay: {visible(error)}", pytrace=False)
        self.results.append(result)
        if mode in ("all", "rewrite"):
            if result.stopped:
                pytest.fail("wire_replay: not re-recorded, the replay stopped early\n" +
                            render_text(result), pytrace=False)
            if mode == "rewrite":
                written = _rewrite(result, str(path))
                _note(self.config, f"rewritten {shown} [{result.recording.name}]: "
                                   f"{result.stats.get('live_agent_frames', 0)} agent frames\n"
                      if written else change_summary(result, shown, written=False))
            else:
                where, written = update_recording(result)
                _note(self.config, change_summary(result, _shown(self.config, Path(where)),
                                                  written=written))
            return result
        if fail and not result.ok:
            pytest.fail(render_text(result), pytrace=False)
        return result


def _rewrite(result: Any, path: str) -> bool:
    """Write the live run as the cassette whatever the comparison said (a .db: the session is
    replaced). False when the bytes are those already there."""
    from .update import live_session, update_recording

    if not path.endswith(".jsonl"):
        return update_recording(result, path)[1]
    from wire_recorder.recorder.transcript import encode_session

    data = encode_session(*live_session(result))
    target = Path(path)
    if target.exists() and target.read_bytes() == data:
        return False
    fd, tmp = tempfile.mkstemp(prefix=".wire-replay-", dir=str(target.parent))
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)
    return True


@pytest.fixture
def wire_replay(request: pytest.FixtureRequest, wire_agent_command: list[str] | None,
                wire_cassette: Path) -> WireReplay:
    """Replay the test's cassette against the agent under test; the test fails with the report
    on divergence."""
    return WireReplay(request, wire_agent_command, wire_cassette)
