"""The HTTP side of "answer differently and continue": `POST /api/fork` starts a fork
(forkjob), `GET /api/fork?job=` follows it, `GET /api/forkable?k=` lists where a session can be
forked.

The POST passes every check a GET does (Host, token; answers carry the CSP) and more, since it
starts a process: the body is JSON (a page on another site cannot send that without a CORS
preflight we never answer), an Origin header, when there, is ours, and the body is small.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import orjson

from wire_recorder.recorder.errors import UserError

from .forkjob import ForkRefused

BODY_MAX = 256 * 1024


def fork_get(server: Any, name: str, q: dict[str, str]) -> dict:
    forks = server.forks
    if name == "fork":
        if forks is None or q.get("job") not in forks.jobs:
            raise KeyError(q.get("job"))
        return forks.get(q["job"]).to_dict()
    from .forkable import forkable

    cat = server.catalog
    r = cat.row(q["k"])
    with cat._open(r) as ws:
        reqs = forkable(ws, r["session_id"], r.get("protocol"))
    how = forks.describe() if forks is not None else {
        "agent": None, "how": "this wire-ui cannot fork"}
    return {"requests": reqs} | how


def fork_post(h: Any) -> None:
    """Start a fork: {k: session key, n: the agent request (from 1), answer: a JSON object of
    the result's fields to change, or one word}. 202 with the job."""
    if not h._host_ok():
        return h._deny(403, "wrong Host")
    url = urllib.parse.urlsplit(h.path)
    ok, _ = h._token_ok(urllib.parse.parse_qs(url.query))
    if not ok:
        return h._deny(403, "open the URL wire-ui printed (it carries the token)")
    if url.path != "/api/fork":
        return h._deny(405, "read-only")
    origin = h.headers.get("Origin")
    if origin is not None and origin not in (f"http://127.0.0.1:{h.server.port}",
                                             f"http://localhost:{h.server.port}"):
        return h._deny(403, "wrong Origin")
    if (h.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
        return h._deny(415, "send JSON")
    try:
        size = int(h.headers.get("Content-Length") or "-1")
    except ValueError:
        size = -1
    if not 0 < size <= BODY_MAX:
        return h._deny(413, f"a body of 1 to {BODY_MAX} bytes")
    try:
        body = orjson.loads(h.rfile.read(size))
    except orjson.JSONDecodeError:
        return h._json({"error": "the body is not JSON"}, 400)
    if h.server.forks is None:
        return h._json({"error": "this wire-ui cannot fork"}, 409)
    k, n, answer = (body.get(x) for x in ("k", "n", "answer")) if isinstance(body, dict) else \
        (None, None, None)
    if not isinstance(k, str) or not isinstance(n, int) or isinstance(n, bool) or n < 1:
        return h._json({"error": "give k (a session) and n (its agent request, from 1)"}, 400)
    if isinstance(answer, dict) and answer:
        change = orjson.dumps(answer).decode()
    elif isinstance(answer, str) and answer.strip() and not answer.strip().startswith("{"):
        change = answer.strip()
    else:
        return h._json({"error": "answer: the fields to change (a JSON object) or one word"},
                       400)
    try:
        r = h.server.catalog.row(k)
        job = h.server.forks.start(r["source_file"], r["session_id"], n, change)
    except KeyError:
        return h._json({"error": "no such session (reload the index)"}, 404)
    except ForkRefused as e:
        return h._json({"error": str(e)}, 409)
    except UserError as e:
        return h._json({"error": e.one_line()}, 400)
    return h._json(job.to_dict(), 202)
