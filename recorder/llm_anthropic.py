"""Anthropic's Messages API (`POST /v1/messages`, Kimi Code's `anthropic` provider) as the model
leg reads it: what one streamed event says, for the answer's summary (llm_summary.py).

The stream is `event: NAME` + `data: {...}` SSE events: message_start (the message's id, model
and input usage: input_tokens without the cached ones, cache_read_input_tokens,
cache_creation_input_tokens), content_block_start/delta/stop per block (text_delta,
thinking_delta, input_json_delta for a tool_use block's arguments), message_delta (stop_reason,
usage so far: output_tokens, sometimes the input counts again), message_stop, and an `error`
event when the provider fails mid-stream.
"""

from __future__ import annotations

from typing import Any

USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens",
              "cache_creation_input_tokens")


def _neutral(raw: dict[str, Any]) -> dict[str, int]:
    def num(k: str) -> int:
        v = raw.get(k)
        return int(v) if isinstance(v, int | float) else 0

    return {"input_other": num("input_tokens"), "output": num("output_tokens"),
            "input_cache_read": num("cache_read_input_tokens"),
            "input_cache_creation": num("cache_creation_input_tokens")}


def fold_event(obj: dict[str, Any], out: dict[str, Any]) -> bool:
    """Fold one event's data into `out` (model, message_id, finish_reason, usage, *_chars,
    tool_calls, error); True if it said something (text, reasoning or a tool call)."""
    kind = obj.get("type")
    raw = out.setdefault("_anthropic_usage", {})
    usage: Any = None
    said = False
    if kind == "message_start" and isinstance(obj.get("message"), dict):
        msg = obj["message"]
        out.setdefault("message_id", msg.get("id"))
        if msg.get("model"):
            out["model"] = msg["model"]
        usage = msg.get("usage")
    elif kind == "content_block_start" and isinstance(obj.get("content_block"), dict):
        block = obj["content_block"]
        if block.get("type") in ("tool_use", "server_tool_use") and block.get("name"):
            said = True
            out.setdefault("tool_calls", []).append(block["name"])
    elif kind == "content_block_delta" and isinstance(obj.get("delta"), dict):
        delta = obj["delta"]
        for key, name in (("text", "content"), ("thinking", "reasoning_content"),
                          ("partial_json", None)):
            if isinstance(delta.get(key), str) and delta[key]:
                said = True
                if name is not None:
                    out[name + "_chars"] = out.get(name + "_chars", 0) + len(delta[key])
    elif kind == "message_delta":
        delta = obj.get("delta")
        if isinstance(delta, dict) and delta.get("stop_reason"):
            out["finish_reason"] = delta["stop_reason"]
        usage = obj.get("usage")
    elif kind == "error" and isinstance(obj.get("error"), dict):
        out["error"] = obj["error"].get("message")
    elif kind == "message" and isinstance(obj.get("content"), list):  # an answer not streamed
        out.setdefault("message_id", obj.get("id"))
        if obj.get("model"):
            out["model"] = obj["model"]
        if obj.get("stop_reason"):
            out["finish_reason"] = obj["stop_reason"]
        for block in obj["content"]:
            if isinstance(block, dict):
                said = True
                if block.get("type") == "tool_use":
                    out.setdefault("tool_calls", []).append(block.get("name"))
                for key, name in (("text", "content"), ("thinking", "reasoning_content")):
                    if isinstance(block.get(key), str):
                        out[name + "_chars"] = out.get(name + "_chars", 0) + len(block[key])
        usage = obj.get("usage")
    if isinstance(usage, dict):
        # message_delta's counts are the totals so far: a later count replaces an earlier one
        raw.update({k: usage[k] for k in USAGE_KEYS if isinstance(usage.get(k), int | float)})
        out["usage"] = _neutral(raw)
    return said


def finish(out: dict[str, Any]) -> dict[str, Any]:
    out.pop("_anthropic_usage", None)
    return out
