"""What the model answered, call by call, as a kimi Wire recording shows it: the part replay's
pinned LLM (replay/agents) turns into scripts for an offline model.

`llm_calls(msgs, client_requests)` reads a session's messages in recorded order (objects with
`direction`, `kind`, `method`, `msg_type`, `payload`, `obj`, `index` and `id_key`, as replay's
Recording has them; `client_requests` maps a client request's id key to its method) and returns

    {"calls": [CALL, ...],                       # in the order the agent made them
     "model": {"max_context_size": int | None}}  # what the agent reported (StatusUpdate)

One CALL per LLM call the agent made, shared by the agent, its subagents, retries and
compactions (kimi asks one model for all of them, in this order):

    {"where": "turn 2, step 1",            # for messages; subagents and attempts say so
     "frame": 14,                          # the recorded frame that shows the call (1-based)
     "agent": None | "a1b2c3d4",           # the subagent that made it
     "kind": "answer" | "error" | "compaction" | "side_question" | "exhausted",
     "id": str | None, "usage": {...} | None,   # message id and token usage (StatusUpdate)
     "parts": [{"type": "think", "think": s} | {"type": "text", "text": s} |
               {"type": "tool_call", "id", "name", "arguments", "extras"} |
               {"type": "tool_call_part", "arguments_part": s} |
               {"type": "image_url" | "audio_url" | "video_url", "url", "id"}],
                                           # each part with its recorded "frame" too
     "error": None | {"kind": "status" | "connection" | "timeout", "status_code": int | None,
                      "message": str | None},  # "stream": after the parts, which showed
     "problem": None | str,                # why the recording does not say enough
     "summary_length": int}                # compactions: how long the summary was (below)

`exhausted`: the recorded model had no answer left (kimi's own scripted test model ran out); a
pinned model must run out there too. A compaction's summary never reaches the Wire stream: its
call has no parts; whether a compaction asked the model at all is judged the way kimi's
SimpleCompaction does (it asks only when there are messages older than the two latest user or
assistant messages), from the messages the stream shows, and how long its summary was from the
context size kimi estimates after it (4 characters a token) and reports in a StatusUpdate.

Only frames inside a step are the model's: text a hook or an unknown slash command makes
before any step, the events the `replay` method re-emits, and everything the client sends are
not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .names import CHAT_PROVIDER_ERROR

EXHAUSTED = re.compile(r"ScriptedEchoChatProvider exhausted at turn (\d+)\.")
_ERROR_KINDS = {"APIConnectionError": "connection", "APITimeoutError": "timeout"}
_PRESERVED = 2  # SimpleCompaction.max_preserved_messages
COMPACTION_OUTPUT_PREFIX = ("Previous context has been compacted. Here is the compaction "
                            "output:")


class _Scope:
    """One agent (the root or a subagent): its current step and the messages of its context."""

    def __init__(self, agent: str | None):
        self.agent = agent
        self.turn = 0
        self.step: int | None = None
        self.call: dict[str, Any] | None = None  # the step's answer, once it shows
        self.pending: dict[str, Any] | None = None  # the step's answer before anything shows
        self.retry: dict[str, Any] | None = None  # error of the step's last failed attempt
        self.interrupted = False
        self.compaction: dict[str, Any] | None = None  # begun, not ended
        # kimi's context: [role, characters of its text parts] per message
        self.roles: list[list[Any]] = []
        self.estimate: dict[str, Any] | None = None  # a compaction waiting for its estimate

    def where(self, what: str = "") -> str:
        out = f"turn {self.turn}"
        if self.agent:
            out += f", subagent {self.agent}"
        if self.step is not None:
            out += f"{' ' if self.agent else ', '}step {self.step}"
        return f"{out} {what}" if what else out


def _call(scope: _Scope, kind: str, frame: int, where: str | None = None) -> dict[str, Any]:
    return {"where": where or scope.where(), "frame": frame, "agent": scope.agent, "kind": kind,
            "id": None, "usage": None, "parts": [], "error": None, "problem": None}


def _retry_error(payload: dict[str, Any]) -> dict[str, Any]:
    etype = payload.get("error_type")
    code = payload.get("status_code")
    if etype == "APIStatusError" and isinstance(code, int):
        return {"kind": "status", "status_code": code, "message": None}
    if etype in _ERROR_KINDS:
        return {"kind": _ERROR_KINDS[etype], "status_code": None, "message": None}
    return {"kind": "unknown", "status_code": code, "message": None, "type": etype}


def compaction_asks(roles: Sequence[list[Any]]) -> tuple[bool, list[list[Any]]]:
    """Whether kimi's SimpleCompaction asks the model about a context of these messages
    ([role, text characters]), and the messages after it: [summary] + the two latest user or
    assistant messages onwards."""
    n = 0
    start = len(roles)
    for i in range(len(roles) - 1, -1, -1):
        if roles[i][0] in ("user", "assistant", "summary"):
            n += 1
            if n == _PRESERVED:
                start = i
                break
    if n < _PRESERVED or start == 0:
        return False, list(roles)
    return True, [["summary", 0], *roles[start:]]


def _slash(user_input: Any, commands: set[str]) -> str | None:
    if not isinstance(user_input, str):
        return None
    text = user_input.strip()
    if not text.startswith("/"):
        return None
    name = text[1:].split(None, 1)[0] if len(text) > 1 else ""
    return name if name in commands else None


def llm_calls(msgs: Sequence[Any], client_requests: Mapping[bytes, str]) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    scopes: dict[str | None, _Scope] = {None: _Scope(None)}
    root = scopes[None]
    max_context: int | None = None
    commands = {"compact", "clear", "reset"}
    replaying: set[bytes] = set()  # client `replay` requests not answered yet
    exhausted = False

    def show(scope: _Scope, frame: int) -> dict[str, Any] | None:
        """The step's answer call, put in order the first time it shows."""
        if scope.call is None and scope.pending is not None:
            scope.call, scope.pending = scope.pending, None
            scope.call["frame"] = frame
            calls.append(scope.call)
            scope.roles.append(["assistant", 0])
        return scope.call

    def fail(scope: _Scope, frame: int, error: dict[str, Any], attempt: str = "") -> None:
        """The step's current attempt failed before it showed anything."""
        c = _call(scope, "error", frame, scope.where(attempt))
        c["error"] = error
        if error.get("kind") == "unknown":
            c["problem"] = (f"the provider error {error.get('type')!r} cannot be made by the "
                            f"offline model")
        calls.append(c)

    for m in msgs:
        frame = m.index + 1
        key = m.id_key
        if m.direction == "c2a":
            if m.kind == "request" and m.method == "replay" and key is not None:
                replaying.add(key)
            continue
        if m.kind in ("response", "error") and key is not None:
            method = client_requests.get(key)
            replaying.discard(key)
            if method == "initialize" and m.kind == "response":
                result = m.obj.get("result") if isinstance(m.obj, dict) else None
                cmds = result.get("slash_commands") if isinstance(result, dict) else None
                if isinstance(cmds, list):
                    for c in cmds:
                        if isinstance(c, dict):
                            commands.add(str(c.get("name")))
                            commands.update(str(a) for a in c.get("aliases") or [])
            elif method == "prompt":
                if m.kind == "error":
                    err = m.obj.get("error") if isinstance(m.obj, dict) else None
                    code = err.get("code") if isinstance(err, dict) else None
                    message = err.get("message") if isinstance(err, dict) else None
                    if code == CHAT_PROVIDER_ERROR:
                        _final_error(root, calls, frame, message, exhausted)
                        exhausted = exhausted or calls[-1]["kind"] == "exhausted"
                root.pending = root.call = None
                root.compaction = None
            continue
        if m.kind != "notification" or m.method != "event" or replaying:
            continue
        mtype, payload = m.msg_type, m.payload
        scope = root
        while mtype == "SubagentEvent" and isinstance(payload, dict):
            agent = payload.get("agent_id")
            scope = scopes.setdefault(str(agent), _Scope(str(agent)))
            scope.turn = root.turn
            event = _obj(payload.get("event"))
            mtype, payload = event.get("type"), event.get("payload")
        if not isinstance(payload, dict):
            payload = {}
        if mtype == "TurnBegin":
            if scope is root:
                root.turn += 1
            scope.step = None
            scope.pending = scope.call = None
            name = _slash(payload.get("user_input"), commands)
            if name in ("clear", "reset"):
                scope.roles = []
            elif name is None:
                scope.roles.append(["user", _chars(payload.get("user_input"))])
        elif mtype == "SteerInput":
            scope.roles.append(["user", _chars(payload.get("user_input"))])
        elif mtype == "StepBegin":
            n = payload.get("n")
            scope.step = n if isinstance(n, int) else (scope.step or 0) + 1
            scope.call = None
            scope.pending = _call(scope, "answer", frame)
            scope.retry = None
            scope.interrupted = False
        elif mtype == "CompactionBegin":
            asks, scope.roles = compaction_asks(scope.roles)
            if asks:
                scope.compaction = _call(scope, "compaction", frame, scope.where("compaction"))
                scope.compaction["preserved"] = sum(r[1] for r in scope.roles[1:])
                calls.append(scope.compaction)
        elif mtype == "CompactionEnd":
            scope.estimate, scope.compaction = scope.compaction, None
        elif mtype == "StepRetry":
            error = _retry_error(payload)
            attempt = payload.get("next_attempt")
            label = f"attempt {attempt - 1}" if isinstance(attempt, int) else "attempt"
            if scope.call is not None:  # it had begun to answer
                scope.call["problem"] = ("the answer broke off mid-stream and was retried; the "
                                         "offline model fails only before answering")
                scope.call = None
                scope.pending = _call(scope, "answer", frame)
            else:
                fail(scope, frame, error, label)
            scope.retry = error
        elif mtype == "StepInterrupted":
            scope.interrupted = True
            if scope is not root and scope.call is None and scope.pending is not None:
                # a subagent's failed step: its error is only in the parent's tool result
                error = dict(scope.retry or {"kind": "status", "status_code": 400,
                                             "message": None})
                fail(scope, frame, error)
                if scope.retry is None:
                    calls[-1]["problem"] = ("the subagent's provider error is not in the "
                                            "recording")
                scope.pending = None
        elif mtype == "ContentPart":
            if scope.pending is None and scope.call is None:
                continue  # not the model's (a hook's or slash command's text)
            c = show(scope, frame)
            assert c is not None
            c["parts"].append({**_content_part(payload, c), "frame": frame})
            if payload.get("type") == "text" and scope.roles and scope.call is c:
                scope.roles[-1][1] += len(str(payload.get("text") or ""))
        elif mtype == "ToolCall":
            if scope.pending is None and scope.call is None:
                continue
            c = show(scope, frame)
            assert c is not None
            fn = _obj(payload.get("function"))
            c["parts"].append({"type": "tool_call", "id": payload.get("id"),
                               "name": fn.get("name"), "arguments": fn.get("arguments"),
                               "extras": payload.get("extras"), "frame": frame})
        elif mtype == "ToolCallPart":
            if scope.pending is None and scope.call is None:
                continue
            c = show(scope, frame)
            assert c is not None
            if not any(p["type"] == "tool_call" for p in c["parts"]):
                c["problem"] = c["problem"] or "streamed tool-call arguments before any tool call"
            c["parts"].append({"type": "tool_call_part",
                               "arguments_part": payload.get("arguments_part"), "frame": frame})
        elif mtype == "ToolResult":
            scope.roles.append(["tool", _tool_chars(_obj(payload.get("return_value")))])
        elif mtype == "StatusUpdate":
            mct = payload.get("max_context_tokens")
            if scope is root and isinstance(mct, int):
                max_context = mct
            if scope.estimate is not None and payload.get("token_usage") is None and \
                    isinstance(payload.get("context_tokens"), int):
                _summary_length(scope, payload["context_tokens"])
            usage, mid = payload.get("token_usage"), payload.get("message_id")
            if usage is None and mid is None:
                continue
            c = scope.call if scope.call is not None else show(scope, frame)
            if c is None:
                continue
            c["usage"] = usage if isinstance(usage, dict) else None
            c["id"] = mid if isinstance(mid, str) else None
            if not c["parts"]:
                c["problem"] = c["problem"] or "the model's answer has no parts"
        elif mtype == "BtwBegin":
            c = _call(scope, "side_question", frame, scope.where("side question"))
            c["btw"] = payload.get("id")
            calls.append(c)
        elif mtype == "BtwEnd":
            c = next((x for x in reversed(calls) if x["kind"] == "side_question" and
                      x.get("btw") == payload.get("id")), None)
            if c is None:
                continue
            response = payload.get("response")
            if isinstance(response, str) and response:
                c["parts"].append({"type": "text", "text": response, "frame": frame})
            else:
                c["problem"] = ("the side question's answer is not in the recording (it ended "
                                f"with {payload.get('error')!r})")
    for c in calls:
        c.pop("btw", None)
        c.pop("preserved", None)
        if c["kind"] == "side_question" and not c["parts"] and not c["problem"]:
            c["problem"] = "the side question never ended"
    return {"calls": calls, "model": {"max_context_size": max_context}}


