"""Kimi CLI's Wire protocol (1.10 as kimi-cli 1.51.0 speaks it: its methods, event and
request types are in names.py, their shapes in model.py).

Agent frames are `event` notifications and `request`s with a typed envelope
`{"type": ..., "payload": ...}`; the type is what matters, so it becomes the frame's msg_type and
the payload what matching and comparison look at.
"""

from __future__ import annotations

from typing import Any

from ..base import Adapter
from . import names, volatile
from .matchers import MATCHERS

WIRE_ONLY_METHODS = frozenset({"prompt", "steer", "cancel", "set_plan_mode", "event", "request"})


class Wire(Adapter):
    name = "wire"
    title = "Kimi Wire"
    client_methods = names.CLIENT_METHODS
    agent_methods = names.AGENT_METHODS
    agent_request_methods = frozenset({"request"})
    # wire spec §5: these responses come after everything their turn emitted; the responses to
    # cancel and steer race with the turn's StatusUpdate, so they are no anchors
    anchor_methods = frozenset({"initialize", "prompt", "replay", "set_plan_mode"})
    turn_methods = frozenset({"prompt"})
    reports_tokens = True
    anchor_types = frozenset({"TurnBegin", "StepBegin"})
    ordered_types = frozenset({"ContentPart", "ToolCall", "ToolCallPart"})
    racy_methods = frozenset({"cancel", "steer"})
    ignore = volatile.IGNORE
    value_patterns = volatile.VALUE_PATTERNS
    session_flags = volatile.SESSION_FLAGS
    path_flags = volatile.PATH_FLAGS
    answer_id_fields = volatile.ANSWER_ID_FIELDS
    matchers = MATCHERS
    default_match_on = ("method", "type", "approval", "tool_call", "question", "hook", "other")
    turn_begin_types = frozenset({"TurnBegin"})
    step_begin_types = frozenset({"StepBegin"})
    floating_type = "StatusUpdate"
    floating_until = frozenset({"StepBegin", "StepInterrupted", "TurnBegin", "TurnEnd"})
    approval_types = frozenset({"ApprovalRequest"})
    model_errors = names.MODEL_ERRORS

    def detect(self, method, params, direction):
        if method in WIRE_ONLY_METHODS:
            return ("wire", None)
        if method == "initialize" and isinstance(params, dict) and "protocol_version" in params:
            return ("wire", str(params["protocol_version"]))
        return None

    def answered_version(self, method, offered, result):
        # wire spec: the agent answers initialize with the version it speaks, not the client's
        pv = result.get("protocol_version") if isinstance(result, dict) else None
        return pv if method == "initialize" and isinstance(pv, str) else None

    def msg_type(self, method, params):
        if method in ("event", "request") and isinstance(params, dict):
            t = params.get("type")
            return t if isinstance(t, str) else None
        return None

    def payload(self, method, params):
        if method in ("event", "request") and isinstance(params, dict):
            return params.get("payload")
        return params

    def known(self, direction, method, msg_type):
        if direction == "c2a":
            return method in names.CLIENT_METHODS
        if method == "event":
            return msg_type in names.EVENT_TYPES
        if method == "request":
            return msg_type in names.REQUEST_TYPES
        return False

    def reject_answer(self, method, msg_type, payload, rpc_id) -> Any | None:
        p = payload if isinstance(payload, dict) else {}
        rid = p.get("id", rpc_id)
        why = "wire-replay: no recorded answer for this request"
        if msg_type == "ApprovalRequest":
            return {"request_id": rid, "response": "reject", "feedback": why}
        if msg_type == "QuestionRequest":
            return {"request_id": rid, "answers": {}}
        if msg_type == "HookRequest":
            return {"request_id": rid, "action": "block", "reason": why}
        return None

    def step_number(self, payload):
        n = payload.get("n") if isinstance(payload, dict) else None
        return n if isinstance(n, int) else None





ADAPTER = Wire()
