"""`wire-proxy --llm -- <node22> <main.mjs> acp`: Kimi Code 2.1.0 over ACP recorded with its
model leg (a text prompt, then a permission-gated Bash through terminal/* and a Read) against the
streaming model server, the agent pointed at the loopback through a scratch KIMI_CODE_HOME
(recorder/llm_upstream_kimicode.py); then replayed from the recorded leg with the upstream
stopped and only the agent command in a fresh HOME (green), and with an AGENTS.md added to the
work dir (red, naming the system prompt). One recording, one green and one red replay."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.acp import check_acp_scenario
from tests.harness.kimicode import find_kimicode
from tests.harness.kimicode_leg import record_and_replay
from tests.harness.kimicode_session import SCENARIO, TURNS
from tests.harness.llm_leg import KEY_RE, exchanges
from tests.harness.peers import need

BIN = Path(sys.executable).parent
EARLIER = {"root": "/", "name": "earlier", "created_at": "2026-01-01T00:00:00.000Z",
           "last_opened_at": "2026-01-01T00:00:00.000Z"}
WORKSPACES = {"version": 1, "workspaces": {"wd_earlier_000000000000": EARLIER},
              "deleted_workspace_ids": []}


@pytest.fixture(scope="module")
def kc_leg(acp_python, tmp_path_factory):
    def earlier_workspace(run) -> None:
        # an earlier session's workspace list: Kimi Code rewrites it atomically (the scratch
        # data dir's link becomes a file), which the leg copies back over the user's
        (run.home / ".kimi-code" / "workspaces.json").write_text(json.dumps(WORKSPACES),
                                                                  encoding="utf-8")
    return record_and_replay(acp_python, tmp_path_factory.mktemp("llm-leg-kimicode"), TURNS,
                             before=earlier_workspace)


def test_kimi_code_records_its_model_leg(kc_leg):
    result, model, db, run = kc_leg[:4]
    assert result.exit_code == 0, result.client_stderr[-2000:]
    assert check_acp_scenario(SCENARIO, result) == [], result.client_stderr[-2000:]
    ex = exchanges(db)
    assert len(ex) == len(model.requests) == len(TURNS)
    assert [e["response"]["status"] for e in ex] == [200] * len(TURNS)
    for e, req in zip(ex, model.requests, strict=True):
        body = json.loads(e["request"]["request_body"])
        # stored as the model received it, the session id in prompt_cache_key redacted
        assert body["prompt_cache_key"].startswith("REDACTED:")
        assert req["prompt_cache_key"].startswith("session_")
        assert body["messages"] == req["messages"] and body["model"] == req["model"]
        assert [t["function"]["name"] for t in body["tools"]] == \
            [t["function"]["name"] for t in req["tools"]]
        assert len(body["tools"]) > 10
    raw = db.read_bytes()
    assert model.key.encode() not in raw and not KEY_RE.search(raw)
    # the user's config is untouched and the journal landed in the user's data dir
    assert model.key in run.config_path.read_text(encoding="utf-8")
    assert run.config_path.read_text(encoding="utf-8") == kc_leg[6]  # never our copy
    data = run.home / ".kimi-code"
    assert run.journals(), sorted(p.name for p in data.iterdir())
    # what the agent made at the top of its (scratch) data dir was moved to the user's
    assert (data / "session_index.jsonl").is_file(), sorted(p.name for p in data.iterdir())
    # and what it rewrote in place of a link to the user's file was copied over it
    spaces = json.loads((data / "workspaces.json").read_text(encoding="utf-8"))["workspaces"]
    assert spaces.pop("wd_earlier_000000000000") == EARLIER, spaces
    assert [w["root"] for w in spaces.values()] == [str(run.workdir)], spaces
    assert not any(p.is_symlink() for d in (run.home, data) for p in d.iterdir())


def test_kimi_code_llm_calls_have_usage(kc_leg):
    db = kc_leg[2]
    p = subprocess.run([str(BIN / "wire-query"), str(db), "SELECT * FROM llm_calls ORDER BY call",
                        "-f", "ndjson"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    assert len(rows) == len(TURNS)
    assert [r["output"] for r in rows] == [t["usage"][1] for t in TURNS], rows[0]
    assert [r["input_other"] for r in rows] == [t["usage"][0] for t in TURNS], rows[0]
    assert all(r["status"] == 200 and r["time_to_first_token_ms"] is not None for r in rows)


def test_kimi_code_replays_green_from_its_leg_and_red_with_an_agents_md(kc_leg):
    runs = kc_leg[4]
    green = runs["green"]
    assert green.returncode == 0, ([d["message"] for d in json.loads(green.stdout).get("divergences")],
                                   green.stderr[-2000:])
    assert list((kc_leg[5] / "green" / "home").iterdir()) == []  # the user's HOME untouched
    assert "LLM pinned to the recorded model leg: 4 exchange(s)" in green.stdout, green.stdout
    red = runs["agents_md"]
    assert red.returncode == 1, (red.stdout[-4000:], red.stderr[-2000:])
    first = json.loads(red.stdout)["first_divergence"]
    assert first["where"] == "llm call 1" and "system prompt changed at char " in \
        first["message"], first
    assert "AGENTS.md" in first["message"], first  # the work dir listing shows it first


def test_kimi_code_is_recognised_from_its_command(tmp_path):
    """Before it runs: node + Kimi Code's main.mjs, or a `kimi` on PATH that is that script;
    not a `kimi` that is something else (kimi-cli's is a Python entry point)."""
    from wire_recorder.recorder.llm_upstream_kimicode import is_kimi_code

    node, main = need(find_kimicode, "Kimi Code")
    assert is_kimi_code([str(node), str(main), "acp"], {})
    bin_dir, other = tmp_path / "bin", tmp_path / "other"
    bin_dir.mkdir()
    other.mkdir()
    (bin_dir / "kimi").symlink_to(main)
    (other / "kimi").write_text("#!/bin/sh\n", encoding="utf-8")
    (other / "kimi").chmod(0o755)
    assert is_kimi_code(["kimi", "acp"], {"PATH": str(bin_dir)})
    assert not is_kimi_code(["kimi", "acp"], {"PATH": str(other)})
    assert not is_kimi_code([str(node), str(other / "kimi"), "acp"], {})
