"""Every kimi sample session in sample_sessions/ (Wire and ACP) replays green against a fresh real
kimi given only the agent command (`kimi --wire`, `kimi acp`) and an empty HOME: no scripts, no
config. The model is pinned to what the recording says it answered (replay.agents), the
sessions an ACP sample reopens are replayed first, every agent request is matched by what it
asks although its id differs, and the user's HOME is left as it was. The second replay of each
runs on a busy machine (two CPU burners) with the default timeouts: start-up is not a frame
timeout, and kimi may take a minute to answer `initialize` there (tests/test_slow_start.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sample_sessions.acp_scenarios import ACP_SCENARIOS
from tests.harness.busy import cpu_burners
from tests.harness.replay import SAMPLES, live_requests, parallel, sample_names

WIRE = sample_names()
ACP = [n for n, sc in ACP_SCENARIOS.items() if sc.sample and (SAMPLES / f"{n}.jsonl").exists()]
NAMES = WIRE + ACP
FRESH_ID_TYPES = {"ApprovalRequest", "QuestionRequest", "HookRequest"}


@pytest.fixture(scope="module")
def replays(kimi_exe, tmp_path_factory):
    """Every sample replayed twice, each time in a fresh HOME and work dir, a few side by side
    (kimi's start-up mostly waits): a pinned replay gives the same verdict run after run, and
    on a busy machine with no wait raised (the second run)."""
    from wire_recorder.replay.driver import ReplayOptions, replay_session
    from wire_recorder.replay.settings import STARTUP_TIMEOUT_S

    def one(job: tuple[str, bool]):
        name, busy = job
        root = tmp_path_factory.mktemp(name)
        home, work = root / "home", root / "work"
        home.mkdir()
        work.mkdir()
        # the work dir as it was when the session was recorded (what the user has)
        for rel, content in (ACP_SCENARIOS[name].files if name in ACP else {}).items():
            (work / rel).write_text(content, encoding="utf-8")
        argv = [str(kimi_exe), "acp" if name in ACP else "--wire"]
        env = {**os.environ, "HOME": str(home)}
        # busy: wire-replay's defaults (its start-up wait whatever $WIRE_REPLAY_STARTUP_TIMEOUT
        # says); quiet: a frame timeout to spare
        options = (ReplayOptions(startup_timeout=STARTUP_TIMEOUT_S) if busy
                   else ReplayOptions(frame_timeout=60))
        result = replay_session(SAMPLES / f"{name}.jsonl", argv, env=env, cwd=str(work),
                                options=options)
        return name, result, home

    out: dict[str, list] = {}
    quiet = parallel(one, [(n, False) for n in NAMES])
    with cpu_burners():
        busy = parallel(one, [(n, True) for n in NAMES])
    for name, result, home in quiet + busy:
        out.setdefault(name, []).append((result, home))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_sample_replays_with_only_the_agent_command(replays, name):
    assert len(replays[name]) == 2
    for result, home in replays[name]:
        check_replay(name, result, home)


def check_replay(name, result, home) -> None:
    assert result.ok and result.agent_exit_code == 0, result.first
    assert all(o.ok for o in result.origins)
    assert any("LLM pinned to the recording" in n for n in result.notes), result.notes
    assert list(Path(home).iterdir()) == []  # kimi's sessions and logs went to a scratch HOME
    recorded = {m.rpc_id for m in result.recording.requests()}
    live = live_requests(result) if name in WIRE else []
    if name in WIRE:
        assert len(live) == len(recorded) == result.stats.get("requests_matched", 0)
        fresh = [r["id"] for r in live if r["params"]["type"] in FRESH_ID_TYPES]
        assert not set(fresh) & recorded  # matched by what they ask, not by id
        # every answer the replay sent went to a live id
        sent = [json.loads(f.raw) for f in result.frames if f.direction == "c2a"]
        answers = [m for m in sent if "method" not in m]
        assert {a["id"] for a in answers} <= {r["id"] for r in live}
    else:
        assert result.stats.get("requests_matched", 0) == len(result.recording.requests())
