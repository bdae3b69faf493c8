"""A model on loopback: recorded answers served, one per request, to an agent whose LLM provider
speaks OpenAI's chat-completions API (streamed as server-sent events). The standard library
only; it listens on 127.0.0.1 at a random port and answers only requests under its random path
token that carry its random key, so nothing but the scratch run it was made for reaches it.

Each answer is a JSON object (what `--write-llm-script` writes):

    {"where": "turn 1, step 2", "stream": [CHUNK, ...]}       # 200, one SSE event per chunk
    {"where": ..., "stream": [...], "stream_error": "text"}   # then an SSE error event
    {"where": ..., "status": 503, "message": "text"}          # an HTTP error, body text/plain

Requests beyond the answers get `exhausted(n)` (the next call's number) as a 400: the agent
fails its prompt with that message rather than wait. Error answers say `x-should-retry: false`
so the client library does not retry on its own: each request is one attempt of the agent.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_PATH = "/chat/completions"


class LoopbackModel:
    def __init__(self, exhausted: Callable[[int], str]):
        self.token = secrets.token_hex(16)
        self.key = "wire-replay-" + secrets.token_hex(16)
        self.exhausted = exhausted
        self._answers: list[dict[str, Any]] = []
        self._next = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/{self.token}/v1"

    def serve(self, answers: Sequence[dict[str, Any]]) -> None:
        """Answer the next requests with `answers`, from the first (one run of the agent)."""
        with self._lock:
            self._answers = list(answers)
            self._next = 0

    @property
    def served(self) -> int:
        """How many requests asked for an answer since `serve`."""
        return self._next

    def start(self) -> str:
        if self._server is None:
            model = self

            class Handler(_Handler):
                owner = model

            self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            self._server.daemon_threads = True
            self._thread = threading.Thread(target=self._server.serve_forever,
                                            name="wire-replay-llm", daemon=True)
            self._thread.start()
        return self.base_url

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _take(self) -> tuple[int, dict[str, Any] | None]:
        with self._lock:
            n = self._next
            self._next += 1
            return n, (self._answers[n] if n < len(self._answers) else None)


class _Handler(BaseHTTPRequestHandler):
    owner: LoopbackModel
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # the agent's stderr and the replay's output are not the place

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._drain()
        self._plain(404, "not found")

    def do_POST(self) -> None:  # noqa: N802
        self._drain()
        own = self.owner
        if self.path.split("?", 1)[0] != f"/{own.token}/v1{CHAT_PATH}":
            self._plain(404, "not found")
            return
        if self.headers.get("Authorization") != f"Bearer {own.key}":
            self._plain(401, "not this replay's key")
            return
        n, answer = own._take()
        if answer is None:
            self._plain(400, own.exhausted(len(own._answers) + 1))
            return
        if "status" in answer:
            self._plain(int(answer["status"]), str(answer.get("message") or ""))
            return
        body = b"".join(b"data: " + json.dumps(c, ensure_ascii=False).encode("utf-8") + b"\n\n"
                        for c in answer.get("stream") or [])
        if answer.get("stream_error") is not None:
            body += b"data: " + json.dumps({"error": {"message": answer["stream_error"]}},
                                           ensure_ascii=False).encode("utf-8") + b"\n\n"
        body += b"data: [DONE]\n\n"
        self._send(200, "text/event-stream; charset=utf-8", body)

    def _drain(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 16))
            if not chunk:
                break
            length -= len(chunk)

    def _plain(self, status: int, text: str) -> None:
        self._send(status, "text/plain; charset=utf-8", text.encode("utf-8"),
                   {"x-should-retry": "false"} if status >= 400 else {})

    def _send(self, status: int, ctype: str, body: bytes,
              headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the agent went away: its replay reports that
        self.close_connection = True
