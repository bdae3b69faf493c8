"""Kimi Code's journal records as the Wire frames kimi-cli would have written for them.

Kimi Code speaks ACP on stdio, but its journal (recorder/kimicode_journal.py) has what
kimi-cli's Wire has and ACP lacks: steps, per-step token usage, tool calls with their parsed
arguments and results. Made into Wire messages, every Wire view works on it unchanged:

    turn.prompt          -> the client's `prompt` request (main agent), then TurnBegin
    step.begin           -> StepBegin (n = step)
    content.part         -> ContentPart (text, think: the same shapes)
    tool.call            -> ToolCall (arguments: the parsed args as compact JSON)
    tool.result          -> ToolResult (is_error, output, message = its note)
    usage.record         -> StatusUpdate: token_usage; message_id from its step's step.end;
                            context_tokens from the token_counting.measured after it; `model`
                            as the step's llm.request names it, `model_alias` as usage.record
                            does. A step.end with usage and no usage.record in its step gives it.
    interaction.request  -> ApprovalRequest request (kind approval; a subagent's with agent_id)
    interaction.resolved -> the client's answer: approve, approve_for_session, reject
    turn.ended           -> TurnEnd
    prompt.completed     -> the `prompt` response: status finished / cancelled, else an error
    llm.request          -> ("proxy", ("llm_request", the record)): a proxy row, not a frame

Other records (context bookkeeping, profile, tool snapshots, token counting) have no Wire
counterpart and are left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from ...kimicode_journal import MAIN_AGENT, TOOL_CALL_ID, usage_of


def _response(res: Any) -> str:
    """An interaction.resolved answer in Wire's words."""
    res = res if isinstance(res, dict) else {}
    if res.get("decision") != "approved":
        return "reject"
    label = str(res.get("selectedLabel") or "").lower()
    scope = str(res.get("scope") or "").lower()
    return "approve_for_session" if ("session" in label or "always" in label
                                     or scope in ("session", "always")) else "approve"


def _prompt_text(inp: Any) -> Any:
    if isinstance(inp, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in inp):
        return "\n".join(str(p.get("text", "")) for p in inp)
    return inp


