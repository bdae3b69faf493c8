"""The walls of the house, checked on the tree as it is (parsed with `ast`, nothing imported):

* recorder/ is the ground floor: it imports nothing from replay/ or analysis/;
* replay/ and analysis/ stand on recorder/ and not on each other;
* what is protocol-specific lives in that protocol's adapter package
  (recorder/protocols/<protocol>/): its method and type names appear in no other product code;
* the analysis SQL lives in .sql files, not in Python strings.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLOORS = {"recorder": "wire_recorder.recorder", "replay": "wire_recorder.replay",
          "analysis": "wire_recorder.analysis"}


def modules(top: str) -> Iterator[tuple[str, str, ast.Module]]:
    """(path relative to the root, dotted module name, syntax tree) of every module in a floor."""
    for path in sorted((ROOT / top).rglob("*.py")):
        rel = path.relative_to(ROOT)
        parts = list(rel.with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join([FLOORS[top]] + parts[1:])
        tree = ast.parse(path.read_text(encoding="utf-8"), str(rel))
        tree.is_package = is_package  # type: ignore[attr-defined]
        yield rel.as_posix(), name, tree


def imported(name: str, tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import, relative ones resolved; `from X import Y`
    also counts as importing X.Y (it may be a module)."""
    package = name if tree.is_package else name.rpartition(".")[0]  # type: ignore[attr-defined]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield node.lineno, mod
            for alias in node.names:
                yield node.lineno, f"{mod}.{alias.name}"
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            fn = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            if fn in ("import_module", "__import__") and node.args and \
                    isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value


def reaches(mod: str, floor: str) -> bool:
    """True when `mod` is (inside) a floor, by its installed name or the bare old one."""
    return any(mod == n or mod.startswith(n + ".") for n in (FLOORS[floor], floor))


@pytest.mark.parametrize("floor, forbidden", [
    ("recorder", ("replay", "analysis")),
    ("replay", ("analysis",)),
    ("analysis", ("replay",)),
])
def test_floors_import_only_what_they_stand_on(floor, forbidden):
    found = [f"{rel}:{line} imports {mod}"
             for rel, name, tree in modules(floor)
             for line, mod in imported(name, tree)
             if any(reaches(mod, f) for f in forbidden)]
    assert found == []


def test_the_walls_check_sees_relative_imports():
    tree = ast.parse("from ...replay import driver\nfrom ... import analysis\n")
    tree.is_package = False  # type: ignore[attr-defined]
    mods = [m for _, m in imported("wire_recorder.recorder.protocols.x", tree)]
    assert "wire_recorder.replay" in mods and "wire_recorder.analysis" in mods


# Names that only one protocol has: a method or type of its own, as code would spell it in a
# string. Names two protocols share (initialize, elicitation/create) are left out.
PROTOCOL_NAMES = {
    "wire": ["ApprovalRequest", "ToolCallRequest", "QuestionRequest", "HookRequest", "TurnBegin",
             "StepBegin", "ContentPart", "ToolCallPart", "ToolResult", "StatusUpdate",
             "SubagentEvent", "set_plan_mode"],
    "acp": ["session/prompt", "session/update", "session/request_permission", "session/load",
            "session/new", "fs/read_text_file", "fs/write_text_file", "terminal/create",
            "agent_message_chunk", "tool_call_update", "stopReason", "toolCallId"],
    "mcp": ["tools/call", "tools/list", "server/discover", "sampling/createMessage",
            "notifications/progress", "notifications/cancelled", "inputResponses",
            "requestState", "roots/list", "input_required", "structuredContent"],
}
# Product strings that name a protocol's things to explain, not to act: (file, name) -> why.
EXPLAINED = {
    ("recorder/model.py", "TurnBegin"): "the msg_type column's documentation gives examples",
    ("recorder/model.py", "ApprovalRequest"): "the msg_type column's documentation",
    ("recorder/model.py", "agent_message_chunk"): "the msg_type column's documentation",
    ("replay/cli.py", "session/load"): "--origin's help says which request needs it",
    ("analysis/stats.py", "input_required"): "a label of wire-stats' per-protocol line",
    ("recorder/kimicode_journal.py", "toolCallId"): "Kimi Code's journal's own key, not ACP's",
}


def strings(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, text) of string constants that are not docstrings (bare string statements);
    comments are not in the tree."""
    bare = {id(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare:
            yield node.lineno, node.value


@pytest.mark.parametrize("protocol", sorted(PROTOCOL_NAMES))
def test_protocol_names_live_in_their_adapter_package(protocol):
    home = f"recorder/protocols/{protocol}/"
    found = set()
    for floor in FLOORS:
        for rel, _, tree in modules(floor):
            if rel.startswith(home):
                continue
            for line, text in strings(tree):
                for n in PROTOCOL_NAMES[protocol]:
                    if n in text and (rel, n) not in EXPLAINED:
                        found.add(f"{rel}:{line} {n}")
    assert sorted(found) == []


def test_each_protocol_name_is_used_by_its_adapter():
    """The list above is honest: every name is one its adapter package does use."""
    for protocol, names in PROTOCOL_NAMES.items():
        text = "".join(p.read_text(encoding="utf-8")
                       for p in (ROOT / "recorder" / "protocols" / protocol).rglob("*.py"))
        assert [n for n in names if n not in text] == [], protocol


DEFINES_SQL = re.compile(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?(?:VIEW|MACRO)"
                         r"\s+(\w+)", re.I)
# views made from Python on purpose: the union of a workspace's input files, and the one
# session a stored summary is computed over
WORKSPACE_VIEWS = {("analysis/sources.py", "frames"), ("analysis/sources.py", "sessions"),
                   ("analysis/summary.py", "frames"), ("analysis/summary.py", "sessions")}


def test_the_analysis_sql_is_not_in_python_strings():
    found = []
    for floor in FLOORS:
        for rel, _, tree in modules(floor):
            for node in ast.walk(tree):
                if isinstance(node, ast.JoinedStr):
                    text = "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    text = node.value
                else:
                    continue
                found += [f"{rel}:{node.lineno} defines {m}" for m in DEFINES_SQL.findall(text)
                          if (rel, m) not in WORKSPACE_VIEWS]
    assert found == []
