"""ACP's streamed pieces of one message (recorder/redact_stream.py): `agent_message_chunk` and
`agent_thought_chunk` updates of one session. (`tool_call_update`s repeat the whole argument
text so far: each is redacted as a frame.)"""

from __future__ import annotations

from typing import Any

MARKERS = (b'"agent_message_chunk"', b'"agent_thought_chunk"')


def piece_of(obj: dict[str, Any]) -> tuple[str, tuple[str, ...], str] | None:
    """(group, path, text) when obj is a text chunk: group "acp-message:<session>" or
    "acp-thought:<session>"; None otherwise."""
    params = obj.get("params")
    if obj.get("method") != "session/update" or not isinstance(params, dict):
        return None
    up = params.get("update")
    if not isinstance(up, dict):
        return None
    kind = up.get("sessionUpdate")
    content = up.get("content")
    if kind in ("agent_message_chunk", "agent_thought_chunk") and isinstance(content, dict) \
            and content.get("type") == "text" and isinstance(content.get("text"), str):
        group = f"acp-{kind.split('_')[1]}:{params.get('sessionId')}"
        return group, ("params", "update", "content", "text"), content["text"]
    return None
