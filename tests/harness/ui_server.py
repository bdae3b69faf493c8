"""A real `wire-ui --no-browser` process for tests that talk to its HTTP API."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .proxy import BIN

Get = Callable[[str], tuple[int, bytes]]


@contextmanager
def running_ui(*paths: Path | str, cache: Path | str, timeout: float = 300) -> Iterator[
        tuple[Get, int, subprocess.Popen]]:
    """Start wire-ui over PATHS with its cache in CACHE; yield (get, port, process) once its
    index is built. get(path) -> (status, body), with the session token added."""
    proc = subprocess.Popen([str(BIN / "wire-ui"), "--no-browser", *map(str, paths)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "XDG_CACHE_HOME": str(cache)})
    try:
        assert proc.stdout
        url = urllib.parse.urlsplit(proc.stdout.readline().strip())
        token = urllib.parse.parse_qs(url.query)["token"][0]
        port = url.port
        assert port is not None, proc.stderr.read() if proc.stderr else ""

        def get(path: str) -> tuple[int, bytes]:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            c.request("GET", f"{path}{'&' if '?' in path else '?'}token={token}")
            r = c.getresponse()
            out = r.status, r.read()
            c.close()
            return out

        while not json.loads(get("/api/index")[1]).get("ready"):
            pass  # the index is built in the background; each answer says whether it is done
        yield get, port, proc
    finally:
        proc.terminate()
        proc.wait(timeout=60)