class AgentJournal:
    """Turns one agent's records into Wire messages: (time ms, direction, message) where the
    direction is `a2c`, `c2a` or `proxy` (then the message is the proxy row's method and data)."""

    def __init__(self, records: list[dict], agent: str):
        self.records = records
        self.agent = agent
        self.main = agent == MAIN_AGENT
        # look-ahead: each step's step.end, and whether a usage.record came in it
        self.step_end: dict[str, dict] = {}
        self.step_has_usage_record: set[str] = set()
        step = None
        for r in records:
            ev = r.get("event") if r["type"] == "context.append_loop_event" else None
            if isinstance(ev, dict) and ev.get("type") == "step.begin":
                step = ev.get("uuid")
            elif isinstance(ev, dict) and ev.get("type") == "step.end":
                self.step_end[str(ev.get("uuid"))] = ev
            elif r["type"] == "usage.record" and step is not None:
                self.step_has_usage_record.add(str(step))

    def messages(self) -> Iterator[tuple[float, str, Any]]:
        step_uuid: str | None = None
        model: str | None = None
        prompts: dict[Any, str] = {}  # turnId -> prompt id
        pending_status: dict | None = None
        for r in self.records:
            t, typ = r["time"], r["type"]
            if pending_status is not None and typ != "token_counting.measured":
                yield pending_status["t"], "a2c", _event("StatusUpdate", pending_status["p"])
                pending_status = None
            if typ == "turn.prompt":
                ui = _prompt_text(r.get("input"))
                if self.main:
                    pid = str(r.get("promptId") or f"turn-{r.get('turnId')}")
                    prompts[r.get("turnId")] = pid
                    yield t, "c2a", {"jsonrpc": "2.0", "method": "prompt", "id": pid,
                                     "params": {"user_input": ui}}
                yield t, "a2c", _event("TurnBegin", {"user_input": ui})
            elif typ == "context.append_loop_event" and isinstance(r.get("event"), dict):
                ev = r["event"]
                et = ev.get("type")
                if et == "step.begin":
                    step_uuid = str(ev.get("uuid"))
                    yield t, "a2c", _event("StepBegin", {"n": ev.get("step")})
                elif et == "content.part" and isinstance(ev.get("part"), dict):
                    yield t, "a2c", _event("ContentPart", ev["part"])
                elif et == "tool.call":
                    yield t, "a2c", _event("ToolCall", {
                        "type": "function", "id": ev.get(TOOL_CALL_ID),
                        "function": {"name": ev.get("name"),
                                     "arguments": orjson.dumps(ev.get("args")).decode()
                                     if ev.get("args") is not None else None}})
                elif et == "tool.result":
                    res = ev.get("result") if isinstance(ev.get("result"), dict) else {}
                    yield t, "a2c", _event("ToolResult", {
                        "tool_call_id": ev.get(TOOL_CALL_ID),
                        "return_value": {"is_error": bool(res.get("isError")),
                                         "output": res.get("output", ""),
                                         "message": res.get("message") or res.get("note") or "",
                                         "display": []}})
                elif et == "step.end":
                    if str(ev.get("uuid")) not in self.step_has_usage_record and usage_of(ev.get("usage")):
                        yield t, "a2c", _event("StatusUpdate", {
                            "token_usage": usage_of(ev.get("usage")),
                            "message_id": ev.get("messageId"), "model": model})
            elif typ == "llm.request":
                model = r.get("model") or r.get("modelAlias")
                yield t, "proxy", ("llm_request", {k: v for k, v in r.items() if k != "type"})
            elif typ == "usage.record" and usage_of(r.get("usage")):
                end = self.step_end.get(step_uuid or "", {})
                pending_status = {"t": t, "p": {
                    "token_usage": usage_of(r.get("usage")), "message_id": end.get("messageId"),
                    "model": model, "model_alias": r.get("model")}}
            elif typ == "token_counting.measured" and pending_status is not None:
                pending_status["p"]["context_tokens"] = r.get("tokens")
                yield pending_status["t"], "a2c", _event("StatusUpdate", pending_status["p"])
                pending_status = None
            elif typ == "interaction.request" and r.get("kind") == "approval":
                req: dict = r["request"] if isinstance(r.get("request"), dict) else {}
                payload: dict[str, Any] = {"id": r.get("id"), "tool_call_id": r.get(TOOL_CALL_ID),
                           "sender": req.get("toolName"), "action": req.get("action"),
                           "description": req.get("action"), "display": []}
                if not self.main:
                    payload["agent_id"] = self.agent
                yield t, "a2c", {"jsonrpc": "2.0", "method": "request", "id": r.get("id"),
                                 "params": {"type": "ApprovalRequest", "payload": payload}}
            elif typ == "interaction.resolved" and str(r.get("id", "")).startswith("approval"):
                res = r.get("response")
                answer = {"request_id": r.get("id"), "response": _response(res)}
                if isinstance(res, dict) and res.get("feedback"):
                    answer["feedback"] = res["feedback"]
                yield t, "c2a", {"jsonrpc": "2.0", "id": r.get("id"), "result": answer}
            elif typ == "turn.ended":
                yield t, "a2c", _event("TurnEnd", {})
            elif typ == "prompt.completed" and self.main:
                pid = str(r.get("promptId") or "")
                if pid in prompts.values():
                    reason = r.get("reason")
                    status = {"completed": "finished", "cancelled": "cancelled",
                              "aborted": "cancelled"}.get(str(reason))
                    if status is not None:
                        yield t, "a2c", {"jsonrpc": "2.0", "id": pid, "result": {"status": status}}
                    else:
                        yield t, "a2c", {"jsonrpc": "2.0", "id": pid,
                                         "error": {"code": -32003, "message": str(reason)}}
        if pending_status is not None:
            yield pending_status["t"], "a2c", _event("StatusUpdate", pending_status["p"])


def _event(typ: str, payload: Any) -> dict:
    return {"jsonrpc": "2.0", "method": "event", "params": {"type": typ, "payload": payload}}


def subagent_event(wrap: dict, msg: dict) -> dict:
    """A subagent's event as its parent's journal would carry it in kimi-cli's Wire: wrap =
    parent_tool_call_id, agent_id, subagent_type. Other messages (its requests) stay as they are."""
    if msg.get("method") == "event":
        return _event("SubagentEvent", {**wrap, "event": msg["params"]})
    return msg


__all__ = ["AgentJournal", "subagent_event"]
