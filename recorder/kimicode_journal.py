"""Kimi Code's own session journal (`wire.jsonl`, record format "1.5"): reading it.

Kimi Code 2.x writes `~/.kimi-code/sessions/wd_<dir>_<hash>/session_<uuid>/agents/<agent>/
wire.jsonl`, one journal per agent (`main`, and `agent-0`, ... for its subagents): a metadata
line `{"type": "metadata", "protocol_version": "1.5", "created_at": <ms>}`, then flat records
`{"type", "agentId", ..., "time": <ms>}`. It holds every model answer of the session, step by
step: `model_answers` gives them back (for a pinned model), `analysis.import_kimicode` makes a
Wire session of it (through recorder/protocols/wire/kimicode.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import orjson

from .errors import TranscriptError

MAIN_AGENT = "main"
# the journal's own key for a tool call's id (ACP happens to spell its field the same way)
TOOL_CALL_ID = "toolCallId"


def is_journal(path: str) -> bool:
    """A Kimi Code journal: a metadata line, then records with `time` (kimi-cli's have
    `timestamp` and `message`)."""
    try:
        with open(path, "rb") as f:
            head = [f.readline(1 << 20) for _ in range(2)]
    except OSError:
        return False
    try:
        first, second = (orjson.loads(x) if x.strip() else None for x in head)
    except orjson.JSONDecodeError:
        return False
    if not (isinstance(first, dict) and first.get("type") == "metadata"):
        return False
    if second is None:
        return "created_at" in first  # an empty journal: kimi-cli's metadata has no created_at
    return isinstance(second, dict) and "time" in second and "message" not in second


def agent_of(path: str) -> tuple[str | None, str | None]:
    """(session folder, agent id) of `<session>/agents/<agent>/wire.jsonl`, else (None, None)."""
    agent_dir = os.path.dirname(os.path.abspath(path))
    agents = os.path.dirname(agent_dir)
    if os.path.basename(path) == "wire.jsonl" and os.path.basename(agents) == "agents":
        return os.path.dirname(agents), os.path.basename(agent_dir)
    return None, None


def main_journal(path: str) -> str | None:
    """The main agent's journal of `path`: the journal file itself, or `<session>/agents/main/
    wire.jsonl` of a session folder; None when `path` is neither."""
    if os.path.isdir(path):
        p = os.path.join(path, "agents", MAIN_AGENT, "wire.jsonl")
        return p if os.path.isfile(p) else None
    return path if os.path.isfile(path) else None


def session_of(path: str, records: list[dict]) -> str | None:
    """The session id a journal belongs to (ACP's sessionId, `session_<uuid>`): the runtime
    binding an ACP session writes (`acp:<id>`), else the session folder's name."""
    for r in records:
        rid = r.get("runtimeId") if r["type"] == "runtime.set_binding" else None
        if isinstance(rid, str) and rid.startswith("acp:"):
            return rid[4:]
    folder, _ = agent_of(path)
    return os.path.basename(folder) if folder else None


def read_records(path: str) -> tuple[dict, list[dict]]:
    """The metadata and the records of one journal. Raises TranscriptError on a bad line."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TranscriptError(f"cannot read {path}: {e.strerror}") from None
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    meta: dict = {}
    records: list[dict] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            cut = "" if lineno < len(lines) or data.endswith(b"\n") else \
                " (the file ends mid-line: truncated?)"
            raise TranscriptError(f"{path}:{lineno}: not valid JSON{cut}: {e}",
                                  "fix or remove that line") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            raise TranscriptError(f"{path}:{lineno}: not a Kimi Code journal record",
                                  'expected {"type": ..., "time": <ms>, ...}')
        if rec["type"] == "metadata":
            meta = rec
            continue
        if not isinstance(rec.get("time"), (int, float)):
            raise TranscriptError(f"{path}:{lineno}: a Kimi Code journal record without a time",
                                  'expected {"type": ..., "time": <ms>, ...}')
        records.append(rec)
    return meta, records


def usage_of(u: Any) -> dict | None:
    """A journal usage object in the project's words (Wire's token_usage)."""
    if not isinstance(u, dict):
        return None
    return {"input_other": u.get("inputOther", 0), "output": u.get("output", 0),
            "input_cache_read": u.get("inputCacheRead", 0),
            "input_cache_creation": u.get("inputCacheCreation", 0)}


def model_answers(path: str) -> Iterator[dict]:
    """What the model answered, one dict per LLM step of one agent's journal, in order:

        {"agent": "main", "turn": 0, "step": 1, "message_id": "chatcmpl-...",
         "text": "...", "think": "...",
         "tool_calls": [{"id": "call-1", "name": "Bash", "arguments": '{"command": "ls"}'}],
         "usage": {"input_other", "output", "input_cache_read", "input_cache_creation"} | None,
         "finish_reason": "tool_use" | "end_turn" | ... | None}

    for a pinned model to serve the recorded answers again (the arguments are the model's own
    JSON text when the journal has it, from agent.message.appended, else the parsed args)."""
    _, records = read_records(path)
    return answers_of(path, records)


def answers_of(path: str, records: list[dict]) -> Iterator[dict]:
    """`model_answers` of records already read from `path`."""
    _, agent = agent_of(path)
    raw_args: dict[str, str] = {}
    for r in records:
        m = r.get("message") if r["type"] == "agent.message.appended" else None
        inner = m.get("message") if isinstance(m, dict) else None
        if isinstance(inner, dict):
            for tc in inner.get("toolCalls") or []:
                if isinstance(tc, dict) and isinstance(tc.get("arguments"), str):
                    raw_args[str(tc.get("id"))] = tc["arguments"]
    cur: dict | None = None
    for r in records:
        ev = r.get("event") if r["type"] == "context.append_loop_event" else None
        if not isinstance(ev, dict):
            continue
        et = ev.get("type")
        if et == "step.begin":
            cur = {"agent": agent or MAIN_AGENT, "turn": _int(ev.get("turnId")),
                   "step": ev.get("step"), "message_id": None, "text": "", "think": "",
                   "tool_calls": [], "usage": None, "finish_reason": None}
        elif cur is None:
            continue
        elif et == "content.part" and isinstance(ev.get("part"), dict):
            part = ev["part"]
            if part.get("type") == "text":
                cur["text"] += str(part.get("text", ""))
            elif part.get("type") == "think":
                cur["think"] += str(part.get("think", ""))
        elif et == "tool.call":
            tcid = str(ev.get(TOOL_CALL_ID))
            cur["tool_calls"].append({"id": tcid, "name": ev.get("name"),
                                      "arguments": raw_args.get(tcid)
                                      or orjson.dumps(ev.get("args")).decode()})
        elif et == "step.end":
            cur.update(message_id=ev.get("messageId"), usage=usage_of(ev.get("usage")),
                       finish_reason=ev.get("finishReason"))
            yield cur
            cur = None


def _int(v: Any) -> Any:
    try:
        return int(v)
    except (TypeError, ValueError):
        return v


__all__ = ["MAIN_AGENT", "TOOL_CALL_ID", "is_journal", "agent_of", "main_journal", "session_of",
           "read_records", "usage_of", "model_answers", "answers_of"]
