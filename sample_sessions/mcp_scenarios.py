"""The named MCP sessions over stdio between the official SDKs, in both protocol eras: which
client and server, the calls, and what each run must show. The machinery that runs and checks
them is in tests/harness/mcp.py.

    from sample_sessions.mcp_scenarios import MCP_SCENARIOS
    from tests.harness.mcp import check_mcp_scenario, run_mcp_scenario
    result = run_mcp_scenario(MCP_SCENARIOS["mcp_demo_2026"])                      # server directly
    assert check_mcp_scenario(sc, result) == []
"""

from __future__ import annotations

import os
import subprocess

from tests.harness.mcp import (
    HANDSHAKE,
    INPUT_METHODS,
    MODERN,
    Call,
    McpRun,
    McpScenario,
    demo_server,
)
from tests.harness.peers import peer_bin

# git identity and dates for the scratch repository: fixed, so commit hashes are too
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Demo Author",
    "GIT_AUTHOR_EMAIL": "demo@example.invalid",
    "GIT_COMMITTER_NAME": "Demo Author",
    "GIT_COMMITTER_EMAIL": "demo@example.invalid",
    "GIT_AUTHOR_DATE": "2024-01-02T03:04:05+00:00",
    "GIT_COMMITTER_DATE": "2024-01-02T03:04:05+00:00",
    "GIT_CONFIG_NOSYSTEM": "1",
}


DEMO_CALLS = [
    Call("add", {"a": 2, "b": 3}, ["2 + 3 = 5"]),
    Call("ask_llm", {"question": "What is 6 x 7?"}, ["llm said: 42 (model test-model)"]),
    Call("client_roots", {}, ["roots: {work_uri} (demo-root)"]),
    Call("confirm", {"action": "deploy"}, ["confirmed deploy: True (ok)"]),
]
DEMO_TOOLS = ("add", "ask_llm", "client_roots", "confirm")
DEMO_CALLBACKS = {"sampling": 1, "roots": 1, "elicitation": 1, "progress": 1}


def _demo(name: str, description: str, client: str, era: str, server_venv: str, expect_era: str,
          version: str) -> McpScenario:
    return McpScenario(
        name, description, client, era, demo_server(server_venv), DEMO_CALLS, expect_era, version,
        expect_tools=DEMO_TOOLS, expect_callbacks=DEMO_CALLBACKS, expect_input_methods=INPUT_METHODS,
        expect_progress=True,
    )


def make_git_repo(run: McpRun) -> None:
    """A repo with one commit (fixed identity and dates), a modified and an untracked file."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(run.home), **GIT_ENV}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=run.repo, env=env, check=True, capture_output=True)

    run.repo.mkdir()
    git("init", "-q", "-b", "main")
    (run.repo / "hello.txt").write_text("hello\n")
    git("add", "hello.txt")
    git("commit", "-q", "-m", "first commit")
    (run.repo / "hello.txt").write_text("hello\nworld\n")
    (run.repo / "notes.txt").write_text("untracked\n")


MCP_SCENARIOS: dict[str, McpScenario] = {
    s.name: s
    for s in [
        _demo("mcp_demo_2026",
              "mcp 2.3 client (auto) <-> mcp 2.3 demo server: 2026-07-28, server/discover, "
              "input_required + requestState, retries with inputResponses",
              "mcp2", "2026", "mcp2", "2026", MODERN),
        _demo("mcp_demo_2025",
              "mcp 1.30 client <-> mcp 1.30 demo server: initialize handshake, server->client "
              "sampling/createMessage, roots/list, elicitation/create",
              "mcp1", "2025", "mcp1", "2025", HANDSHAKE),
        _demo("mcp_demo_2025_v2",
              "mcp 2.3 client (legacy) <-> mcp 2.3 demo server: the handshake era from the 2.x SDK",
              "mcp2", "2025", "mcp2", "2025", HANDSHAKE),
        _demo("mcp_fallback",
              "mcp 2.3 client (auto) <-> mcp 1.30 demo server: server/discover is answered with an "
              "error, the client falls back to initialize",
              "mcp2", "2026", "mcp1", "fallback", HANDSHAKE),
        McpScenario(
            "mcp_cancel",
            "mcp 2.3 client (auto) <-> mcp 2.3 demo server: a slow tools/call given up at its "
            "first progress (notifications/cancelled, never answered), then another call",
            "mcp2", "2026", demo_server("mcp2", "--with-wait"),
            [Call("wait", {"seconds": 30}, cancel=True), Call("add", {"a": 1, "b": 2}, ["1 + 2 = 3"])],
            "2026", MODERN, expect_tools=("wait", "add"), expect_callbacks={"progress": 2},
            expect_progress=True,
        ),
        McpScenario(
            "mcp_time",
            "mcp 2.3 client (auto) <-> mcp-server-time: convert_time (fixed time, today's date), "
            "and an unknown timezone (an isError result)",
            "mcp2", "2026",
            lambda run: [str(peer_bin("mcp2", "mcp-server-time")), "--local-timezone", "UTC"],
            [
                Call("convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
                     ["T12:00:00+00:00", "T21:00:00+09:00", '"time_difference": "+9.0h"']),
                Call("convert_time", {"source_timezone": "Mars/Olympus_Mons", "time": "12:00",
                                      "target_timezone": "UTC"},
                     ["Invalid timezone"], error=True),
            ],
            "2026", MODERN, expect_tools=("convert_time", "get_current_time"),
        ),
        McpScenario(
            "mcp_git",
            "mcp 2.3 client (auto) <-> mcp-server-git on a scratch repo: git_status, git_log",
            "mcp2", "2026",
            lambda run: [str(peer_bin("mcp2", "mcp-server-git")), "--repository", str(run.repo)],
            [
                Call("git_status", lambda run: {"repo_path": str(run.repo)},
                     ["On branch main", "modified:   hello.txt", "notes.txt"]),
                Call("git_log", lambda run: {"repo_path": str(run.repo), "max_count": 5},
                     ["Message: first commit", "Date: 2024-01-02 03:04:05+00:00", "Author: Demo Author"]),
            ],
            "2026", MODERN, expect_tools=("git_status", "git_log", "git_diff"), setup=make_git_repo,
        ),
    ]
}


