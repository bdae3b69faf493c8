"""The HTML report: self-contained, the right bars, and rendered by a real headless browser."""

from __future__ import annotations

import os
import re
import struct
import subprocess

import pytest

from tests.harness.analysis import SUBAGENT_ERRORS, find_chromium, recorded, run_cli  # noqa: F401
from wire_recorder.analysis.sources import open_workspace


@pytest.fixture(scope="module")
def report(recorded, tmp_path_factory):  # noqa: F811 (the fixture imported above)
    run = recorded[1][SUBAGENT_ERRORS.name]
    out = tmp_path_factory.mktemp("html") / "report.html"
    p = run_cli("wire-show", run.db, "--html", str(out))
    assert p.returncode == 0, p.stderr
    return run, out, out.read_text(encoding="utf-8")


def test_report_is_self_contained_and_complete(report):
    run, _, page = report
    # nothing to fetch: no scripts, links, images or URLs (the SVG namespace is never fetched)
    assert not re.search(r"<script|<link|<img|src=|href=|@import|url\(", page, re.I)
    assert set(re.findall(r"https?://[^\s\"']+", page)) <= {"http://www.w3.org/2000/svg"}
    with open_workspace([run.db]) as ws:
        n = {v: ws.con.execute(f"select count(*) from {v}").fetchone()[0]
             for v in ("turns", "steps", "tool_calls", "requests")}
        tok = ws.con.execute("select sum(total_tokens) from turns").fetchone()[0]
        errors = ws.con.execute("select count(*) from errors").fetchone()[0]
    assert page.count('class="turn"') == n["turns"]
    assert page.count('class="step"') == n["steps"]
    assert page.count('class="tool"') == n["tool_calls"]
    assert page.count('class="wait"') == n["requests"]
    assert page.count('class="approval"') == 1  # the subagent's approved Shell call
    assert f"<b>{tok:,}</b><span>tokens</span>" in page
    assert f"<b>{errors}</b><span>errors</span>" in page  # the card counts the table's rows


def _png_size(path) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def test_report_renders_in_headless_chromium(report, tmp_path):
    exe = find_chromium()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing on CI (apt-get install -y chromium)")
        pytest.skip("chromium not installed")
    _, html_path, _ = report
    base = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,900"]
    url = html_path.resolve().as_uri()
    dom = subprocess.run(base + ["--dump-dom", url], capture_output=True, text=True, timeout=90)
    assert dom.returncode == 0, dom.stderr[-500:]
    assert "<svg" in dom.stdout and 'class="tool"' in dom.stdout and "Tokens per step" in dom.stdout
    png = tmp_path / "shot.png"
    shot = subprocess.run(base + [f"--screenshot={png}", url], capture_output=True, text=True,
                          timeout=90)
    assert shot.returncode == 0 and png.exists(), shot.stderr[-500:]
    assert _png_size(png) == (1200, 900)
    # a blank page compresses to a few KB; bars, charts and text do not
    assert png.stat().st_size > 30_000
