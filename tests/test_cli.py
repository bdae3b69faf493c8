"""Every console script has the same outside (recorder.edge): --help, --version, one-line errors
with the exit code of their kind, quiet ends on a closed pipe and on Ctrl-C."""

from __future__ import annotations

import os
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
            "wire-export", "wire-check", "wire-redact", "wire-ui", "wire-diff"]

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
    "wire-diff": ["{missing}.db", SAMPLE],
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
    """One help style: a summary, Examples naming the command, the options with --version and
    shell completion; and the completion the shell script asks for answers with the options."""
    res = run(cmd, "--help")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert "--version" in res.stdout and "Traceback" not in res.stdout
    examples = res.stdout.split("Examples", 1)[-1]
    assert "Examples" in res.stdout and f"  {cmd} " in examples, res.stdout
    assert "--show-completion" in res.stdout and "--install-completion" in res.stdout
    var = "_{}_COMPLETE".format(cmd.replace("-", "_").upper())
    asked = subprocess.run([str(BIN / cmd)], capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL,
                           env={**os.environ, var: "complete_bash", "COMP_WORDS": f"{cmd} --",
                                "COMP_CWORD": "1"})
    assert asked.returncode == 0, asked.stderr
    assert {"--version", "--help"} <= set(asked.stdout.split()), asked.stdout


def test_wire_proxy_completion_without_typer_on_the_relay_path():
    script = run("wire-proxy", "--show-completion", "bash")
    assert script.returncode == 0 and "_WIRE_PROXY_COMPLETE=complete_bash" in script.stdout
    assert "#compdef wire-proxy" in run("wire-proxy", "--show-completion=zsh").stdout
    bad = run("wire-proxy", "--show-completion=tcsh")
    assert bad.returncode == 2 and "bash" in one_line(bad, "wire-proxy")
    asked = subprocess.run([str(BIN / "wire-proxy")], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "_WIRE_PROXY_COMPLETE": "complete_bash",
                                "COMP_WORDS": "wire-proxy --db x.db --protocol ",
                                "COMP_CWORD": "4"})
    assert asked.stdout.split() == ["wire", "acp", "mcp"], asked.stdout + asked.stderr
    # the options are parsed without typer, click or rich (the agent is spawned right after)
    probe = ("import sys; from wire_recorder.recorder.proxy_cli import parse_args; "
             "parse_args(['-q', '--db', 'x.db', '--tag', 'a=b', '--', 'true']); "
             "print(sorted(m for m in ('typer', 'click', 'rich') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert res.stdout == "[]\n", res.stdout + res.stderr


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


# -- wire-replay's live progress line: on a terminal only -------------------------------------

def _replay(kimi: Path, tmp: Path, tty: bool) -> tuple[int, str, str]:
    """A real replay of the sample; stderr on a pseudo-terminal or a pipe. The progress line's
    2 s threshold is set to 0 so that no timing is involved."""
    import pty

    home, work = tmp / "home", tmp / "work"
    home.mkdir()
    work.mkdir()
    env = {**os.environ, "HOME": str(home), "WIRE_REPLAY_PROGRESS_AFTER": "0"}
    argv = [str(BIN / "wire-replay"), SAMPLE, "--", str(kimi), "--wire"]
    if not tty:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env,
                             cwd=work, stdin=subprocess.DEVNULL)
        return res.returncode, res.stdout, res.stderr
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL,
                             env=env, cwd=work)
        os.close(slave)
        chunks = []
        while True:  # until the child's end closes the terminal
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: no process holds the terminal any more
                break
            if not data:
                break
            chunks.append(data)
        out = p.stdout.read().decode() if p.stdout else ""
        code = p.wait(timeout=300)
    finally:
        os.close(master)
    return code, out, b"".join(chunks).decode(errors="replace")


def test_replay_progress_on_a_terminal_only(kimi_exe, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    (tmp_path / "tty").mkdir()
    (tmp_path / "pipe").mkdir()
    with ThreadPoolExecutor(2) as pool:
        on_tty = pool.submit(_replay, kimi_exe, tmp_path / "tty", True)
        piped = pool.submit(_replay, kimi_exe, tmp_path / "pipe", False)
        (code, out, term), (pcode, pout, perr) = on_tty.result(), piped.result()
    assert code == 0 and pcode == 0, term + perr
    line = re.compile(r"wire-replay: turn \d+/\d+ · sent \d+/\d+ · received \d+ frames?")
    assert line.search(term), term
    assert term.rstrip("\n").endswith("\r\x1b[K"), repr(term[-200:])  # wiped before the report
    assert line.search(out) is None and "\x1b[K" not in out  # the report on stdout is clean
    assert "sent " not in perr and "\x1b" not in perr, perr  # a pipe gets no progress
    assert pout.splitlines()[0] == out.splitlines()[0]  # the same verdict either way
