"""What differs on every run of an unchanged kimi and must not count as a change when replay
compares Wire frames: fields to ignore, values to mask in the raw text, and the options of the
kimi command line that name its session id and scratch paths."""

from __future__ import annotations

IGNORE: tuple[tuple[str, str], ...] = (
    ("request:id", "agent request ids are fresh on every run (uuid4; 12 hex for hooks)"),
    ("request:params.payload.id", "= the request's JSON-RPC id"),
    ("ApprovalRequest:params.payload.source_id", "uuid4 hex, one per turn"),
    ("ApprovalResponse:params.payload.request_id", "echoes the request id"),
    ("**.agent_id", "subagent ids (a + 8 hex)"),
    ("StepRetry:params.payload.wait_s", "exponential back-off jitter"),
    ("HookResolved:params.payload.duration_ms", "measured"),
    ("HookRequest:params.payload.input_data.session_id", "kimi session id"),
    ("HookRequest:params.payload.input_data.cwd", "work dir"),
    ("Notification:params.payload.id", "n + 8 hex"),
    ("Notification:params.payload.created_at", "clock"),
    ("Notification:params.payload.payload.finished_at", "clock"),
    ("Notification:params.payload.payload.duration_s", "measured"),
)

# (name, pattern, placeholder) over a frame's raw bytes
VALUE_PATTERNS: tuple[tuple[str, bytes, bytes], ...] = (
    ("task_id", rb"\bbash-[0-9a-z]{8}\b", b"<task>"),
    ("agent_id_text", rb"agent_id: a[0-9a-f]{8}\b", b"agent_id: <agent>"),
)

SESSION_FLAGS = ("-S", "--session")
PATH_FLAGS = ("-w", "--work-dir", "--config-file", "--agent-file", "--mcp-config-file")

# Ids inside an agent request's payload that the client's answer echoes: replay puts the live
# request's values there when it re-serves a recorded answer.
ANSWER_ID_FIELDS = ("id", "tool_call_id", "request_id")