def _final_error(root: _Scope, calls: list[dict[str, Any]], frame: int, message: Any,
                 exhausted: bool) -> None:
    """A prompt that failed with the provider's error: the root's last attempt (or the
    compaction in progress) got it."""
    text = message if isinstance(message, str) else None
    where = root.where("compaction") if root.compaction is not None else root.where()
    ran_out = EXHAUSTED.fullmatch(text) if text is not None else None
    if ran_out is not None:
        c = _call(root, "exhausted", frame, where)
        made = sum(1 for x in calls if x["kind"] != "exhausted")
        if int(ran_out.group(1)) != made + 1:
            c["problem"] = (f"the recorded model ran out of answers after "
                            f"{int(ran_out.group(1)) - 1} calls, but the recording shows {made}")
        calls.append(c)
        return
    if exhausted:
        calls.append(_call(root, "exhausted", frame, where))
        return
    if root.compaction is not None:
        c = root.compaction  # the compaction's call failed (its retries do not show)
        c["kind"] = "error"
    elif root.call is not None:  # its parts showed, then the error
        root.call["error"] = {"kind": "stream", "status_code": None, "message": text}
        return
    else:
        c = _call(root, "error", frame, where)
        calls.append(c)
    error = dict(root.retry) if root.retry else {"kind": "status", "status_code": 400}
    error["message"] = text
    c["error"] = error
    c["frame"] = frame
    if root.pending is None and root.compaction is None:
        c["problem"] = "the provider error came outside any step"
    root.pending = None


