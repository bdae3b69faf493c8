"""One session as `wire-diff` compares it: read from the analysis views (turns, steps,
tool_calls, requests, errors, token_usage) and the model's streamed text, masked, and laid out
by turn, step and order within them."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

import orjson

from wire_recorder.recorder import protocols as registry
from wire_recorder.recorder.redact_stream import piece_of

from .diff_mask import Masker
from .sources import Workspace

# (turn, step): step is None for protocols without steps (ACP, MCP)
Key = tuple[int | None, int | None]


@dataclass
class Trace:
    path: str
    session_id: str
    name: str | None
    protocol: str | None
    exit_code: int | None
    turns: dict[int | None, dict[str, Any]] = field(default_factory=dict)
    steps: dict[Key, dict[str, Any]] = field(default_factory=dict)
    text: dict[Key, dict[str, str]] = field(default_factory=dict)
    tool_calls: dict[Key, list[dict[str, Any]]] = field(default_factory=dict)
    requests: dict[int | None, list[dict[str, Any]]] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"path": self.path, "session_id": self.session_id, "name": self.name,
                "protocol": self.protocol}


def _rows(ws: Workspace, sql: str, params: list | dict) -> list[dict[str, Any]]:
    cur = ws.con.execute(sql, params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _view(ws: Workspace, view: str, sid: str, order: str = "seq") -> list[dict[str, Any]]:
    # live rows only: what a resumed session re-sends as history ran in another session
    return _rows(ws, f"SELECT * FROM {view} WHERE session_id = ? "
                     f"AND NOT coalesce(history, false) ORDER BY {order}", [sid])


def _sql(name: str) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")


def load_trace(ws: Workspace, sid: str, path: str) -> Trace:
    srow = _rows(ws, "SELECT name, protocol, command, cwd, workdir, exit_code FROM sessions "
                     "WHERE session_id = ?", [sid])[0]
    adapter = registry.for_session(srow["protocol"])
    try:
        command = orjson.loads(srow["command"]) if srow["command"] else []
    except orjson.JSONDecodeError:
        command = []
    mask = Masker(adapter, [str(c) for c in command] if isinstance(command, list) else [],
                  srow["cwd"], srow["workdir"])
    t = Trace(path, sid, srow["name"], srow["protocol"], srow["exit_code"])
    for r in _view(ws, "turns", sid):
        t.turns[r["turn"]] = {
            "user_input": mask.value(r["user_input"]), "status": r["status"],
            "stop_reason": r["stop_reason"], "error_code": r["error_code"],
            "error_message": mask.value(r["error_message"]),
            "tokens": _tokens(r), "duration_ms": r["duration_ms"]}
    for r in _view(ws, "steps", sid):
        t.steps[(r["turn"], r["step"])] = {"tokens": _tokens(r), "duration_ms": r["duration_ms"]}
    outputs = _tool_outputs(ws, sid, adapter)
    for r in _view(ws, "tool_calls", sid):
        if r["agent_id"] is not None:
            continue  # a subagent's calls count in its parent's (subagent_tool_calls)
        out = _output_of(outputs, r["tool_call_id"], r["seq"])
        t.tool_calls.setdefault((r["turn"], r["step"]), []).append({
            "tool_name": r["tool_name"], "arguments": mask.json_text(r["arguments"]),
            "status": r["status"], "is_error": r["is_error"],
            "output": mask.json_text(out.get("output")),
            "message": mask.value(r["message"] if out.get("message") is None
                                  else out["message"]),
            "approval": r["approval"], "approval_feedback": mask.value(r["approval_feedback"]),
            "external_outcome": r["external_outcome"],
            "subagent_tool_calls": r["subagent_tool_calls"],
            "duration_ms": r["duration_ms"]})
    for r in _view(ws, "requests", sid):
        answer = r["answer"]
        if isinstance(answer, str):
            answer = mask.json_text(answer)
        t.requests.setdefault(r["turn"], []).append({
            "type": r["type"], "subject": mask.value(r["subject"]), "tool_name": r["tool_name"],
            "outcome": r["outcome"], "answer": _without_ids(answer, adapter),
            "resolved_by": r["resolved_by"], "step": r["step"], "wait_ms": r["wait_ms"]})
    for r in _rows(ws, "SELECT * FROM errors WHERE session_id = ? ORDER BY seq", [sid]):
        t.errors.append({"source": r.get("source"), "code": r.get("code"),
                         "related": r.get("related"), "message": mask.value(r.get("message"))})
    for r in _rows(ws, _sql("diff_text.sql"), {"session": sid}):
        if r["history"]:
            continue
        try:
            piece = piece_of(orjson.loads(r["raw"]))
        except (orjson.JSONDecodeError, TypeError):
            continue
        if piece is None or "/" in piece[0] or piece[0].startswith("tool"):
            continue  # a subagent's text, or a tool call's streamed arguments
        kind = "thinking" if "think" in piece[0] or "thought" in piece[0] else "text"
        parts = t.text.setdefault((r["turn"], r["step"]), {})
        parts[kind] = parts.get(kind, "") + piece[2]
    for key, parts in t.text.items():
        t.text[key] = {k: mask.value(v) for k, v in parts.items()}
    usage = _rows(ws, "SELECT coalesce(sum(input_other), 0) AS input_other, "
                      "coalesce(sum(output), 0) AS output, "
                      "coalesce(sum(input_cache_read), 0) AS input_cache_read, "
                      "coalesce(sum(input_cache_creation), 0) AS input_cache_creation "
                      "FROM token_usage WHERE session_id = ? AND NOT coalesce(history, false)",
                  [sid])[0]
    t.tokens = _tokens(usage)
    return t


TOKEN_FIELDS = ("input_other", "output", "input_cache_read", "input_cache_creation")


def _tokens(r: dict[str, Any]) -> dict[str, int]:
    return {k: int(r.get(k) or 0) for k in TOKEN_FIELDS}


def _without_ids(answer: Any, adapter) -> Any:
    """An answer without the ids that echo its request's (fresh on every run)."""
    if isinstance(answer, dict):
        return {k: v for k, v in answer.items() if k not in adapter.answer_id_fields}
    return answer


def _tool_outputs(ws: Workspace, sid: str, adapter) -> dict[str | None, list[dict[str, Any]]]:
    """What each tool call returned, by its id (the adapters' `tool_outputs.sql`)."""
    out: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    sql = adapter.sql_fragment("tool_outputs")
    if not sql:
        return out
    for r in _rows(ws, f"SELECT * FROM ({sql}) WHERE session_id = ? ORDER BY seq", [sid]):
        out[r["tool_call_id"]].append(r)
    return out


def _output_of(outputs: dict[str | None, list[dict[str, Any]]], call_id: str | None,
               seq: int | None) -> dict[str, Any]:
    for r in outputs.get(call_id, ()):
        if seq is None or r["seq"] >= seq:
            return r
    return {}
