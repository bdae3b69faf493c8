"""Kimi Code's pinned model answered from the session's own journal (`wire-replay --journal
PATH`, PATH a `wire.jsonl`, its session folder, or the sessions tree holding it) instead of from
what ACP showed.

The journal (recorder/kimicode_journal.py) has each step's answer as the model gave it: the
whole text and reasoning, the tool calls with the model's own argument text, the message id
and the token usage of every step (ACP shows only the context left after a prompt). ACP shows
how the deltas were cut, which the live agent passes on one `session/update` per delta; so
each answer keeps the recording's cuts where they add up to the journal's text, and is the
journal's text in one piece where they do not (a redacted recording).

ACP does not show a subagent's model calls at all; the journal does (`agents/<id>/wire.jsonl`
beside the main one, one turn per run, the runs in the order the main journal spawned them):
they are served after the main agent's answer that started them, so a session with subagents
can be pinned too.

A journal that is not of the recorded session, or whose steps do not line up with the
recording's model calls (count, tool call ids and names), is refused: one line, exit 2.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wire_recorder.recorder.errors import InputError, TranscriptError
from wire_recorder.recorder.kimicode_journal import (
    agent_of,
    answers_of,
    is_journal,
    main_journal,
    model_answers,
    read_records,
    session_of,
)

if TYPE_CHECKING:
    from ..recording import Recording

HINT = ("give the journal of the recorded session (~/.kimi-code/sessions/wd_*/<its session "
        "id>), or replay without --journal")


def journal_calls(rec: Recording, derived: Mapping[str, Any], path: str) -> tuple[dict, str]:
    """`derived` (the calls ACP shows) with each answer taken from the journal at `path`, and a
    note for the report. Raises InputError when the journal cannot be read or does not match."""
    rec_sid = derived.get("session")
    journal = main_journal(path)
    if journal is None and rec_sid and os.path.isdir(path):
        # the sessions tree (~/.kimi-code/sessions) or a work dir's folder in it
        found = [f for f in (glob.glob(os.path.join(glob.escape(path), "*", rec_sid))
                             + [os.path.join(path, rec_sid)]) if main_journal(f)]
        if not found:
            raise InputError(f"--journal {path}: no journal of session {rec_sid} in it", HINT)
        journal = main_journal(found[0])
    if not os.path.exists(path):
        raise InputError(f"--journal {path}: no such file or folder", HINT)
    if journal is None or not is_journal(journal):
        raise InputError(f"--journal {path}: not a Kimi Code journal (a wire.jsonl of format "
                         f"1.5), its session folder, or a sessions tree holding it", HINT)
    try:
        _, records = read_records(journal)
    except TranscriptError as e:
        raise InputError(f"--journal {path}: {e.message}", HINT) from None
    sid = session_of(journal, records)
    if sid and rec_sid and sid != rec_sid:
        raise InputError(f"--journal {path}: the journal is of session {sid}, the recording's "
                         f"agent session is {rec_sid}", HINT)
    answers = list(answers_of(journal, records))
    calls: list[dict[str, Any]] = list(derived.get("calls") or [])
    for n, call in enumerate(calls):
        if n >= len(answers):
            raise InputError(f"--journal {path}: the journal has {len(answers)} model step(s), "
                             f"the recording {len(calls)}: none for {call.get('where')} "
                             f"(recorded frame {call.get('frame')})", HINT)
        a = answers[n]
        rec_tools = [(p.get("id"), p.get("name")) for p in call.get("parts") or []
                     if p.get("type") == "tool_call"]
        j_tools = [(t["id"], t["name"]) for t in a["tool_calls"]]
        if rec_tools != j_tools:
            raise InputError(f"--journal {path}: {call.get('where')} (recorded frame "
                             f"{call.get('frame')}) called {_names(rec_tools)}, the journal's "
                             f"step {a['step']} of turn {a['turn']} {_names(j_tools)}", HINT)
    if len(answers) > len(calls):
        a = answers[len(calls)]
        raise InputError(f"--journal {path}: the journal has {len(answers)} model step(s), the "
                         f"recording {len(calls)}: step {a['step']} of turn {a['turn']} is "
                         f"not in the recording", HINT)
    runs = _subagent_runs(journal, records)
    out = dict(derived)
    out["calls"] = []
    for c, a in zip(calls, answers, strict=True):
        merged = _merged(c, a)
        out["calls"].append(merged)
        started = [runs.get(tid) for tid in c.get("subagents") or []]
        if started and all(r is not None for r in started):
            merged["problem"] = None
            for tid, run in zip(c["subagents"], started, strict=True):
                assert run is not None
                for n, sub in enumerate(run, 1):
                    out["calls"].append(_subagent_call(merged, tid, n, sub))
    n_steps = len(out["calls"])
    note = (f"LLM answers from the journal {journal}: {n_steps} step(s) of session "
            f"{sid or rec_sid or '?'} (text, reasoning, tool call arguments, message ids and "
            f"token usage as the journal has them)")
    return out, note


def _subagent_runs(journal: str, records: list[dict]) -> dict[str, list[dict]]:
    """Each subagent run's answers by the tool call that started it: a subagent's journal has
    one turn per run, and the main journal's `subagent.spawned` records come in run order."""
    folder, _ = agent_of(journal)
    if folder is None:
        return {}
    turns: dict[str, list[list[dict]]] = {}
    out: dict[str, list[dict]] = {}
    for r in records:
        sub, parent = r.get("subagentId"), r.get("parentToolCallId")
        if r["type"] != "subagent.spawned" or not isinstance(sub, str) or parent is None:
            continue
        if sub not in turns:
            path = os.path.join(folder, "agents", sub, "wire.jsonl")
            groups: list[list[dict]] = []
            try:
                for a in model_answers(path) if os.path.isfile(path) else ():
                    if not groups or groups[-1][0]["turn"] != a["turn"]:
                        groups.append([])
                    groups[-1].append(a)
            except TranscriptError as e:
                raise InputError(f"--journal: {e.message}", HINT) from None
            turns[sub] = groups
        if turns[sub]:
            out[str(parent)] = turns[sub].pop(0)
    return out


