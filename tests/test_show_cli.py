"""wire-show on a sample session, as a user runs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
SAMPLES = Path(__file__).resolve().parents[1] / "sample_sessions"


def test_streamed_tool_call_arguments_are_shown_whole(tmp_path):
    db = str(tmp_path / "ms.db")
    subprocess.run([BIN / "wire-import", SAMPLES / "multi_step.jsonl", "--db", db, "-q"], check=True)
    res = subprocess.run([BIN / "wire-show", db], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    # call-2's arguments arrive as a ToolCall plus ToolCallParts in the recording
    assert any("call-2" in line and '{"command": "echo step two"}' in line
               for line in res.stdout.splitlines()), res.stdout


def test_unknown_option_is_one_line():
    res = subprocess.run([BIN / "wire-show", "--bogus"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == ["wire-show: No such option: --bogus (see wire-show --help)"]


@pytest.mark.parametrize("cmd", [["wire-query", "{s}", "select * from frames", "--format", "csv"],
                                 ["wire-query", "{s}", "select * from frames"],
                                 ["wire-stats", "{s}"], ["wire-show", "{s}"]])
def test_output_cut_short_by_the_reader_is_no_error(cmd):
    """`wire-query ... | head -1`: the reader goes away; the command ends quietly, exit 0."""
    sample = str(SAMPLES / "acp_tools.jsonl")
    shell = " ".join(f"'{a.format(s=sample)}'" for a in [str(BIN / cmd[0]), *cmd[1:]])
    res = subprocess.run(["bash", "-c", f"set -o pipefail; {shell} | head -c 10 >/dev/null"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stderr == "", res.stderr


def _prompt_turn(text: str, pid: str = "1") -> list[tuple[str, object]]:
    def ev(t, payload):
        return {"jsonrpc": "2.0", "method": "event", "params": {"type": t, "payload": payload}}

    return [("c2a", {"jsonrpc": "2.0", "method": "prompt", "id": pid, "params": {"user_input": text}}),
            ("a2c", ev("TurnBegin", {"user_input": text})),
            ("a2c", ev("StepBegin", {"n": 1})),
            ("a2c", ev("StatusUpdate", {"token_usage": {"input_other": 10, "output": 2,
                                                         "input_cache_read": 30,
                                                         "input_cache_creation": 0}})),
            ("a2c", ev("TurnEnd", {})),
            ("a2c", {"jsonrpc": "2.0", "id": pid, "result": {"status": "finished"}})]


def test_sessions_by_name_and_cli_manners(tmp_path, capfd):
    """--session takes a name, an id or a unique prefix (candidates listed when ambiguous),
    names show in titles, tables and views; wire-query's line, ndjson and narrow-table output;
    wire-export writes every session of a file in one call."""
    import json

    from tests.test_analysis_protocols import write_sessions
    from wire_recorder.analysis.cli import export_main, query_main, show_main, stats_main

    db = str(tmp_path / "named.db")
    ids = ["20261124T1-aaaa", "20261124T2-bbbb", "20261124T3-cccc"]
    write_sessions(db, [(sid, "wire", _prompt_turn(f"hello {sid}")) for sid in ids],
                   names={ids[0]: "alpha", ids[1]: "alpine"})

    def run(main, *args):
        code = main(list(args))
        out, err = capfd.readouterr()
        return code, out, err

    code, out, err = run(stats_main, db, "--session", "alpha", "-f", "json")
    assert code == 0, err
    overview = json.loads(out)["overview"]
    assert overview["session_names"] == [f"alpha ({ids[0]})"] and overview["turns"] == 1
    code, out, err = run(stats_main, db, "-s", "alp")
    assert code == 2 and "2 sessions matching 'alp'" in err and f"alpine ({ids[1]})" in err, err
    code, out, err = run(show_main, db, "-s", "20261124T3")
    assert code == 0 and f"session {ids[2]}" in out.splitlines()[0], out
    code, out, err = run(show_main, db, "-s", "alpine")
    assert code == 0 and f"session alpine ({ids[1]})" in out.splitlines()[0], out
    code, out, err = run(stats_main, db)
    assert f"3 sessions (alpha ({ids[0]})" in out and "alpine" in out, out
    code, out, err = run(query_main, db, "select name, turn, total_tokens from turns order by seq, "
                         "session_id", "-f", "ndjson")
    assert [json.loads(line) for line in out.splitlines()] == [
        {"name": n, "turn": 1, "total_tokens": 42} for n in ("alpha", "alpine", None)]
    code, out, err = run(query_main, db, f"select * from sessions where session_id = '{ids[0]}'",
                         "-f", "line")
    assert code == 0 and "name = alpha" in [line.strip() for line in out.splitlines()], out
    code, out, err = run(query_main, db, "select * from turns", "--max-width", "70")
    lines = out.splitlines()
    assert re.fullmatch(r"3 rows, 31 columns \(\d+ shown\); .*", lines[-1]), out
    assert max(map(len, lines[:-1])) <= 70 and "…" in lines[1], out
    code, out, err = run(export_main, db, "-o", str(tmp_path / "all") + "/")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == \
        ["20261124T3-cccc.jsonl", "alpha.jsonl", "alpine.jsonl"]
    code, out, err = run(export_main, db, "-o", str(tmp_path / "one.jsonl"))
    assert code == 2 and "3 sessions to export" in err


def test_every_analysis_help_has_examples_and_completion():
    for cmd in ("wire-query", "wire-stats", "wire-show", "wire-import", "wire-export",
                "wire-check", "wire-redact"):
        res = subprocess.run([BIN / cmd, "--help"], capture_output=True, text=True, timeout=60,
                             env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"})
        assert "Examples" in res.stdout and f"  {cmd} " in res.stdout, cmd
        assert "--install-completion" in res.stdout and "--version" in res.stdout, cmd
    res = subprocess.run([BIN / "wire-query", "--help"], capture_output=True, text=True,
                         timeout=60)
    for view in ("turns", "steps", "token_usage", "tool_calls", "requests", "errors", "anomalies"):
        assert f"  {view}: one row per" in res.stdout, view
    # bash completion through the one CLI edge
    res = subprocess.run([BIN / "wire-query"], capture_output=True, text=True, timeout=60,
                         env={"_WIRE_QUERY_COMPLETE": "complete_bash", "COMP_CWORD": "2",
                              "COMP_WORDS": "wire-query --format ", "PATH": "/usr/bin:/bin"})
    assert res.stdout.split() == ["table", "line", "csv", "json", "ndjson", "markdown"]
