"""The recorded model leg served again (a recording made with `wire-proxy --llm`): a loopback
model on 127.0.0.1 under a random path token that answers the agent's n-th request with the
recorded n-th answer, as recorded: its status, headers and body, an HTTP/1.1 chunked body in
the recorded chunks (same sizes, same bytes), and keeps each live request for the comparison
(llm_request_diff.py). An exchange whose model could not be reached is a connection closed
without an answer, as the agent saw it. A request past the recording gets a 400 that says so.
"""

from __future__ import annotations

import base64
import secrets
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# recomputed for the body served (the recorded ones describe the recorded framing)
FRAMING = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})


def body_of(event: dict[str, Any], prefix: str) -> bytes:
    if f"{prefix}_body" in event:
        return str(event[f"{prefix}_body"]).encode("utf-8")
    if f"{prefix}_body_b64" in event:
        return base64.b64decode(event[f"{prefix}_body_b64"])
    return b""


class RecordedModel:
    def __init__(self, exhausted: Callable[[int], str]):
        self.token = secrets.token_hex(16)
        self.exhausted = exhausted
        self._exchanges: list[dict[str, Any]] = []
        self.live: list[dict[str, Any]] = []  # {method, path, headers, body} per live request
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        # the recorded work dir -> the live one, in a whole body and in a stream's chunks
        self.map_body: Callable[[bytes], bytes] = lambda b: b
        self.map_chunks: Callable[[list[bytes]], list[bytes]] = lambda c: c

    @property
    def stand_in(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/{self.token}"

    def serve(self, exchanges: Sequence[dict[str, Any]]) -> None:
        """Answer the next requests with `exchanges` ({request, response} events), in order."""
        with self._lock:
            self._exchanges = list(exchanges)
            self.live = []

    def start(self) -> str:
        if self._server is None:
            model = self

            class Handler(_Handler):
                owner = model

            self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            self._server.daemon_threads = True
            self._thread = threading.Thread(target=self._server.serve_forever,
                                            name="wire-replay-llm-leg", daemon=True)
            self._thread.start()
        return self.stand_in

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _take(self, live: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        with self._lock:
            n = len(self.live)
            self.live.append(live)
            return n, (self._exchanges[n] if n < len(self._exchanges) else None)


class _Handler(BaseHTTPRequestHandler):
    owner: RecordedModel
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        own = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        prefix = "/" + own.token
        if self.path != prefix and not self.path.startswith((prefix + "/", prefix + "?")):
            self._plain(404, "not found")
            return
        n, ex = own._take({"method": self.command, "path": self.path[len(prefix):],
                           "headers": list(self.headers.items()), "body": body})
        if ex is None:
            self._plain(400, own.exhausted(n + 1))
            return
        res = ex.get("response") or {}
        if res.get("status") is None:  # the model was not reached: nor is it now
            self.close_connection = True
            return
        data = body_of(res, "response")
        chunked = bool(res.get("chunked"))
        head = [f"HTTP/1.1 {int(res['status'])} {res.get('reason') or ''}\r\n".encode("latin-1")]
        for k, v in res.get("headers") or []:
            if str(k).lower() not in FRAMING:
                head.append(f"{k}: {v}\r\n".encode("latin-1"))
        pieces: list[bytes] = []
        if chunked:
            pos = 0
            for _, size in res.get("chunks") or []:
                pieces.append(data[pos:pos + int(size)])
                pos += int(size)
            if pos < len(data):
                pieces.append(data[pos:])
            pieces = [p for p in own.map_chunks(pieces) if p]
        else:
            data = own.map_body(data)
        head.append(b"Transfer-Encoding: chunked\r\n" if chunked
                    else f"Content-Length: {len(data)}\r\n".encode())
        head.append(b"\r\n")
        try:
            self.wfile.write(b"".join(head))
            if self.command == "HEAD":
                return
            if not chunked:
                self.wfile.write(data)
                return
            for piece in pieces:  # as recorded: one write per chunk
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_PUT = do_PATCH = do_DELETE = do_GET = do_POST  # noqa: N815

    def _plain(self, status: int, text: str) -> None:
        body = text.encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("x-should-retry", "false")
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True
