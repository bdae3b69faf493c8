"""A fork of a recorded session: the agent replay, with the recorded answer to one agent request
changed (engine.core does the rest). Where the fork goes from there is the branch."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from wire_recorder.recorder.errors import UsageError

from ..labels import describe
from ..recording import Msg, Recording
from .core import AgentEngine

# the fields of an answer's result that a one-word change sets (Wire approvals: response)
ANSWER_WORD_FIELDS = ("response", "action")


def fork_point(rec: Recording, ref: str) -> Msg:
    """The recorded agent request `ref` names: N (the Nth agent request, from 1), TYPE or
    TYPE#N (the Nth of that type or method), or the request's JSON-RPC id."""
    reqs = [m for m in rec.requests() if m.direction == "a2c"]
    if not reqs:
        raise UsageError(f"--fork-at {ref}: the recording holds no agent requests",
                         "a fork changes the answer to one of the agent's requests")
    text = ref.strip()
    if text.isdigit():
        n = int(text)
        if 1 <= n <= len(reqs):
            return reqs[n - 1]
        raise UsageError(f"--fork-at {n}: the recording has {len(reqs)} agent requests",
                         _listing(reqs))
    name, _, nth = text.partition("#")
    of_type = [m for m in reqs if name in (m.msg_type, m.method)]
    if of_type:
        n = int(nth) if nth.isdigit() else 1
        if 1 <= n <= len(of_type):
            return of_type[n - 1]
        raise UsageError(f"--fork-at {ref}: the recording has {len(of_type)} {name}",
                         _listing(reqs))
    by_id = [m for m in reqs if str(m.rpc_id) == text]
    if by_id:
        return by_id[0]
    raise UsageError(f"--fork-at {ref[:80]!r} names no agent request of the recording",
                     _listing(reqs))


def _listing(reqs: list[Msg]) -> str:
    names = ", ".join(f"{i} {describe(m)}" for i, m in enumerate(reqs[:8], 1))
    return f"its agent requests: {names}" + (" …" if len(reqs) > 8 else "")


def changed_answer(rec: Recording, req: Msg, answer: str) -> tuple[Msg, str]:
    """The recorded answer to `req` with the change `answer` applied (a JSON object: its fields
    replace the result's, the ids the replay re-addresses kept; a word: the result's response
    field), and the change in words."""
    ans = rec.answer_to(req)
    if ans is None or not isinstance(ans.obj, dict):
        raise UsageError(f"--fork-at: the recorded client never answered {describe(req)}",
                         "fork at a request the recorded client answered")
    old = ans.obj.get("result")
    text = answer.strip()
    if text.startswith("{"):
        try:
            fields = orjson.loads(text)
        except orjson.JSONDecodeError:
            fields = None
        if not isinstance(fields, dict):
            raise UsageError("--answer is not valid JSON: give a JSON object (the fields of the "
                             "result to change) or one word") from None
        new = dict(old if isinstance(old, dict) else {}, **fields)
    else:
        field = next((k for k in ANSWER_WORD_FIELDS if isinstance(old, dict) and k in old), None)
        if field is None or not text:
            raise UsageError(f"--answer {text[:40]!r}: the recorded answer to {describe(req)} has "
                             f"no {' or '.join(ANSWER_WORD_FIELDS)} field to set",
                             "give the fields of the result to change as a JSON object")
        assert isinstance(old, dict)
        fields = {field: text}
        new = dict(old, **fields)
    obj = {k: v for k, v in ans.obj.items() if k != "error"}
    obj["result"] = new
    raw = orjson.dumps(obj)
    return dataclasses.replace(ans, raw=raw, obj=obj, kind="response"), change_words(old, fields)


def change_words(old: Any, fields: dict) -> str:
    """A fork's change in words, the same whichever way it was given (one word, or the JSON
    object wire-ui sends): each field with its recorded value and its new one,
    `response 'approve' → 'reject'` (the fork_change tag, the summary line)."""
    was = old if isinstance(old, dict) else {}
    return ", ".join(f"{k} {_shown(was[k]) if k in was else '(absent)'} → {_shown(v)}"
                     for k, v in fields.items())


def _shown(v: Any) -> str:
    # a string as the summary has always quoted it; anything else as JSON, cut
    return repr(v)[:60] if isinstance(v, str) else orjson.dumps(v).decode()[:60]


class ForkEngine(AgentEngine):
    """The agent replay with one recorded answer changed: the answer to the recorded request at
    `fork_index` is `answer` instead."""

    def __init__(self, *args: Any, fork_index: int, answer: Msg, **kw: Any):
        super().__init__(*args, **kw)
        self.fork_index, self.fork_answer = fork_index, answer
        self.forked_at: str | None = None  # where in the live run the change was applied

    def _answer(self, recorded: Msg, live: Msg) -> Msg | None:
        if recorded.index != self.fork_index:
            return super()._answer(recorded, live)
        self.forked_at = self.pos.where() or "before the first turn"
        self.stats["forked"] += 1
        return self.fork_answer
