"""A tiny project outside the repository, with wire-recorder installed from the wheel (not
editable), tests its own Wire client with the plugin: the first run records the client's session
against the real `kimi --wire` (configured in HOME, as a user's kimi is), the second replays it
with `wire-replay --serve` with no kimi on PATH, the third fails because the client answers
differently. The venv is the one tests/test_install.py uses (built once per run)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from sample_sessions.scenarios import SCENARIOS
from tests.harness.install import clean_env, tool_dir, wheel_venv
from tests.harness.kimi_peer import CONFIG_TOML

DATA = Path(__file__).parent / "data"

PROJECT_TEST = """\
import os

import tiny_wire_client


def test_echo_hello(wire_agent):
    said = tiny_wire_client.run(wire_agent, os.environ.get("TINY_ANSWER", "approve"))
    assert "hello" in said
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    return wheel_venv(tmp_path_factory.getbasetemp() / "wheel")


def test_a_project_records_its_client_then_replays_it_without_kimi(venv, kimi_exe, tmp_path):
    proj = tmp_path / "proj"
    (proj / "tests").mkdir(parents=True)
    shutil.copy(DATA / "tiny_wire_client.py", proj)
    (proj / "tests" / "test_tiny.py").write_text(PROJECT_TEST)
    (proj / "pytest.ini").write_text("[pytest]\npythonpath = .\nwire_agent_command = kimi --wire\n")
    # the user's kimi, configured in HOME; here with its offline scripted LLM
    home = tmp_path / "home"
    (home / ".kimi").mkdir(parents=True)
    (home / ".kimi" / "config.toml").write_text(CONFIG_TOML.format(max_context_size=100000))
    scripts = tmp_path / "scripts.json"
    scripts.write_text(json.dumps(list(SCENARIOS["approve_shell"].scripts)))
    base = {k: v for k, v in clean_env().items() if not k.startswith("KIMI_")}
    system_path = base["PATH"]
    assert shutil.which("kimi", path=system_path) is None
    with_kimi = f"{tool_dir(tmp_path / 'tools', kimi=kimi_exe)}:{system_path}"
    cassette = proj / "tests" / "cassettes" / "test_tiny" / "test_echo_hello.jsonl"

    def pytest_run(*args: str, path: str, **env: str) -> tuple[int, str]:
        p = subprocess.run([str(venv / "python"), "-m", "pytest", "-p", "no:cacheprovider", *args],
                           cwd=proj, capture_output=True, text=True, timeout=300,
                           env={**base, "PATH": path, "HOME": str(home),
                                "KIMI_SCRIPTED_ECHO_SCRIPTS": str(scripts), **env})
        return p.returncode, p.stdout + p.stderr

    code, out = pytest_run("--wire-record-mode=once", path=with_kimi)
    assert code == 0, out[-4000:]
    assert "recorded tests/cassettes/test_tiny/test_echo_hello.jsonl" in out
    lines = [json.loads(ln) for ln in cassette.read_text().splitlines()]
    assert lines[0]["session"]["command"] == ["kimi", "--wire"]
    said = [ln["frame"]["params"]["payload"].get("text") for ln in lines
            if ln.get("dir") == "a2c" and "ContentPart" in json.dumps(ln)]
    assert "The command printed hello." in said  # kimi's own answer, through wire-proxy

    # kimi is gone: the cassette stands in for it
    code, out = pytest_run(path=system_path)
    assert code == 0, out[-4000:]
    assert "1 passed" in out

    code, out = pytest_run(path=system_path, TINY_ANSWER="reject")
    assert code == 1, out[-4000:]
    assert "1 failed" in out and "behaved differently from the recorded client" in out
    assert "with 'reject', recorded 'approve'" in out
