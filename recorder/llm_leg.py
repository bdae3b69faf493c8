"""The model leg of `wire-proxy --llm`: a loopback HTTP endpoint between the agent and its model.

The agent is pointed at `http://127.0.0.1:PORT/TOKEN` (recorder/llm_upstream.py says how, for
each agent); every request under the token is forwarded to the real model (http or https) and
its answer streamed back as it comes: the status line and headers as the model sent them, the
body byte for byte, and an HTTP/1.1 chunked body chunk for chunk (a chunk is passed on once it
is whole: an SSE event is one chunk). One upstream connection per agent connection, kept alive
as long as both sides keep theirs.

Each exchange becomes two lifecycle events of the session (the spool's `event`, so they share
the frames' redaction, blob store and recovery):
  llm_request   {n, method, path, upstream, headers, request_body | request_body_b64, bytes}
  llm_response  {n, status, reason, headers, chunks [[ms, bytes], ...], first_byte_ms,
                 duration_ms, response_body | response_body_b64, bytes, summary, error}
`llm_request` is written when the request arrives (so it sits after the frames that led to it,
which is how it is tied to its turn and step), `llm_response` when the answer has ended.
Secrets never reach the spool: the headers that carry credentials are left out (their names are
kept in `secret_headers`), and the model's URL is stored without user info or query.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .llm_upstream import Upstream

SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key",
                            "cookie", "set-cookie", "x-goog-api-key", "anthropic-api-key"})
# not passed on to the model as the agent sent them: Host is the model's, a chunked request body
# goes on with its length (Connection is passed on: each agent connection has its own upstream)
HOP_HEADERS = frozenset({"host", "proxy-connection", "transfer-encoding", "upgrade"})
READ_SIZE = 1 << 16
UPSTREAM_TIMEOUT_S = 600.0  # a model can think for minutes before its first byte
# At the end, how long an answer still streaming from the model (the agent has exited) may go on
# before its exchange is stored as cut; an answer past its last byte is always waited for.
STOP_STREAMING_S = 10.0


def clean_headers(items) -> tuple[list[list[str]], list[str]]:
    """(headers without credentials, the names left out)."""
    kept, secret = [], []
    for k, v in items:
        if k.lower() in SECRET_HEADERS:
            secret.append(k)
        else:
            kept.append([k, v])
    return kept, secret


def body_fields(prefix: str, data: bytes) -> dict[str, Any]:
    """The body (text, else base64), its size and digest (the loader keeps the body itself in
    the raw row only: the digest is what the llm_calls view compares)."""
    import hashlib

    digest = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    try:
        return {f"{prefix}_body": data.decode("utf-8"), **digest}
    except UnicodeDecodeError:
        import base64

        return {f"{prefix}_body_b64": base64.b64encode(data).decode("ascii"), **digest}


def public_url(url: str) -> str:
    """`url` without user info, query or fragment (where a key might be)."""
    from urllib.parse import urlsplit, urlunsplit

    u = urlsplit(url)
    host = u.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{u.port}" if u.port else "")
    return urlunsplit((u.scheme, netloc, u.path, "", ""))


class ModelLeg:
    """Made before the agent is spawned (its address goes into the agent's environment);
    `start` once it runs (requests wait in the socket's backlog until then)."""

    def __init__(self, upstream: Upstream):
        self.upstream = upstream
        self.token = os.urandom(16).hex()
        # bound now: a request that comes before the server thread runs waits in the backlog
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self._sink: Callable[..., None] | None = None
        self._n = 0
        self._lock: Any = None
        self._server: Any = None
        self.exchanges = 0
        # exchanges whose response is not stored yet: n -> still streaming from the model
        self._open: dict[int, bool] = {}
        self.cut = 0  # answers stored as cut at the end...
        self.late = 0  # ...and their handlers' own ends, which came after and were left out

    @property
    def stand_in(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.token}"

    def start(self, sink: Callable[..., None] | None) -> None:
        """Serve from now on; events go to `sink(name, **data)` (None: relay only)."""
        import threading
        from http.server import ThreadingHTTPServer

        from .llm_forward import Forward

        self._lock = threading.Condition()
        leg = self

        class Handler(Forward):
            owner = leg

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address) -> None:
                pass  # an agent connection reset: nothing for the client's stderr

        server = Server(("127.0.0.1", 0), Handler, bind_and_activate=False)
        server.socket.close()
        server.socket = self.sock
        server.server_address = self.sock.getsockname()
        server.daemon_threads = True
        self._server = server
        self._sink = sink
        up = self.upstream
        self.emit("llm_leg", upstream=public_url(up.base_url), dialect=up.dialect,
                  provider_type=up.provider_type, model=up.model, env_var=up.env_var,
                  **getattr(up, "extra", {}))
        threading.Thread(target=server.serve_forever, name="llm-leg", daemon=True).start()

    def emit(self, name: str, **data: Any) -> None:
        sink = self._sink
        if sink is None:
            return
        try:
            sink(name, **data)
        except Exception:  # noqa: BLE001 - recording trouble never breaks the model's answer
            pass

    def next_n(self) -> int:
        with self._lock:
            self._n += 1
            self.exchanges = self._n
            self._open[self._n] = True
            return self._n

    def streamed(self, n: int) -> None:
        """The model's answer to `n` is over: what is left is CPU work, always waited for."""
        with self._lock:
            if n in self._open:
                self._open[n] = False

    def respond(self, n: int, **data: Any) -> None:
        """Store the `llm_response` of exchange `n`, once: not after `stop` stored it as cut."""
        with self._lock:
            if self._open.pop(n, None) is None:
                self.late += 1
                return
        try:
            self.emit("llm_response", n=n, **data)
        finally:
            with self._lock:
                self._lock.notify_all()

    def stop(self, streaming_s: float = STOP_STREAMING_S) -> None:
        """Stop serving. The exchanges still open get their response stored before this returns
        (the spool closes next): an answer past its last byte is waited for, one the model is
        still streaming for up to `streaming_s`, then stored as cut."""
        import time

        server, self._server = self._server, None
        if server is None:
            self.sock.close()
        else:
            server.shutdown()  # no new connections; the open ones go on
            deadline = time.monotonic() + streaming_s
            with self._lock:
                while self._open:
                    left = deadline - time.monotonic()
                    if left <= 0 and all(self._open.values()):
                        break
                    self._lock.wait(max(left, 0.05))
                cut = sorted(self._open)
                self._open.clear()
            for n in cut:
                self.cut += 1
                self.emit("llm_response", n=n, status=None, cut=True,
                          error="cut: wire-proxy ended (the agent had exited) while the model "
                                "was still streaming this answer")
            server.server_close()
        cleanup = getattr(self.upstream, "cleanup", None)
        if cleanup is not None:
            cleanup()  # Kimi Code's scratch data dir (recorder/llm_upstream_kimicode.py)


def prepare(command: list[str], environ) -> tuple[ModelLeg | None, dict[str, str] | None, str]:
    """(the leg, the agent's environment, a note) for `wire-proxy --llm`; without a leg (an
    agent or provider this cannot point elsewhere) the agent runs as it would have, and the
    note says why the model leg is not recorded."""
    from .llm_upstream import NoLeg, find

    try:
        upstream = find(command, environ)
    except NoLeg as e:
        return None, None, f"--llm: the model leg is not recorded: {e}"
    leg = ModelLeg(upstream)
    try:
        env = upstream.agent_env(environ, leg.stand_in)
    except OSError as e:  # Kimi Code's scratch data dir could not be made
        leg.stop()
        return None, None, f"--llm: the model leg is not recorded: {e}"
    return (leg, env,
            f"--llm: the agent's model ({public_url(upstream.base_url)}) is reached through "
            f"{leg.stand_in.rsplit('/', 1)[0]}/… ({getattr(upstream, 'how', upstream.env_var)})")
