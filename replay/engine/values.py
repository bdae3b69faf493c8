"""Recorded values the client sends back, and what the live run has instead: values the agent
mints in its responses (ACP sessionId, MCP requestState). They are rewritten in the client's
frames before those go out."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from ..normalize import _json_inner
from ..recording import Msg, Recording


def recorded_responses(rec: Recording) -> dict[bytes, Msg]:
    """The agent's recorded responses to the client's requests, by id."""
    return {m.id_key: m for m in rec.msgs
            if m.direction == "a2c" and m.kind in ("response", "error")
            and m.id_key in rec.client_requests}


def learn(values: MutableMapping[bytes, bytes], rec: Recording,
          responses: Mapping[bytes, Msg], live: Msg) -> int:
    """Note what the live response `live` minted where the recorded one minted something else
    (whole JSON strings); the number of values learnt."""
    if live.id_key is None:
        return 0
    recorded = responses.get(live.id_key)
    if recorded is None:
        return 0
    method = rec.client_requests.get(live.id_key)
    pairs = zip(rec.adapter.minted(method, recorded.payload),
                rec.adapter.minted(method, live.payload), strict=False)
    n = 0
    for old, new in pairs:
        if old != new:
            values[_json_inner(old)] = _json_inner(new)
            n += 1
    return n


def rewrite(values: Mapping[bytes, bytes], raw: bytes) -> bytes:
    """`raw` with each recorded value (a whole JSON string) replaced by the live one."""
    for old, new in values.items():
        if old in raw:
            raw = raw.replace(b'"' + old + b'"', b'"' + new + b'"')
    return raw
