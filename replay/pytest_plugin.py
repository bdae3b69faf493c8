"""pytest plugin (entry point `wire_replay`): replay recordings against an agent inside tests.

    def test_approve(wire_replay, kimi_run):
        run = kimi_run(SCENARIOS["approve_shell"])
        wire_replay("sample_sessions/approve_shell.jsonl", run.argv(), env=run.env(),
                    cwd=run.workdir)

    @pytest.mark.wire_replay("sample_sessions/approve_shell.jsonl", agent=["my-agent", "--wire"])
    def test_marked(wire_replay):
        wire_replay()                                 # arguments come from the marker

A divergence fails the test with the replay report. Record modes, like pytest-recording's
(`--wire-record-mode`, or the `wire_record_mode` ini option; default none):

* none — replay only; a missing recording fails the test;
* once — replay when the recording exists; otherwise call `record(path)` to make it, then replay;
* all  — re-record: replay against the current agent and write what it did as the recording
  (`wire-replay --update`), or call `record(path)` when there is none yet.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from .options import RecordMode, values

RECORD_MODES = values(RecordMode)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("wire-replay", "replay recorded Wire sessions")
    group.addoption("--wire-record-mode", choices=RECORD_MODES, default=None,
                    help="none: replay only (default); once: record missing recordings; "
                         "all: re-record every recording against the current agent")
    group.addoption("--wire-frame-timeout", type=float, default=None,
                    help="seconds of agent silence allowed while a frame is expected (default 30)")
    parser.addini("wire_record_mode", "default record mode for the wire_replay fixture",
                  default="none")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "wire_replay(recording, agent=None, *, env=None, cwd=None, session=None, record=None, "
        "**options): default arguments for the `wire_replay` fixture")


def _mode(config: pytest.Config) -> str:
    mode = config.getoption("--wire-record-mode") or config.getini("wire_record_mode") or "none"
    if mode not in RECORD_MODES:
        raise pytest.UsageError(f"wire_record_mode {mode!r}: use one of {', '.join(RECORD_MODES)}")
    return mode


class WireReplay:
    """The `wire_replay` fixture's value: call it to replay one recording."""

    def __init__(self, request: pytest.FixtureRequest):
        self.request = request
        self.config = request.config
        self.record_mode = _mode(request.config)
        marker = request.node.get_closest_marker("wire_replay")
        self.defaults: dict[str, Any] = {}
        if marker is not None:
            if marker.args:
                self.defaults["recording"] = marker.args[0]
            if len(marker.args) > 1:
                self.defaults["agent"] = marker.args[1]
            self.defaults.update(marker.kwargs)
        self.results: list = []

    def path(self, recording: str | os.PathLike) -> Path:
        p = Path(recording)
        return p if p.is_absolute() else Path(self.config.rootpath) / p

    def __call__(self, recording: str | os.PathLike | None = None,
                 agent: Sequence[str] | None = None, *, env: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike | None = None, session: str | None = None,
                 record: Callable[[str], Any] | None = None, mode: str | None = None,
                 fail: bool = True, **options: Any):
        """Replay `recording` against `agent`; fail the test on divergence (unless fail=False).
        Returns the ReplayResult. `options` are ReplayOptions fields (match_on, ignore, speed,
        frame_timeout, timeout, on_unmatched, …); `ignore` may hold strings."""
        from wire_recorder.recorder.errors import UserError

        from .driver import ReplayOptions, replay_session
        from .normalize import IgnoreRule
        from .report import render_text
        from .update import change_summary, update_recording

        d = self.defaults
        recording = recording if recording is not None else d.get("recording")
        if recording is None:
            pytest.fail("wire_replay: no recording given (argument or @pytest.mark.wire_replay)",
                        pytrace=False)
        agent = agent if agent is not None else d.get("agent")
        env = env if env is not None else d.get("env")
        cwd = cwd if cwd is not None else d.get("cwd")
        session = session if session is not None else d.get("session")
        record = record if record is not None else d.get("record")
        mode = mode or self.record_mode
        opts = {k: v for k, v in d.items() if k not in
                ("recording", "agent", "env", "cwd", "session", "record")}
        opts.update(options)
        if "ignore" in opts:
            opts["ignore"] = [IgnoreRule.parse(i) if isinstance(i, str) else i
                              for i in opts["ignore"]]
        ft = self.config.getoption("--wire-frame-timeout")
        if ft is not None:
            opts.setdefault("frame_timeout", ft)
        path = self.path(recording)
        try:
            if not path.exists():
                if mode == "none" or record is None:
                    why = "record mode is none" if mode == "none" else "no record= callable"
                    pytest.fail(f"wire_replay: recording {path} does not exist ({why}; run with "
                                f"--wire-record-mode=once and a record= callable to make it)",
                                pytrace=False)
                record(str(path))
                if not path.exists():
                    pytest.fail(f"wire_replay: record({path}) did not create the recording",
                                pytrace=False)
                mode = "none"  # the fresh recording must replay too
            result = replay_session(str(path), agent, env=env,
                                    cwd=str(cwd) if cwd is not None else None,
                                    session_id=session, options=ReplayOptions(**opts))
        except UserError as e:
            pytest.fail(f"wire_replay: {e.one_line()}", pytrace=False)
        self.results.append(result)
        if mode == "all":
            if result.stopped:
                pytest.fail("wire_replay: not re-recorded, the replay stopped early\n" +
                            render_text(result), pytrace=False)
            where, written = update_recording(result)
            self._note(change_summary(result, where, written=written))
            return result
        if fail and not result.ok:
            pytest.fail(render_text(result), pytrace=False)
        return result

    def _note(self, text: str) -> None:
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line("")
            tr.write(text)


@pytest.fixture
def wire_replay(request: pytest.FixtureRequest) -> WireReplay:
    """Replay a recording against an agent; the test fails with the report on divergence."""
    return WireReplay(request)


@pytest.fixture
def wire_record_mode(request: pytest.FixtureRequest) -> str:
    return _mode(request.config)
