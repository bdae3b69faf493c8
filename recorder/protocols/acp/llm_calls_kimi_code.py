"""What the model answered, call by call, as an ACP recording of Kimi Code 2.x (`kimi acp`, the
TypeScript successor of kimi-cli) says it: the part replay's pinned LLM (replay/agents/
kimi_code.py) serves back from a model on loopback. Same shape as llm_calls.py (kimi-cli's ACP):

    {"calls": [CALL, ...],
     "session": "session_<uuid>" | None,                 # session/new's sessionId
     "model": {"max_context_size": int | None,          # usage_update's `size`
               "models": [{"id": "m", "name": "some-model"}, ...] | None,   # configOptions
               "current": "m" | None}}

Kimi Code shows more of the stream than kimi-cli: inside a `session/prompt`, each text or
thought delta is one `agent_message_chunk` / `agent_thought_chunk`; a tool call is a
`tool_call` whose `toolCallId` is `<turn index>:<model call id>` and whose title is the tool's
name, with empty content; each piece of its arguments is a `tool_call_update` (in progress, no
title) whose content is the arguments so far, so the pieces are the differences. The update
that sets `title: "Running: …"` and `rawInput` is the agent's own rendering after parsing, not
the model's. One call ends where a part comes after all of its tool calls have finished. A
`/compact` prompt or a subagent's tool call makes calls ACP does not show: reported as problems.
`usage_update` (`used`, `size`), sent after the prompt's result, is the context the turn's last
call left: it becomes that call's usage (`used` as input tokens), so the agent reports it again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .llm_calls import _DONE, SUBAGENT_TOOLS, _config_models, _obj, _prompt_text, _text_of


def llm_calls(msgs: Sequence[Any], client_requests: Mapping[bytes, str]) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    models: list[dict[str, str]] | None = None
    current: str | None = None
    size: int | None = None
    session: str | None = None  # the agent's sessionId (its journal's session folder)
    prompts: dict[bytes, int] = {}  # prompt id key -> its turn number
    turn = 0
    call: dict[str, Any] | None = None
    last_of_turn: dict[int, dict[str, Any]] = {}  # turn -> its last call (for usage_update)
    ended: int | None = None  # the turn whose result came last (usage_update follows it)
    tools: dict[str, dict[str, Any]] = {}  # toolCallId -> {"args", "done"}

    def where() -> str:
        n = sum(1 for c in calls if c["turn"] == turn)
        return f"prompt {turn}, answer {n + 1}"

    def start(frame: int) -> dict[str, Any]:
        nonlocal call
        call = {"where": where(), "frame": frame, "agent": None, "kind": "answer", "id": None,
                "usage": None, "parts": [], "error": None, "problem": None, "turn": turn}
        calls.append(call)
        last_of_turn[turn] = call
        tools.clear()
        return call

    def current_call(frame: int) -> dict[str, Any]:
        if call is None or (tools and all(t["done"] for t in tools.values())):
            return start(frame)
        return call

    for m in msgs:
        frame = m.index + 1
        key = m.id_key
        if m.direction == "c2a":
            if m.kind == "request" and m.method == "session/prompt" and key is not None:
                turn += 1
                prompts[key] = turn
                call = None
                tools.clear()
                if _prompt_text(_obj(m.obj).get("params")).split(None, 1)[:1] == ["/compact"]:
                    c = start(frame)
                    c["kind"], c["where"] = "compaction", f"prompt {turn} compaction"
                    c["problem"] = ("ACP does not show what the model answered the compaction "
                                    "(its summary)")
                    call = None
            continue
        if m.kind in ("response", "error") and key is not None:
            result = _obj(_obj(m.obj).get("result"))
            if client_requests.get(key) == "session/new" and isinstance(result.get("sessionId"), str):
                session = session or result["sessionId"]
            if "configOptions" in result:
                offered, cur = _config_models(result)
                models = offered or models
                current = cur or current
            if key in prompts:
                if m.kind == "error":
                    err = _obj(_obj(m.obj).get("error"))
                    c = call or start(frame)
                    c["problem"] = c["problem"] or (
                        f"the prompt failed ({err.get('message')!r}); ACP does not show what "
                        f"the model said to make it fail")
                ended = prompts.pop(key)
                call = None
                tools.clear()
            continue
        if m.kind != "notification" or m.method != "session/update":
            continue
        update = _obj(_obj(m.payload).get("update"))
        kind = update.get("sessionUpdate")
        if kind == "usage_update":
            used, total = update.get("used"), update.get("size")
            if isinstance(total, int) and not isinstance(total, bool) and total > 0:
                size = total
            last = last_of_turn.get(ended) if ended is not None else None
            if last is not None and isinstance(used, int) and not isinstance(used, bool):
                last["usage"] = {"input_other": used, "output": 0, "input_cache_read": 0,
                                 "input_cache_creation": 0}
            continue
        if not prompts:
            continue
        if kind in ("agent_thought_chunk", "agent_message_chunk"):
            chunk = _obj(update.get("content")).get("text")
            c = current_call(frame)
            if not isinstance(chunk, str):
                c["problem"] = c["problem"] or f"a {kind} without text"
            elif kind == "agent_thought_chunk":
                c["parts"].append({"type": "think", "think": chunk, "frame": frame})
            else:
                c["parts"].append({"type": "text", "text": chunk, "frame": frame})
        elif kind == "tool_call":
            c = current_call(frame)
            acp_id = str(update.get("toolCallId") or "")
            prefix, sep, call_id = acp_id.partition(":")
            title = update.get("title") if isinstance(update.get("title"), str) else ""
            args = _text_of(update.get("content")) or ""
            c["parts"].append({"type": "tool_call", "id": call_id if sep else acp_id,
                               "name": title or None, "arguments": args, "extras": None,
                               "frame": frame})
            tools[acp_id] = {"args": args, "done": False}
            if not sep or not prefix.isdigit():
                c["problem"] = c["problem"] or (f"tool call id {acp_id!r} is not "
                                                f"<turn>:<call id>")
            if not title:
                c["problem"] = c["problem"] or f"tool call {acp_id!r} has no title to name it"
            elif title in SUBAGENT_TOOLS:
                c["problem"] = (f"the model started a subagent ({title} tool call {call_id}); "
                                f"ACP does not show the subagent's calls")
                c.setdefault("subagents", []).append(call_id)  # its agent's journal has them
        elif kind == "tool_call_update":
            acp_id = str(update.get("toolCallId") or "")
            t = tools.get(acp_id)
            if t is None:
                continue
            status = update.get("status")
            shown = _text_of(update.get("content"))
            if status == "in_progress" and "title" not in update and "rawInput" not in update \
                    and shown is not None and call is not None and not t["done"]:
                if shown.startswith(t["args"]) and shown != t["args"]:
                    call["parts"].append({"type": "tool_call_part",
                                          "arguments_part": shown[len(t["args"]):],
                                          "frame": frame})
                    t["args"] = shown
                elif not shown.startswith(t["args"]):
                    call["problem"] = call["problem"] or (
                        f"tool call {acp_id!r}: streamed arguments that do not extend the ones "
                        f"before")
            if status in _DONE:
                t["done"] = True
    for c in calls:
        c.pop("turn", None)
    return {"calls": calls, "session": session,
            "model": {"max_context_size": size, "models": models, "current": current}}
