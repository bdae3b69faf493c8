"""What one model answer says, read from its body as received (recorder/llm_leg.py): model,
message id, finish reason, usage, time to first token. For the `llm_calls` view, which then
needs no SSE parsing in SQL. A dialect this does not read gets {} (the body is still stored).

Usage is given in the neutral names the stdio views use (token_usage): input_other, output,
input_cache_read, input_cache_creation, from OpenAI chat-completions usage (prompt_tokens
includes the cached ones; cached_tokens in prompt_tokens_details or, as Moonshot sends it, in
usage itself) and from OpenAI responses usage (input_tokens, input_tokens_details); Anthropic
messages (`anthropic-messages`) are read by llm_anthropic.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any


def sse_events(data: bytes) -> Iterator[tuple[int, str]]:
    """(byte offset of the event's end, its data) of every SSE event in `data`."""
    pos = 0
    text = data.replace(b"\r\n", b"\n")
    while pos < len(text):
        end = text.find(b"\n\n", pos)
        if end < 0:
            end = len(text)
        lines = [ln[5:].lstrip(b" ") for ln in text[pos:end].split(b"\n")
                 if ln.startswith(b"data:")]
        if lines:
            yield end, b"\n".join(lines).decode("utf-8", "replace")
        pos = end + 2


def _usage(u: Any) -> dict[str, int] | None:
    if not isinstance(u, dict):
        return None

    def num(*path: str) -> int:
        v: Any = u
        for p in path:
            v = v.get(p) if isinstance(v, dict) else None
        return int(v) if isinstance(v, int | float) else 0

    if "prompt_tokens" in u:
        cached = num("prompt_tokens_details", "cached_tokens") or num("cached_tokens")
        return {"input_other": num("prompt_tokens") - cached, "output": num("completion_tokens"),
                "input_cache_read": cached, "input_cache_creation": 0}
    if "input_tokens" in u:
        cached = num("input_tokens_details", "cached_tokens") or num("cache_read_input_tokens")
        return {"input_other": num("input_tokens") - cached
                if "input_tokens_details" in u else num("input_tokens"),
                "output": num("output_tokens"), "input_cache_read": cached,
                "input_cache_creation": num("cache_creation_input_tokens")}
    return None


def _chat_chunk(obj: dict[str, Any], out: dict[str, Any]) -> bool:
    """Fold one chat-completions chunk (or whole answer) into `out`; True if it said
    something (text, reasoning or a tool call)."""
    out.setdefault("message_id", obj.get("id"))
    if obj.get("model"):
        out["model"] = obj["model"]
    said = False
    for choice in obj.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        if choice.get("finish_reason"):
            out["finish_reason"] = choice["finish_reason"]
        delta = choice.get("delta") or choice.get("message") or {}
        if not isinstance(delta, dict):
            continue
        for key in ("content", "reasoning_content"):
            if delta.get(key):
                said = True
                out[key + "_chars"] = out.get(key + "_chars", 0) + len(str(delta[key]))
        for call in delta.get("tool_calls") or []:
            said = True
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and fn.get("name"):
                out.setdefault("tool_calls", []).append(fn["name"])
        if (u := _usage(choice.get("usage"))) is not None:
            out["usage"] = u  # Moonshot's: in the choice
    if (u := _usage(obj.get("usage"))) is not None:
        out["usage"] = u
    if isinstance(obj.get("error"), dict):
        out["error"] = obj["error"].get("message")
    return said


def summarize(dialect: str, data: bytes, chunks: Sequence[Sequence[float]],
              content_type: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if dialect not in ("openai-chat", "openai-responses", "anthropic-messages"):
        return out
    fold: Callable[[dict[str, Any], dict[str, Any]], bool] = _chat_chunk
    done: Callable[[dict[str, Any]], dict[str, Any]] = dict
    if dialect == "anthropic-messages":
        from .llm_anthropic import finish, fold_event

        fold, done = fold_event, finish
    if "event-stream" in content_type:
        ends = []  # byte offset where each chunk ends, for the time of an event
        total = 0
        for _, size in chunks:
            total += int(size)
            ends.append(total)
        events = 0
        for end, text in sse_events(data):
            if text.strip() == "[DONE]":
                continue
            try:
                obj = json.loads(text)
            except ValueError:
                continue
            if not isinstance(obj, dict):
                continue
            events += 1
            if isinstance(obj.get("response"), dict):  # responses API: the final object
                obj = {**obj["response"], "id": obj["response"].get("id")}
            said = fold(obj, out)
            if said and "first_token_ms" not in out:
                i = next((k for k, e in enumerate(ends) if e >= end), len(ends) - 1)
                if 0 <= i < len(chunks):
                    out["first_token_ms"] = chunks[i][0]
        out["events"] = events
        out["stream"] = True
        return done(out)
    try:
        obj = json.loads(data)
    except ValueError:
        return out
    if isinstance(obj, dict):
        fold(obj, out)
        out["stream"] = False
    return done(out)
