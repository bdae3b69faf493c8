"""List differences in replay reports: a `tools/list` answer with a tool more than the recording
names the added tool (and a changed one by name), instead of both lists cut at the same prefix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.harness.mcp import DEMO_SERVER
from wire_recorder.replay.labels import field_diff

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _without_last_tool(src: Path, dst: Path) -> tuple[str, str]:
    """The transcript with the recorded tools/list answer missing its last tool and the first
    tool's description changed: (removed tool's name, first tool's name)."""
    lines = src.read_text(encoding="utf-8").splitlines()
    out, dropped, first = [], None, None
    for line in lines:
        rec = json.loads(line)
        result = rec.get("frame", {}).get("result") if rec.get("dir") == "a2c" else None
        if isinstance(result, dict) and isinstance(result.get("tools"), list) and dropped is None:
            dropped = result["tools"].pop()["name"]
            first = result["tools"][0]["name"]
            result["tools"][0]["description"] = "an older description"
            line = json.dumps(rec, separators=(",", ":"))
        out.append(line)
    assert dropped and first
    dst.write_text("\n".join(out) + "\n", encoding="utf-8")
    return dropped, first


def test_tools_list_report_names_the_added_tool(tmp_path, mcp_peers):
    rec = tmp_path / "fewer_tools.jsonl"
    added, changed = _without_last_tool(ROOT / "sample_sessions" / "mcp_demo_2025.jsonl", rec)
    server = [str(ROOT / ".peers" / "mcp1" / "bin" / "python"), str(DEMO_SERVER)]
    proc = subprocess.run([str(BIN / "wire-replay"), str(rec), "--", *server],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = proc.stdout
    # the count, the added tool by name with its (start of) value, the changed one by name
    assert "tools: 3 → 4 items (1 added, 0 removed)" in text, text
    assert f'tools[{added}]: (absent) → {{"name":"{added}"' in text, text
    assert f"tools[{changed}].description: an older description → " in text, text


def test_list_diff_shows_what_was_removed_and_added_past_a_common_prefix():
    prefix = [f"cmd-{i:02d}-with-a-long-name-that-fills-the-line" for i in range(6)]
    old = {"slash_commands": [{"name": n, "aliases": []} for n in prefix + ["gone"]]}
    new = {"slash_commands": [{"name": n, "aliases": []} for n in prefix + ["new1", "new2"]]}
    lines = field_diff(old, new)
    assert lines == [
        "slash_commands: 7 → 8 items (2 added, 1 removed)",
        'slash_commands[gone]: {"name":"gone","aliases":[]} → (absent)',
        'slash_commands[new1]: (absent) → {"name":"new1","aliases":[]}',
        'slash_commands[new2]: (absent) → {"name":"new2","aliases":[]}',
    ]
    assert field_diff([1, 2, 3], [1, 3]) == ["(frame): 3 → 2 items (0 added, 1 removed)",
                                            "[1]: 2 → (absent)"]
