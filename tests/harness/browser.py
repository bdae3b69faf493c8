"""A headless Chromium driven over the DevTools protocol, with no dependency beyond the browser.

Chromium's `--remote-debugging-pipe` reads protocol messages (JSON, each ended by a NUL byte)
on its fd 3 and writes its answers and events on fd 4. A small bash prefix (dash takes one-digit descriptors only) puts our pipe ends
there (`3<&R 4>&W`), so nothing depends on which descriptors the test process happens to have
free. One browser per test module; one page (target) per Browser, attached in flat mode.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any


class BrowserError(Exception):
    pass


def _high(fd: int) -> int:
    import fcntl

    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


class Browser:
    def __init__(self, exe: str, profile: Path, width: int = 1400, height: int = 1000):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # the child's ends away from 3 and 4, which the shell prefix is about to fill
        to_chrome_r, from_chrome_w = (_high(fd) for fd in (to_chrome_r, from_chrome_w))
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run",
                "--disable-extensions", "--disable-dev-shm-usage", "--remote-debugging-pipe",
                f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"]
        shell = f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w} {to_chrome_r}<&- {from_chrome_w}>&-'
        self.proc = subprocess.Popen(["/bin/bash", "-c", shell, exe, *args],
                                     pass_fds=(to_chrome_r, from_chrome_w),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(profile, 'chromium.log'), 'ab') if os.path.isdir(profile) else subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next = 0
        self._answers: dict[int, dict] = {}
        self._cv = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.page("Page.enable")
        self.page("Runtime.enable")
        self.page("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cv:
                    self._closed = True
                    self._cv.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                obj = json.loads(msg)
                if "id" in obj:
                    with self._cv:
                        self._answers[obj["id"]] = obj
                        self._cv.notify_all()

    def call(self, method: str, session: str | None = None, timeout: float = 60, **params: Any) -> dict:
        with self._cv:
            self._next += 1
            mid = self._next
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cv:
            while mid not in self._answers:
                if self._closed:
                    raise BrowserError("the browser went away")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BrowserError(f"no answer to {method} in {timeout} s")
                self._cv.wait(left)
            ans = self._answers.pop(mid)
        if "error" in ans:
            raise BrowserError(f"{method}: {ans['error']}")
        return ans.get("result", {})

    def page(self, method: str, **params: Any) -> dict:
        return self.call(method, session=self.session, **params)

    # -- what tests use --------------------------------------------------------------------------
    def goto(self, url: str) -> None:
        self.page("Page.navigate", url=url)

    def eval(self, expression: str) -> Any:
        r = self.page("Runtime.evaluate", expression=expression, awaitPromise=True,
                      returnByValue=True)
        if "exceptionDetails" in r:
            raise BrowserError(f"{expression}: {r['exceptionDetails'].get('text')} "
                               f"{r['exceptionDetails'].get('exception', {}).get('description', '')}")
        return r.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        """Poll until `expression` is truthy (in JavaScript). Not a timing check: a generous
        bound."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.eval(f"!!({expression})")
            except BrowserError:
                last = None
            if last:
                return last
            time.sleep(0.1)
        raise BrowserError(f"still false after {timeout} s: {expression}")

    def text(self, selector: str) -> str:
        return self.eval(f"(document.querySelector({json.dumps(selector)}) || {{}}).innerText || ''")

    def click(self, selector: str) -> None:
        if not self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                         "if (!e) return false; e.click(); return true; })()"):
            raise BrowserError(f"nothing to click at {selector}")

    def fill(self, selector: str, value: str) -> None:
        """Set an input's value and fire `input`, as typing does."""
        self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                  f"e.value = {json.dumps(value)}; e.dispatchEvent(new Event('input')); }})()")

    def screenshot(self, path: Path) -> Path:
        data = self.page("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except BrowserError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