def _system(text: str) -> int:
    return len(f"<system>{text}</system>")


def _chars(content: Any) -> int:
    """Characters of the text parts kimi's context gets from a user input or tool output."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(str(p.get("text") or "")) for p in content
                   if isinstance(p, dict) and p.get("type") == "text")
    return 0


def _tool_chars(rv: dict[str, Any]) -> int:
    """kimi's tool_result_to_message: the message (wrapped) and the output."""
    output, message = rv.get("output"), rv.get("message")
    n = _chars(output)
    if rv.get("is_error"):
        return _system(f"ERROR: {message}") + n
    if message:
        n += _system(str(message))
    if not message and not output:
        return _system("Tool output is empty.")
    if not message and output and not n:
        n += _system("Tool returned non-text content.")
    return n


def _summary_length(scope: _Scope, context_tokens: int) -> None:
    """kimi estimates the context after a compaction from its text, 4 characters a token: how
    long its summary was follows from the estimate it reported (what is left is rounding)."""
    call, scope.estimate = scope.estimate, None
    assert call is not None
    prefix = _system(COMPACTION_OUTPUT_PREFIX)
    length = 4 * context_tokens - prefix - int(call.get("preserved") or 0)
    if length > 0:
        call["summary_length"] = length
        if scope.roles and scope.roles[0][0] == "summary":
            scope.roles[0][1] = prefix + length


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _content_part(payload: dict[str, Any], call: dict[str, Any]) -> dict[str, Any]:
    ptype = payload.get("type")
    if ptype == "text":
        return {"type": "text", "text": payload.get("text")}
    if ptype == "think":
        if payload.get("encrypted") is not None:
            call["problem"] = call["problem"] or "an encrypted thinking part"
        return {"type": "think", "think": payload.get("think")}
    if ptype in ("image_url", "audio_url", "video_url"):
        body = _obj(payload.get(ptype))
        return {"type": ptype, "url": body.get("url"), "id": body.get("id")}
    call["problem"] = call["problem"] or f"a content part of type {ptype!r}"
    return {"type": str(ptype)}
