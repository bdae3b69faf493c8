"""What changed in a model request, recorded against live, by part: the model, the sampling and
other parameters, the system prompt, the tool definitions, the messages. Each difference is one
line, e.g. `system prompt changed at char 812: "…was…" → "…is…"`, `tools: added Foo`.

What differs from one run to the next without meaning anything is left out first (VOLATILE_*:
the adapter of the request dialect names them): a prompt cache key, a user id, and the current
time the agent writes into its system prompt; the recorded work dir is read as the live one.
The stored copy of a request is redacted, so a recorded string matches a live one around its
placeholders (llm_text.aligned).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .llm_text import aligned, first_difference

# OpenAI chat-completions (kimi-cli's `kimi`, `openai_legacy` providers; Kimi Code's `openai`
# and `kimi`, whose prompt_cache_key is its session id); Anthropic messages (Kimi Code's
# `anthropic`: metadata.user_id), whose system prompt is the top-level `system` (a string or
# text blocks) and whose tools are named at their top level
VOLATILE_KEYS = frozenset({"prompt_cache_key", "user", "metadata", "safety_identifier"})
VOLATILE_TEXT = (
    # the agent's clock (kimi-cli: "The current date and time in ISO format is `…`")
    re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?"),
    # the time a tool took, in the tool result Kimi Code's Bash gives the model
    re.compile(r"Wall time: \d+(?:\.\d+)? seconds"),
)
CONTEXT = 30  # characters shown on each side of a change


def _mask(text: str) -> str:
    for pattern in VOLATILE_TEXT:
        text = pattern.sub("<time>", text)
    return text


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content, ensure_ascii=False, sort_keys=True) if content is not None else ""


def _show(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def text_change(recorded: str, live: str) -> str | None:
    live = aligned(recorded, live)
    if recorded == live:
        return None
    i = first_difference(recorded, live)
    a = recorded[max(0, i - CONTEXT):i + CONTEXT]
    b = live[max(0, i - CONTEXT):i + CONTEXT]
    lead = "…" if i > CONTEXT else ""
    return (f"changed at char {i}: {_show(lead + a + ('…' if i + CONTEXT < len(recorded) else ''))}"
            f" → {_show(lead + b + ('…' if i + CONTEXT < len(live) else ''))}")


def _tools(body: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            fn = t.get("function")
            out[str((fn if isinstance(fn, dict) else t).get("name"))] = t
    return out


def request_diffs(recorded: dict[str, Any], live: dict[str, Any],
                  path_map: Callable[[str], str] = lambda s: s) -> list[str]:
    """The parts of `live` that differ from `recorded` (both parsed request bodies)."""
    rec = json.loads(_mask(path_map(json.dumps(recorded, ensure_ascii=False))))
    now = json.loads(_mask(json.dumps(live, ensure_ascii=False)))
    out: list[str] = []
    if rec.get("model") != now.get("model"):
        out.append(f"model changed: {_show(str(rec.get('model')))} → "
                   f"{_show(str(now.get('model')))}")
    skip = {"model", "messages", "tools", "system", *VOLATILE_KEYS}
    for k in sorted((set(rec) | set(now)) - skip):
        a, b = rec.get(k, "<absent>"), now.get(k, "<absent>")
        if isinstance(a, str) and isinstance(b, str):
            b = aligned(a, b)
        if a != b:
            out.append(f"parameter {k} changed: {json.dumps(a)} → {json.dumps(b)}")
    msgs_a = [m for m in rec.get("messages") or [] if isinstance(m, dict)]
    msgs_b = [m for m in now.get("messages") or [] if isinstance(m, dict)]
    sys_a = "\n".join(([_text(rec["system"])] if "system" in rec else []) + [
        _text(m.get("content")) for m in msgs_a if m.get("role") == "system"])
    sys_b = "\n".join(([_text(now["system"])] if "system" in now else []) + [
        _text(m.get("content")) for m in msgs_b if m.get("role") == "system"])
    if (change := text_change(sys_a, sys_b)) is not None:
        out.append(f"system prompt {change}")
    ta, tb = _tools(rec), _tools(now)
    added, removed = sorted(set(tb) - set(ta)), sorted(set(ta) - set(tb))
    if added:
        out.append(f"tools: added {', '.join(added)}")
    if removed:
        out.append(f"tools: removed {', '.join(removed)}")
    for name in sorted(set(ta) & set(tb)):
        a_s = json.dumps(ta[name], ensure_ascii=False, sort_keys=True)
        b_s = json.dumps(tb[name], ensure_ascii=False, sort_keys=True)
        if (change := text_change(a_s, b_s)) is not None:
            out.append(f"tools: {name} {change}")
    conv_a = [m for m in msgs_a if m.get("role") != "system"]
    conv_b = [m for m in msgs_b if m.get("role") != "system"]
    for i, (a, b) in enumerate(zip(conv_a, conv_b, strict=False)):
        a_s = json.dumps(a, ensure_ascii=False, sort_keys=True)
        b_s = json.dumps(b, ensure_ascii=False, sort_keys=True)
        if (change := text_change(a_s, b_s)) is not None:
            out.append(f"messages: message {i + 1} ({a.get('role')}) {change}")
            break
    if len(conv_a) != len(conv_b):
        out.append(f"messages: {len(conv_a)} recorded, {len(conv_b)} now")
    return out
