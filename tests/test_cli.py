"""Every console script has the same outside (recorder.edge): --help, --version, one-line errors
with the exit code of their kind, quiet ends on a closed pipe and on Ctrl-C."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from wire_recorder.recorder import __version__, errors
from wire_recorder.recorder.edge import entry

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]
SAMPLE = str(ROOT / "sample_sessions" / "approve_shell.jsonl")

COMMANDS = ["wire-proxy", "wire-replay", "wire-show", "wire-stats", "wire-query", "wire-import",
            "wire-export", "wire-check", "wire-redact", "wire-ui"]

# a file that is not there, as each command takes it
MISSING = {
    "wire-proxy": ["recover", "{missing}.db"],
    "wire-replay": ["{missing}.db", "--", "true"],
    "wire-show": ["{missing}.db"],
    "wire-stats": ["{missing}.db"],
    "wire-query": ["{missing}.db", "select 1"],
    "wire-import": ["{missing}.jsonl", "--db", "{missing}.db"],
    "wire-export": ["{missing}.db"],
    "wire-check": ["{missing}.db"],
    "wire-redact": ["{missing}.db"],
}


def run(cmd: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / cmd), *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def one_line(res: subprocess.CompletedProcess, cmd: str) -> str:
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{cmd}: "), res.stderr
    return lines[0]


def test_every_console_script_is_here():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert sorted(scripts) == sorted(COMMANDS)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help(cmd):
    res = run(cmd, "--help")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert "--version" in res.stdout and "Traceback" not in res.stdout


@pytest.mark.parametrize("cmd", COMMANDS)
def test_version(cmd):
    res = run(cmd, "--version")
    assert res.returncode == 0 and res.stdout == f"{cmd} {__version__}\n", res.stdout + res.stderr


@pytest.mark.parametrize("cmd", COMMANDS)
def test_bad_option_is_one_line_and_exit_2(cmd):
    res = run(cmd, "--no-such-option", SAMPLE)
    line = one_line(res, cmd)
    assert res.returncode == 2 and "--no-such-option" in line and res.stdout == "", line


@pytest.mark.parametrize("cmd", list(MISSING))  # wire-ui shows a missing file in its page
def test_missing_file_is_one_line_and_exit_2(cmd, tmp_path):
    missing = str(tmp_path / "nope")
    res = run(cmd, *(a.format(missing=missing) for a in MISSING[cmd]))
    line = one_line(res, cmd)
    assert res.returncode == errors.NotARecording.exit_code == 2, line
    assert missing in line and re.search(r"no such (file|recording)|no files match", line), line


@pytest.mark.parametrize("cmd, args", [
    ("wire-query", ["--format", "xml", SAMPLE, "select 1"]),
    ("wire-stats", ["--format", "csv", SAMPLE]),
    ("wire-export", ["--format", "xml", SAMPLE]),
    ("wire-replay", ["--on-unmatched", "maybe", SAMPLE, "--", "true"]),
    ("wire-proxy", ["--protocol", "smtp", "--", "true"]),
])
def test_a_value_outside_its_set_names_the_set(cmd, args):
    res = run(cmd, *args)
    line = one_line(res, cmd)
    assert res.returncode == 2, line
    assert re.search(r"one of", line), line


def test_agent_that_cannot_start():
    # wire-proxy stands in for the agent: 127, as a shell says; wire-replay is a test run whose
    # set-up failed: 2, like an agent that dies before answering
    for cmd, args, code in [("wire-proxy", ["-q", "--no-record", "--", "no-such-agent-xyz"],
                             errors.AgentStartError.exit_code),
                            ("wire-replay", [SAMPLE, "--", "no-such-agent-xyz"], 2)]:
        res = run(cmd, *args)
        line = one_line(res, cmd)
        assert res.returncode == code, line
        assert "no-such-agent-xyz" in line
    assert errors.AgentStartError.exit_code == 127


def test_the_documented_table_has_every_kind():
    doc = errors.__doc__ or ""
    kinds: list[type[errors.UserError]] = [
        c for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, errors.UserError) and c is not errors.UserError]
    for kind in kinds:
        assert f"`{kind.__name__}`" in doc, kind
        assert re.search(rf"\| {kind.exit_code} \|", doc), kind
    assert "| 130 |" in doc and "| 1 |" in doc


# -- the edge in-process: one wrapper for typer apps and for wire-proxy's own parser -----------

def _typer_app(body):
    app = typer.Typer(add_completion=False)

    @app.command()
    def cmd(name: str = typer.Argument("x")) -> int:
        return body(name)

    return app


@pytest.mark.parametrize("kind", ["typer", "plain"])
def test_edge_ctrl_c_is_130_quietly(kind, capfd):
    def body(_):
        raise KeyboardInterrupt

    main = entry(_typer_app(body) if kind == "typer" else body, "wire-t")
    assert main([]) == 130
    out, err = capfd.readouterr()
    assert out == "" and err == ""


@pytest.mark.parametrize("kind", ["typer", "plain"])
def test_edge_user_error_is_one_line_and_its_code(kind, capfd):
    def body(_):
        raise errors.AgentStartError("cannot start 'x'", "is it installed?")

    main = entry(_typer_app(body) if kind == "typer" else body, "wire-t")
    assert main([]) == 127
    assert capfd.readouterr().err == "wire-t: cannot start 'x' (is it installed?)\n"


def test_edge_returns_the_command_exit_code():
    assert entry(_typer_app(lambda name: 1), "wire-t")(["a"]) == 1
    assert entry(lambda argv: 3, "wire-t")([]) == 3


@pytest.mark.parametrize("cmd", [["wire-query", SAMPLE, "select * from frames", "-f", "json"],
                                 ["wire-export", SAMPLE, "--format", "jsonl"]])
def test_closed_pipe_is_exit_0_quietly(cmd):
    shell = " ".join(f"'{a}'" for a in [str(BIN / cmd[0]), *cmd[1:]])
    res = subprocess.run(["bash", "-c", f"set -o pipefail; {shell} </dev/null | head -c 1 "
                                        ">/dev/null"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stderr == "", res.stderr
