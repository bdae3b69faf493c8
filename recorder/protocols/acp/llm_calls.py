"""What the model answered, call by call, as far as an ACP recording of kimi (`kimi acp`) says
it: the part replay's pinned LLM (replay/agents) turns into scripts for an offline model.

`llm_calls(msgs, client_requests)` takes what the Wire part takes and returns the same shape
(see recorder/protocols/wire/llm_calls.py), plus the models the agent offered:

    {"calls": [CALL, ...],
     "model": {"max_context_size": None,
               "models": [{"id": "kimi-code,thinking", "name": "kimi-for-coding"}, ...] | None,
               "current": "kimi-code" | None}}

ACP says less than Wire: no steps, message ids, token usage, retries or compactions, and
nothing of a subagent. Inside a `session/prompt` (history a `session/load` replays is not the
model's), `agent_thought_chunk` is a think part, `agent_message_chunk` a text part (kimi's
`[Notification] ...` texts are not the model's), `tool_call` a tool call (its id is the part of
`toolCallId` after the turn's prefix (`<uuid>/`, Kimi Code's `<turn>:`), its name the title's
head, its arguments the text kimi shows, or `rawInput`), and a `tool_call_update` that carries a
title and longer argument text a streamed part (Kimi Code 2.x: untitled updates whose text grows
after a `tool_call` with none). Kimi Code offers its models in `configOptions` (a select of
category model), kimi-cli in `models`. One call ends where a part comes after all of its tool calls have finished
(completed or failed): the next answer. A tool call to kimi's `Agent` tool (a subagent) or a
`/compact` prompt make calls ACP does not show: they are reported as problems.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .kimi_code import split_call_id

EXHAUSTED_PREFIX = "ScriptedEchoChatProvider exhausted at turn "
_PART_UPDATES = frozenset({"agent_thought_chunk", "agent_message_chunk", "tool_call"})
_DONE = frozenset({"completed", "failed"})
SUBAGENT_TOOLS = frozenset({"Agent"})  # kimi's tool that starts a subagent


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _text_of(content: Any) -> str | None:
    """The text of a tool call's first `content` block (kimi puts the arguments there)."""
    if isinstance(content, list):
        for block in content:
            inner = _obj(_obj(block).get("content"))
            if _obj(block).get("type") == "content" and inner.get("type") == "text":
                text = inner.get("text")
                return text if isinstance(text, str) else None
    return None


def _prompt_text(params: Any) -> str:
    blocks = _obj(params).get("prompt")
    if not isinstance(blocks, list):
        return ""
    return " ".join(str(_obj(b).get("text") or "") for b in blocks).strip()


def _config_models(result: Mapping[str, Any]) -> tuple[list[dict[str, str]] | None, str | None]:
    """The model select of a session's `configOptions`: its options as (alias, model name), and
    the current alias."""
    for opt in result.get("configOptions") or []:
        opt = _obj(opt)
        if opt.get("id") == "model" or opt.get("category") == "model":
            offered = [{"id": str(_obj(o).get("value")), "name": str(_obj(o).get("name"))}
                       for o in opt.get("options") or [] if _obj(o).get("value") is not None]
            cur = opt.get("currentValue")
            return offered or None, cur if isinstance(cur, str) else None
    return None, None


