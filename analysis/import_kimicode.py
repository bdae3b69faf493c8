"""wire-import of Kimi Code's own session journal (`wire.jsonl`, record format "1.5").

One session per main journal, its subagents' journals (siblings under `agents/`) read with it:
each agent's records become Wire messages (recorder/protocols/wire/kimicode.py says which), a
subagent's wrapped as SubagentEvents with the parent's `subagent.spawned` (agent id, type,
parent tool call), all merged by time. Stored as a Wire session (source `kimi-code-journal`),
so the Wire views (turns, steps, tool_calls, token_usage, requests), wire-show and wire-stats
work on it unchanged; llm.request records are proxy rows (method `llm_request`). Why Wire and
not ACP: docs/analysis.md.
"""

from __future__ import annotations

import datetime as _dt
import heapq
import os
from collections.abc import Iterator
from typing import Any

import orjson

from wire_recorder.recorder.classify import Extracted, classify
from wire_recorder.recorder.kimicode_journal import (
    MAIN_AGENT,
    agent_of,
    is_journal,
    model_answers,
    read_records,
)
from wire_recorder.recorder.model import Frame, frame_row
from wire_recorder.recorder.protocols.wire.kimicode import AgentJournal, subagent_event

KIMICODE_SOURCE = "kimi-code-journal"


def journal_files(paths: list[str]) -> list[str]:
    """The paths to import as sessions: a subagent's journal is left out when its session's
    main journal is there (it is read with it, as its SubagentEvents)."""
    out = []
    for p in paths:
        folder, agent = agent_of(p)
        if folder is not None and agent != MAIN_AGENT and \
                os.path.isfile(os.path.join(folder, "agents", MAIN_AGENT, "wire.jsonl")):
            continue
        out.append(p)
    return out


def session_journal(folder: str) -> str | None:
    """A Kimi Code session folder's main journal, if the folder is one."""
    p = os.path.join(folder, "agents", MAIN_AGENT, "wire.jsonl")
    return p if os.path.isfile(p) else None


def _monotone(items: Iterator[tuple[float, str, Any]], rank: int) -> Iterator[tuple]:
    # journal times are not always in file order (some records carry when they were made):
    # the file's order wins, the time is its running maximum
    last = float("-inf")
    for i, (t, d, m) in enumerate(items):
        last = max(last, t)
        yield last, rank, i, d, m


def _runs(records: list[dict]) -> list[list[dict]]:
    """A journal's records cut before each turn.prompt after the first."""
    runs: list[list[dict]] = [[]]
    prompted = False
    for r in records:
        if r["type"] == "turn.prompt":
            if prompted:
                runs.append([])
            prompted = True
        runs[-1].append(r)
    return runs


def read_kimicode_journal(path: str, session_id: str | None = None) -> tuple[dict, list[Frame]]:
    """A Kimi Code journal (and, for a main agent's, its subagents' journals) as a Wire session
    and its frames. Raises TranscriptError on a bad line."""
    meta, records = read_records(path)
    folder, agent = agent_of(path)
    agent = agent or MAIN_AGENT
    if session_id is None:
        base = os.path.basename(folder) if folder else \
            os.path.splitext(os.path.basename(path))[0]
        session_id = base if agent == MAIN_AGENT else f"{base}.{agent}"
    streams = [_monotone(AgentJournal(records, agent).messages(), 0)]
    subagents: list[str] = []
    if folder is not None and agent == MAIN_AGENT:
        spawns: dict[str, list[dict]] = {}
        for r in records:
            if r["type"] == "subagent.spawned":
                spawns.setdefault(str(r.get("subagentId")), []).append(r)
        for sub_id, runs_spawned in spawns.items():
            sub_path = os.path.join(folder, "agents", sub_id, "wire.jsonl")
            if not os.path.isfile(sub_path):
                continue
            subagents.append(sub_id)
            _, sub_records = read_records(sub_path)
            # a resumed subagent writes on in the same journal: its k-th prompt is the k-th
            # spawn's run (its parent tool call)
            for k, run in enumerate(_runs(sub_records)):
                sp = runs_spawned[min(k, len(runs_spawned) - 1)]
                wrap = {"parent_tool_call_id": sp.get("parentToolCallId"), "agent_id": sub_id,
                        "subagent_type": sp.get("subagentName")}

                def wrapped(recs=run, sid=sub_id, w=wrap, t0=sp["time"]):
                    for t, d, m in AgentJournal(recs, sid).messages():
                        # nothing of a subagent's run before the parent spawned it
                        yield max(t, t0), d, subagent_event(w, m) if d == "a2c" else m

                streams.append(_monotone(wrapped(), len(streams)))
    frames: list[Frame] = []
    for t, _rank, _i, direction, msg in heapq.merge(*streams):
        ns = t * 1_000_000 if isinstance(t, int) else int(round(t * 1e6))  # ms: exact
        wall = _dt.datetime.fromtimestamp(t / 1000, _dt.UTC).replace(tzinfo=None)
        if direction == "proxy":
            method, data = msg
            raw = orjson.dumps(data)
            ex = Extracted("lifecycle", method=method, payload=raw.decode())
        else:
            raw = orjson.dumps(msg)
            ex = classify(raw, direction, "wire")
        frames.append(Frame(*frame_row(session_id, len(frames) + 1, wall, ns, direction, raw,
                                       True, ex)))
    created = meta.get("created_at")
    started = _dt.datetime.fromtimestamp(created / 1000, _dt.UTC).replace(tzinfo=None) \
        if isinstance(created, (int, float)) else frames[0].ts if frames else \
        _dt.datetime.fromtimestamp(os.path.getmtime(path), _dt.UTC).replace(tzinfo=None)
    tags: dict[str, Any] = {"imported_from": os.path.abspath(path), "agent": "Kimi Code CLI",
                            "journal_format": meta.get("protocol_version")}
    if subagents:
        tags["subagents"] = subagents
    session = {
        "session_id": session_id,
        "started_at": started,
        "ended_at": frames[-1].ts if frames else started,
        "protocol": "wire",
        # the journal's "1.5" numbers its records, not a Wire version (tags.journal_format)
        "protocol_version": None,
        "source": KIMICODE_SOURCE,
        "mono_start_ns": frames[0].mono_ns if frames else 0,
        # what wire-stats counts as frames when it reads the journal in place (no import)
        "frame_count": sum(1 for f in frames if f.direction in ("c2a", "a2c")),
        "tags": tags,
        "db_note": "imported from Kimi Code's own journal: Wire events made from its records; "
                   "the client's prompts and approval answers as it recorded them, "
                   "llm.request records as proxy rows (method llm_request)",
    }
    cwd = _session_cwd(folder)
    if cwd:
        session["cwd"] = cwd
    return session, frames


def _session_cwd(folder: str | None) -> str | None:
    if folder is None:
        return None
    try:
        with open(os.path.join(folder, "state.json"), "rb") as f:
            state = orjson.loads(f.read())
    except (OSError, orjson.JSONDecodeError):
        return None
    cwd = state.get("cwd") if isinstance(state, dict) else None
    return cwd if isinstance(cwd, str) else None


__all__ = ["KIMICODE_SOURCE", "is_journal", "journal_files", "session_journal",
           "read_kimicode_journal", "model_answers"]
