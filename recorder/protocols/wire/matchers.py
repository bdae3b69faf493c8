"""Replay's matchers for Wire's agent requests, by request type. Each gives None for the types
it does not concern, so they compose; `other` covers every type the specific ones do not."""

from __future__ import annotations

from typing import Any

import orjson

from ..base import Matcher, Request


def _json_or_text(s: Any) -> Any:
    """Tool arguments are JSON text: compare them parsed, so spacing and key order don't count."""
    if isinstance(s, str):
        try:
            return orjson.loads(s)
        except orjson.JSONDecodeError:
            return s
    return s


SPECIFIC_TYPES = {"ApprovalRequest", "ToolCallRequest", "QuestionRequest", "HookRequest"}


def _type(r: Request) -> Any:
    return r.msg_type


def _approval(r: Request) -> Any:
    if r.msg_type != "ApprovalRequest":
        return None
    return [r.get("sender"), r.get("action"), r.get("description")]


def _tool_call(r: Request) -> Any:
    if r.msg_type != "ToolCallRequest":
        return None
    return [r.get("name"), _json_or_text(r.get("arguments"))]


def _question(r: Request) -> Any:
    if r.msg_type != "QuestionRequest":
        return None
    return r.get("questions")


def _hook(r: Request) -> Any:
    if r.msg_type != "HookRequest":
        return None
    data = r.get("input_data")
    data = data if isinstance(data, dict) else {}
    return [r.get("subscription_id"), r.get("event"), r.get("target"), data.get("tool_name"),
            data.get("tool_input")]


def _other(r: Request) -> Any:
    if r.msg_type in SPECIFIC_TYPES:
        return None
    return r.payload


def _tool_call_id(r: Request) -> Any:
    return r.get("tool_call_id")


def _display(r: Request) -> Any:
    return r.get("display") if r.msg_type == "ApprovalRequest" else None


MATCHERS: dict[str, tuple[Matcher, str]] = {
    "type": (_type, "Wire request type: ApprovalRequest, ToolCallRequest, …"),
    "approval": (_approval, "ApprovalRequest: sender, action, description"),
    "tool_call": (_tool_call, "ToolCallRequest: tool name and arguments (parsed JSON)"),
    "question": (_question, "QuestionRequest: the questions with their options"),
    "hook": (_hook, "HookRequest: subscription, event, target, tool name and tool input"),
    "other": (_other, "any other request type: its whole normalised payload"),
    "tool_call_id": (_tool_call_id,
                     "payload.tool_call_id (kimi takes it from the model's tool call)"),
    "display": (_display, "ApprovalRequest: the display blocks (command, diff, …)"),
}