def _subagent_call(parent: Mapping[str, Any], tool_call: str, n: int,
                   answer: Mapping[str, Any]) -> dict[str, Any]:
    frame = parent.get("frame")
    parts: list[dict[str, Any]] = []
    for ptype in ("think", "text"):
        if answer[ptype]:
            parts.append({"type": ptype, ptype: answer[ptype], "frame": frame})
    for tc in answer["tool_calls"]:
        parts.append({"type": "tool_call", "id": tc["id"], "name": tc["name"],
                      "arguments": tc["arguments"], "extras": None, "frame": frame})
    return {"where": f"{parent.get('where')}, subagent {answer['agent']} (tool call "
                     f"{tool_call}) answer {n}",
            "frame": frame, "agent": answer["agent"], "kind": "answer",
            "id": answer.get("message_id"), "usage": answer["usage"], "parts": parts,
            "error": None, "problem": None}


def _names(tools: Sequence[tuple[Any, Any]]) -> str:
    return ", ".join(f"{name} {tid}" for tid, name in tools) if tools else "no tool"


def _pieces(parts: Sequence[Mapping[str, Any]], ptype: str, whole: str,
            frame: Any) -> list[dict[str, Any]]:
    """The recorded `ptype` parts when they add up to `whole`, else `whole` in one part."""
    recorded = [dict(p) for p in parts if p.get("type") == ptype]
    if "".join(str(p.get(ptype) or "") for p in recorded) == whole:
        return recorded
    return [{"type": ptype, ptype: whole, "frame": recorded[0]["frame"] if recorded else frame}] \
        if whole else []


def _merged(call: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = list(call.get("parts") or [])
    frame = call.get("frame")
    out = _pieces(parts, "think", answer["think"], frame) + \
        _pieces(parts, "text", answer["text"], frame)
    # each recorded tool call with the argument pieces after it, up to the next call
    groups: list[list[dict[str, Any]]] = []
    for p in parts:
        if p.get("type") == "tool_call":
            groups.append([dict(p)])
        elif p.get("type") == "tool_call_part" and groups:
            groups[-1].append(dict(p))
    for group, tc in zip(groups, answer["tool_calls"], strict=True):
        head = group[0]
        shown = str(head.get("arguments") or "") + \
            "".join(str(p.get("arguments_part") or "") for p in group[1:])
        if shown != tc["arguments"]:
            group = [{**head, "arguments": tc["arguments"]}]
        out += group
    merged = {**call, "parts": out, "usage": answer["usage"] or call.get("usage")}
    if answer.get("message_id"):
        merged["id"] = answer["message_id"]
    return merged
