"""The request handler of the model leg (recorder/llm_leg.py): one agent connection, forwarded
to the model over one upstream connection of its own."""

from __future__ import annotations

import http.client
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from .llm_leg import (
    HOP_HEADERS,
    READ_SIZE,
    UPSTREAM_TIMEOUT_S,
    body_fields,
    clean_headers,
    public_url,
)

if TYPE_CHECKING:
    from .llm_leg import ModelLeg


class Forward(BaseHTTPRequestHandler):
    owner: ModelLeg
    protocol_version = "HTTP/1.1"
    # a relay writes each chunk as it comes: Nagle's wait for the previous one's ACK (40 ms
    # against a delayed ACK) would be latency the leg adds
    disable_nagle_algorithm = True
    _conn: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # the agent's stderr is the client's: nothing of ours goes there

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self._forward()

    do_GET = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_POST  # noqa: N815

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _connect(self) -> http.client.HTTPConnection:
        from urllib.parse import urlsplit

        u = urlsplit(self.owner.upstream.base_url)
        if u.scheme == "https":
            import ssl

            return http.client.HTTPSConnection(u.hostname or "", u.port,
                                               timeout=UPSTREAM_TIMEOUT_S,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(u.hostname or "", u.port, timeout=UPSTREAM_TIMEOUT_S)

    def _forward(self) -> None:
        leg = self.owner
        prefix = "/" + leg.token
        path = self.path
        if path != prefix and not path.startswith((prefix + "/", prefix + "?")):
            self.send_error(404)
            return
        rest = path[len(prefix):]
        body = self._read_body()
        n = leg.next_n()
        try:
            self._exchange(leg, n, rest, body)
        except BaseException as e:
            # stored as failed, never left open for stop() to wait on
            leg.respond(n, status=None, error=f"not relayed: {type(e).__name__}: {e}")
            raise

    def _exchange(self, leg: ModelLeg, n: int, rest: str, body: bytes) -> None:
        """Exchange `n`: the request logged and sent on, the answer relayed and logged."""
        from urllib.parse import urlsplit

        up = urlsplit(leg.upstream.base_url)
        headers, secret = clean_headers(self.headers.items())
        leg.emit("llm_request", n=n, method=self.command, path=rest,
                 upstream=public_url(leg.upstream.base_url), dialect=leg.upstream.dialect,
                 headers=headers, secret_headers=secret, **body_fields("request", body))
        t0 = time.monotonic_ns()
        target = (up.path.rstrip("/") + rest) or "/"
        if up.query and "?" not in rest:
            target += "?" + up.query
        resp = None
        error = None
        for attempt in (0, 1):  # a kept connection the model closed meanwhile: one new one
            conn = self._conn
            fresh = conn is None
            if conn is None:
                conn = self._conn = self._connect()
            try:
                conn.putrequest(self.command, target, skip_host=True, skip_accept_encoding=True)
                conn.putheader("Host", up.netloc.rpartition("@")[2])
                for k, v in self.headers.items():
                    if k.lower() not in HOP_HEADERS:
                        conn.putheader(k, v)
                if body or self.command in ("POST", "PUT", "PATCH"):
                    if self.headers.get("Content-Length") is None:
                        conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body or None)
                resp = conn.getresponse()
                break
            except (OSError, Exception) as e:  # noqa: BLE001 - http.client raises many kinds
                conn.close()
                self._conn = None
                error = f"{type(e).__name__}: {e}"
                if fresh or attempt:
                    break
        if resp is None:
            # the agent sees what it would have seen itself: a connection that fails
            leg.respond(n, status=None, error=error,
                        duration_ms=(time.monotonic_ns() - t0) / 1e6)
            self.close_connection = True
            return
        self._relay(leg, n, t0, resp)

    def _relay(self, leg: ModelLeg, n: int, t0: int, resp: http.client.HTTPResponse) -> None:
        head = [f"HTTP/1.1 {resp.status} {resp.reason}\r\n".encode("latin-1")]
        for k, v in resp.msg.items():
            head.append(f"{k}: {v}\r\n".encode("latin-1"))
        head.append(b"\r\n")
        out = self.wfile
        chunked = bool(resp.chunked)
        chunks: list[list[float]] = []
        body = bytearray()
        error = None
        agent_gone = False
        first_byte = None
        try:
            out.write(b"".join(head))
        except OSError:
            agent_gone = True
        try:
            while True:
                data = resp.read1(READ_SIZE) if self.command != "HEAD" else b""
                if chunked:
                    while data and resp.chunk_left:  # the rest of this chunk first: one piece
                        more = resp.read1(resp.chunk_left)
                        if not more:
                            break
                        data += more
                if not data:
                    break
                now = time.monotonic_ns()
                if first_byte is None:
                    first_byte = (now - t0) / 1e6
                chunks.append([round((now - t0) / 1e6, 3), len(data)])
                body += data
                if not agent_gone:
                    try:
                        out.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                    except OSError:
                        agent_gone = True
            if chunked and not agent_gone:
                out.write(b"0\r\n\r\n")
        except Exception as e:  # noqa: BLE001 - the model broke off: so does the agent's answer
            error = f"{type(e).__name__}: {e}"
            self.close_connection = True
        leg.streamed(n)
        if resp.will_close or error is not None:
            self.close_connection = True
        if self.close_connection and self._conn is not None:
            self._conn.close()
            self._conn = None
        if agent_gone:
            self.close_connection = True
        headers, secret = clean_headers(resp.msg.items())
        data = bytes(body)
        from .llm_summary import summarize

        try:
            summary = summarize(leg.upstream.dialect, data, chunks,
                                resp.msg.get("Content-Type") or "")
        except Exception as e:  # noqa: BLE001 - a dialect this misreads is still stored raw
            summary = {"error": f"not summarized: {type(e).__name__}: {e}"}
        leg.respond(n, status=resp.status, reason=resp.reason, headers=headers,
                    secret_headers=secret, chunked=chunked, chunks=chunks,
                    first_byte_ms=first_byte, duration_ms=round((time.monotonic_ns() - t0) / 1e6, 3),
                    error=error, agent_gone=agent_gone, summary=summary,
                    **body_fields("response", data))