def llm_calls(msgs: Sequence[Any], client_requests: Mapping[bytes, str]) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    models: list[dict[str, str]] | None = None
    current: str | None = None
    prompts: dict[bytes, int] = {}  # prompt id key -> its turn number
    turn = 0
    call: dict[str, Any] | None = None
    tools: dict[str, dict[str, Any]] = {}  # toolCallId -> {"args", "done", "part"}
    exhausted = False

    def where() -> str:
        n = sum(1 for c in calls if c["turn"] == turn)
        return f"prompt {turn}, answer {n + 1}"

    def start(frame: int) -> dict[str, Any]:
        nonlocal call
        call = {"where": where(), "frame": frame, "agent": None, "kind": "answer", "id": None,
                "usage": None, "parts": [], "error": None, "problem": None, "turn": turn}
        calls.append(call)
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
                text = _prompt_text(_obj(m.obj).get("params"))
                if text.split(None, 1)[:1] == ["/compact"]:
                    c = start(frame)
                    c["kind"] = "compaction"
                    c["where"] = f"prompt {turn} compaction"
                    c["problem"] = ("ACP does not show whether the compaction asked the model "
                                    "or what it answered")
                    call = None
            continue
        if m.kind in ("response", "error") and key is not None:
            method = client_requests.get(key)
            result = _obj(_obj(m.obj).get("result"))
            if "models" in result and isinstance(result.get("models"), dict):
                offered = _obj(result["models"]).get("availableModels")
                if isinstance(offered, list):
                    models = [{"id": str(_obj(x).get("modelId")), "name": str(_obj(x).get("name"))}
                              for x in offered if _obj(x).get("modelId") is not None]
                cur = _obj(result["models"]).get("currentModelId")
                current = cur if isinstance(cur, str) else current
            if "configOptions" in result:  # Kimi Code 2.x: a model select
                offered, cur = _config_models(result)
                models = offered or models
                current = cur or current
            if key in prompts and m.kind == "error" and method == "session/prompt":
                err = _obj(_obj(m.obj).get("error"))
                data = err.get("data")
                message = _obj(data).get("error") if isinstance(data, dict) else None
                if not isinstance(message, str):
                    message = err.get("message") if isinstance(err.get("message"), str) else None
                _final_error(calls, frame, message, exhausted, call, tools, where(), turn)
                exhausted = exhausted or calls[-1]["kind"] == "exhausted"
            if key in prompts:
                del prompts[key]
                call = None
                tools.clear()
            continue
        if m.kind != "notification" or m.method != "session/update" or not prompts:
            continue
        update = _obj(_obj(m.payload).get("update"))
        kind = update.get("sessionUpdate")
        if kind in ("agent_thought_chunk", "agent_message_chunk"):
            chunk = _obj(update.get("content")).get("text")
            if not isinstance(chunk, str):
                c = current_call(frame)
                c["problem"] = c["problem"] or f"a {kind} without text"
                continue
            if kind == "agent_message_chunk" and chunk.startswith("[Notification] "):
                continue  # kimi's own notice, not the model's
            c = current_call(frame)
            if kind == "agent_thought_chunk":
                c["parts"].append({"type": "think", "think": chunk, "frame": frame})
            else:
                c["parts"].append({"type": "text", "text": chunk, "frame": frame})
        elif kind == "tool_call":
            c = current_call(frame)
            acp_id = str(update.get("toolCallId") or "")
            split = split_call_id(acp_id)
            sep, call_id = (True, split[1]) if split else (False, acp_id)
            title = update.get("title") if isinstance(update.get("title"), str) else ""
            name = title.split(": ", 1)[0] if title else None
            args = _text_of(update.get("content"))
            if args is None and "rawInput" in update:
                args = json.dumps(update["rawInput"], ensure_ascii=False)
            c["parts"].append({"type": "tool_call", "id": call_id if sep else acp_id,
                               "name": name, "arguments": args, "extras": None,
                               "frame": frame})
            tools[acp_id] = {"args": args or "", "done": False, "streams": False}
            if not sep:
                c["problem"] = c["problem"] or f"tool call id {acp_id!r} has no turn prefix"
            if not name:
                c["problem"] = c["problem"] or f"tool call {acp_id!r} has no title to name it"
            elif name in SUBAGENT_TOOLS:
                c["problem"] = (f"the model started a subagent ({name} tool call "
                                f"{call_id or acp_id}); ACP does not show the subagent's calls")
        elif kind == "tool_call_update":
            acp_id = str(update.get("toolCallId") or "")
            t = tools.get(acp_id)
            if t is None:
                continue
            status = update.get("status")
            shown = _text_of(update.get("content"))
            # kimi-cli retitles a call as its arguments grow; Kimi Code 2.x streams them as the
            # text of untitled updates after a tool_call with none
            streamed = "title" in update or t["streams"] or not t["args"]
            if status == "in_progress" and streamed and shown is not None and \
                    shown != t["args"] and shown.startswith(t["args"]) and call is not None:
                call["parts"].append({"type": "tool_call_part",
                                      "arguments_part": shown[len(t["args"]):], "frame": frame})
                t["args"] = shown
                t["streams"] = t["streams"] or "title" not in update
            if status in _DONE:
                t["done"] = True
    for c in calls:
        c.pop("turn", None)
    return {"calls": calls,
            "model": {"max_context_size": None, "models": models, "current": current}}


def _final_error(calls: list[dict[str, Any]], frame: int, message: str | None, exhausted: bool,
                 call: dict[str, Any] | None, tools: Mapping[str, Any], where: str,
                 turn: int) -> None:
    """A prompt that failed: kimi answers a provider error with the provider's message."""
    c = {"where": where, "frame": frame, "agent": None, "kind": "error", "id": None,
         "usage": None, "parts": [], "error": None, "problem": None, "turn": turn}
    if exhausted or (message is not None and message.startswith(EXHAUSTED_PREFIX)):
        c["kind"] = "exhausted"
        calls.append(c)
        return
    if call is not None and not (tools and all(t["done"] for t in tools.values())):
        # its parts showed, then the error
        call["error"] = {"kind": "stream", "status_code": None, "message": message}
        if message is None:
            call["problem"] = "the answer broke off without the provider's message"
        return
    c["error"] = {"kind": "status", "status_code": 400, "message": message}
    if message is None:
        c["problem"] = "the prompt failed without the provider's message"
    calls.append(c)
