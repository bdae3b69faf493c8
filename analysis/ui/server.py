"""The HTTP side of `wire-ui`: the standard library's ThreadingHTTPServer on 127.0.0.1.

Why no web framework: the app is a page, three static assets and a handful of JSON endpoints
on loopback for one user; the standard library does that with no dependency to install, audit
or keep compatible, and a framework's routing, templating and async would buy nothing here.

Safety: bound to loopback only; every request needs the random token (from the URL the command
prints, then a cookie; compared in constant time); the Host header must name the loopback
address and our port (a DNS-rebinding page cannot pass); GET only but for the one POST that
starts a fork (forkpost: JSON body, same origin, same checks); what comes from recordings
leaves as JSON and is put in the page as text by the script (textContent, never innerHTML);
a Content-Security-Policy lets the page load its own script and style only.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from typing import Any

import orjson

from wire_recorder.recorder.errors import UserError
from wire_recorder.recorder.visible import json_visible

from . import closing
from .data import Catalog

ASSETS = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8",
          "index.html": "text/html; charset=utf-8"}
COOKIE = "wire_ui"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def asset(name: str) -> bytes:
    return files(__package__).joinpath("assets", name).read_bytes()


# a burst of requests (a page opening many frames, 200 clients at once) waits in the listen
# queue instead of being refused (the default queue holds 5)
BACKLOG = 256
# requests answered at once; the rest wait their turn (each may hold a DuckDB connection and
# its memory, and two cores serve no more than a few at a time anyway)
BUSY = 4
# the largest number a query parameter may be (offsets, counts, seqs: far below 2**63)
PARAM_MAX = 2**53


class UiServer(ThreadingHTTPServer):
    daemon_threads = True
    forks: Any = None  # forkjob.Forks: "answer differently and continue" (the only POST)
    allow_reuse_address = False
    request_queue_size = BACKLOG

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):  # the browser went away: not news
            return
        if closing.closed():  # a request cut off by wire-ui closing (closing.py)
            return
        super().handle_error(request, client_address)

    def __init__(self, catalog: Catalog, port: int = 0, token: str | None = None):
        self.catalog = catalog
        self.token = token or secrets.token_urlsafe(24)
        super().__init__(("127.0.0.1", port), Handler)
        self.port = self.server_address[1]
        self._rebuilding = threading.Lock()
        self.busy = threading.BoundedSemaphore(BUSY)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def refresh_async(self) -> None:
        """Rebuild the index in the background when files or live recordings came or went."""
        if not self._rebuilding.acquire(blocking=False):
            return

        def run() -> None:
            try:
                with closing.quietly():  # wire-ui closing cuts it short: nothing to say
                    if not self.catalog.ready or self.catalog.stale():
                        self.catalog.build()
                    # what the first session view needs (rich, the timeline), loaded while idle
                    from . import conversation  # noqa: F401
            finally:
                self._rebuilding.release()

        threading.Thread(target=run, daemon=True, name="wire-ui-index").start()


class Handler(BaseHTTPRequestHandler):
    server: UiServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        return  # quiet: the terminal shows the URL and nothing else

    def _send(self, code: int, body: bytes, ctype: str, extra: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", CSP)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            try:
                self.wfile.write(body)
            except ConnectionError:  # the browser went away (a page left): nothing to answer
                self.close_connection = True

    def _json(self, obj: Any, code: int = 200) -> None:
        # the same values with no raw control or bidi character (app.js shows them visibly)
        self._send(code, json_visible(orjson.dumps(obj, default=str,
                                                   option=orjson.OPT_NON_STR_KEYS)),
                   "application/json")

    def _deny(self, code: int, why: str) -> None:
        self._send(code, why.encode() + b"\n", "text/plain; charset=utf-8")

    def _host_ok(self) -> bool:
        host = (self.headers.get("Host") or "").strip().lower()
        return host in (f"127.0.0.1:{self.server.port}", f"localhost:{self.server.port}")

    def _token_ok(self, query: dict) -> tuple[bool, bool]:
        """(allowed, came in the URL)."""
        want = self.server.token.encode()
        given = (query.get("token") or [""])[0]
        if given and hmac.compare_digest(given.encode(), want):
            return True, True
        for part in (self.headers.get("Cookie") or "").split(";"):
            k, _, v = part.strip().partition("=")
            if k == COOKIE and hmac.compare_digest(v.encode(), want):
                return True, False
        return False, False

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        from .forkpost import fork_post

        fork_post(self)

    def do_PUT(self) -> None:
        self._deny(405, "read-only")

    do_DELETE = do_PATCH = do_PUT

    def do_GET(self) -> None:
        if not self._host_ok():
            return self._deny(403, "wrong Host")
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        ok, in_url = self._token_ok(query)
        if not ok:
            return self._deny(403, "open the URL wire-ui printed (it carries the token)")
        if in_url and url.path == "/":  # keep the token out of the address bar and history from here on
            cookie = f"{COOKIE}={self.server.token}; Path=/; HttpOnly; SameSite=Strict"
            return self._send(303, b"", "text/plain", {"Location": "/" + (
                "#" + url.fragment if url.fragment else ""), "Set-Cookie": cookie})
        path = url.path
        if path in ("/", "/index.html"):
            return self._send(200, asset("index.html"), ASSETS["index.html"])
        if path.startswith("/assets/"):
            name = path[len("/assets/"):]
            if name not in ASSETS:
                return self._deny(404, "no such asset")
            return self._send(200, asset(name), ASSETS[name])
        if path.startswith("/api/"):
            with self.server.busy, closing.quietly():
                try:
                    return self._api(path[len("/api/"):], {k: v[-1] for k, v in query.items()})
                except BadParam as e:
                    return self._json({"error": str(e)}, 400)
                except KeyError:
                    return self._json({"error": "no such session (reload the index)"}, 404)
                except (UserError, ValueError, IndexError) as e:
                    msg = e.one_line() if isinstance(e, UserError) else str(e)
                    return self._json({"error": msg}, 400)
        return self._deny(404, "not found")

    def _api(self, name: str, q: dict[str, str]) -> None:
        cat = self.server.catalog

        def num(key: str, default: int | None = None, lo: int = 0) -> int:
            return _number(q, key, default, lo)

        if name == "index":
            if q.get("refresh") or not cat.ready:
                self.server.refresh_async()
            return self._json(cat.page(
                q=q.get("q", ""), protocol=q.get("protocol", ""), tag=q.get("tag", ""),
                errors=q.get("errors") == "1", day_from=q.get("from", ""),
                day_to=q.get("to", ""), sort=q.get("sort", "started_at"),
                desc=q.get("desc", "1") == "1", offset=num("offset", 0),
                limit=num("limit", 100)))
        if name == "session":
            return self._json(cat.session(q["k"]))
        if name == "items":
            return self._json(cat.items(q["k"], num("from", 0), num("n", 2000)))
        if name == "frames":
            lo = num("seq", 1)
            return self._json({"frames": cat.frames(q["k"], lo, lo + num("n", 100, lo=1) - 1)})
        if name == "related":
            return self._json({"frames": cat.related(q["k"], num("seq"))})
        if name == "report":
            return self._json(cat.report(num("n", 0)))
        if name == "compare":  # two sessions side by side, as wire-diff compares them
            from .compare import compare_files

            ra, rb = cat.row(q["a"]), cat.row(q["b"])
            return self._json(compare_files((ra["source_file"], ra["session_id"]),
                                            (rb["source_file"], rb["session_id"])))
        if name == "llm":  # the model leg (wire-proxy --llm): calls; one call's bodies
            from . import llm

            r = cat.row(q["k"])
            with cat._open(r) as ws:
                return self._json(llm.calls(ws, r["session_id"], r["source_file"],
                                            num("call") if "call" in q else None))
        if name in ("forkable", "fork"):  # "answer differently and continue" (forkpost)
            from .forkpost import fork_get

            return self._json(fork_get(self.server, name, q))
        return self._json({"error": "no such endpoint"}, 404)


class BadParam(ValueError):
    """A query parameter that is not a number the API takes: answered 400."""


def _number(q: dict[str, str], key: str, default: int | None, lo: int) -> int:
    text = q.get(key)
    if text is None:
        if default is None:
            raise BadParam(f"{key} is missing")
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadParam(f"{key}={text[:40]!r} is not a whole number") from None
    if not lo <= value <= PARAM_MAX:
        raise BadParam(f"{key}={text[:40]!r} is out of range ({lo} to {PARAM_MAX})")
    return value


def serve(catalog: Catalog, port: int = 0, token: str | None = None) -> UiServer:
    """A server bound and ready (not yet serving: call serve_forever)."""
    return UiServer(catalog, port, token)
