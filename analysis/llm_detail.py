"""The model calls of a session recorded with `wire-proxy --llm`, for wire-ui and wire-show: per
call (the `llm_calls` view: its turn, step, timing and usage), the exact request the agent sent
and the streamed answer, from the `llm_request`/`llm_response` lifecycle rows (recorder/llm_leg.py;
a large one's bytes are in the blob store), and what the prompt gained since the call before.

Bodies leave as text (a body that is not UTF-8 as its base64, so said); each caller makes them
safe for where it shows them. Nothing here writes to the recording."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

EVENTS = ("llm_request", "llm_response")


def _messages(body: str | None) -> list | None:
    """The request's list of messages (chat-completions and messages APIs both name it so)."""
    if body is None:
        return None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    msgs = doc.get("messages") if isinstance(doc, dict) else None
    return msgs if isinstance(msgs, list) else None


def prompt_diff(before: list | None, after: list | None) -> dict[str, Any] | None:
    """What the call's messages add to the call before's: the messages after the part they
    share from the start (`kept`), and how many of the earlier ones were changed or dropped."""
    if after is None:
        return None
    before = before or []
    kept = 0
    while kept < min(len(before), len(after)) and before[kept] == after[kept]:
        kept += 1
    return {"kept": kept, "dropped": len(before) - kept,
            "added": [orjson.dumps(m, option=orjson.OPT_INDENT_2).decode() for m in after[kept:]]}


def _body(ev: dict[str, Any], prefix: str) -> tuple[str | None, bool]:
    """(the body as text, whether it is base64)."""
    if isinstance(ev.get(f"{prefix}_body"), str):
        return ev[f"{prefix}_body"], False
    if isinstance(ev.get(f"{prefix}_body_b64"), str):
        return ev[f"{prefix}_body_b64"], True
    return None, False


def _exchanges(con: Any, sid: str, db_path: str) -> dict[int, dict[str, Any]]:
    from wire_recorder.recorder.model import COLUMNS, Frame
    from wire_recorder.recorder.store import resolve_blobs

    rows = con.execute(f"SELECT {', '.join(COLUMNS)} FROM frames WHERE session_id = ? AND "
                       "direction = 'proxy' AND kind = 'lifecycle' AND method IN "
                       "('llm_request', 'llm_response') ORDER BY seq", [sid]).fetchall()
    frames = [Frame(*x) for x in rows]
    if any(f.raw is None and f.blob_offset is not None for f in frames):
        resolve_blobs(frames, db_path)
    out: dict[int, dict[str, Any]] = {}
    for f in frames:
        try:
            ev = orjson.loads(bytes(f.raw or b"{}"))
        except orjson.JSONDecodeError:
            continue
        if isinstance(ev, dict) and isinstance(ev.get("n"), int):
            side = "request" if f.method == "llm_request" else "response"
            out.setdefault(ev["n"], {})[side] = ev
    return out


def calls(ws: Any, sid: str, db_path: str, call: int | None = None) -> dict[str, Any]:
    """The session's model calls ({calls: [...]}); with `call`, that one with its bodies and
    prompt diff, and its attempts (a retry is another exchange of the same call)."""
    rows = _rows(ws, sid)
    if call is None:
        return {"calls": rows}
    return next(details(ws, sid, db_path, [call], rows=rows))


def details(ws: Any, sid: str, db_path: str, numbers: list[int], chunk_times: bool = False,
            rows: list[dict[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
    """`calls(..., call=n)` for each n of `numbers`, the exchanges read once. `chunk_times`:
    each attempt also has its answer's pieces as received ([ms since the request, bytes], ...)
    and the names of the headers left out as secrets."""
    rows = _rows(ws, sid) if rows is None else rows
    index = {r["call"]: i for i, r in enumerate(rows)}
    for call in numbers:
        if call not in index:
            raise ValueError(f"call={call} is not a model call of this session")
    ex = _exchanges(ws.con, sid, db_path)
    for call in numbers:
        yield _detail(rows, index[call], ex, chunk_times)


def _rows(ws: Any, sid: str) -> list[dict[str, Any]]:
    cur = ws.con.execute("SELECT * FROM llm_calls WHERE session_id = ? ORDER BY call", [sid])
    cols = [d[0] for d in cur.description]
    rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    if any(r["turn"] is None for r in rows):
        # a protocol without steps (ACP): the call belongs to the turn begun last before it
        starts = ws.con.execute("SELECT seq, turn FROM turns WHERE session_id = ? AND turn IS "
                                "NOT NULL ORDER BY seq", [sid]).fetchall()
        for r in rows:
            if r["turn"] is None:
                r["turn"] = next((t for seq, t in reversed(starts) if seq <= r["seq"]), None)
    return rows


def _detail(rows: list[dict[str, Any]], at: int, ex: dict[int, dict[str, Any]],
            chunk_times: bool) -> dict[str, Any]:
    row = rows[at]

    def request_body(r: dict[str, Any]) -> str | None:
        text, b64 = _body(ex.get(r["last_exchange"], {}).get("request", {}), "request")
        return None if b64 else text

    attempts = []
    for n in range(row["first_exchange"], row["last_exchange"] + 1):
        req, res = ex.get(n, {}).get("request", {}), ex.get(n, {}).get("response", {})
        qb, qb64 = _body(req, "request")
        ab, ab64 = _body(res, "response")
        attempts.append({
            "n": n, "method": req.get("method"), "path": req.get("path"),
            "upstream": req.get("upstream"), "request_headers": req.get("headers"),
            "request_body": qb, "request_base64": qb64,
            "status": res.get("status"), "reason": res.get("reason"),
            "response_headers": res.get("headers"), "chunks": len(res.get("chunks") or []),
            "response_body": ab, "response_base64": ab64, "error": res.get("error"),
            "first_byte_ms": res.get("first_byte_ms"), "duration_ms": res.get("duration_ms"),
            **({"chunk_times": res.get("chunks") or [],
                "request_secret_headers": req.get("secret_headers") or [],
                "response_secret_headers": res.get("secret_headers") or []}
               if chunk_times else {})})
    before = _messages(request_body(rows[at - 1])) if at > 0 else None
    diff = prompt_diff(before, _messages(request_body(row)))
    return {"call": row, "attempts": attempts, "prompt_diff": diff,
            "previous": rows[at - 1]["call"] if at > 0 else None}
