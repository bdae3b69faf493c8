"""The agent requests of a session that `wire-ui` can fork at ("answer differently and
continue"): each with the answer the recorded client gave and what a change can set.

Protocol-neutral on purpose: a request is an agent-to-client JSON-RPC request the recorded
client answered; the choices for a one-word field (approve / reject) are the recorded value and
the one the protocol adapter's own refusal (`reject_answer`) puts there; the rest of the answer
is offered as its text and yes/no leaves. N counts the agent requests in frame order, as
`wire-replay --fork-at N` does.
"""

from __future__ import annotations

from typing import Any

import orjson

from wire_recorder.recorder import protocols

# an id in an answer is re-addressed by the replay, not something to change
ID_KEY_END = ("id", "Id", "ID")


def forkable(ws: Any, session_id: str, protocol: str | None) -> list[dict]:
    """[{n, seq, answer_seq, label, result, choices: {field: [values]}}] in frame order."""
    rows = ws.con.execute(
        "SELECT seq, direction, kind, rpc_id, method, msg_type, payload FROM frames "
        "WHERE session_id = ? AND ((direction = 'a2c' AND kind = 'request') OR "
        "(direction = 'c2a' AND kind = 'response')) ORDER BY seq", [session_id]).fetchall()
    adapter = protocols.for_session(protocol)
    out: list[dict] = []
    open_: dict[str, dict] = {}  # the agent's requests not answered yet, by JSON-RPC id
    n = 0
    for seq, direction, _kind, rpc_id, method, msg_type, payload in rows:
        if direction == "a2c":
            n += 1
            if rpc_id is not None:
                open_[rpc_id] = {"n": n, "seq": seq, "label": msg_type or method or "request",
                                 "method": method, "msg_type": msg_type,
                                 "payload": _json(payload), "rpc_id": rpc_id}
            continue
        req = open_.pop(rpc_id, None) if rpc_id is not None else None
        result = _json(payload)
        if req is None or not isinstance(result, dict):
            continue
        out.append({"n": req["n"], "seq": req["seq"], "answer_seq": seq,
                    "label": req["label"], "result": result,
                    "choices": _choices(adapter, req, result)})
    return out


def _choices(adapter: Any, req: dict, result: dict) -> dict[str, list[str]]:
    """The one-word fields of the answer and their values: the recorded one, the refusal's."""
    try:
        refusal = adapter.reject_answer(req["method"], req["msg_type"], req["payload"],
                                        req["rpc_id"])
    except Exception:  # noqa: BLE001 (an adapter's trouble only loses the suggestion)
        refusal = None
    if not isinstance(refusal, dict):
        return {}
    return {k: [v, refusal[k]] for k, v in result.items()
            if isinstance(v, str) and isinstance(refusal.get(k), str) and refusal[k] != v
            and not k.endswith(ID_KEY_END)}


def _json(text: Any) -> Any:
    if not isinstance(text, (str, bytes)):
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
