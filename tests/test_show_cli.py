"""wire-show on a sample session, as a user runs it."""

from __future__ import annotations

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
