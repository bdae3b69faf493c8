"""`wire-show --html`: wire-ui's session view in one self-contained file, rendered by a real
headless Chromium with the same conversation as the app, and an index page for several."""

from __future__ import annotations

import json
import os
import re
import struct

import pytest

from tests.harness.analysis import SUBAGENT_ERRORS, find_chromium, run_cli
from tests.harness.browser import Browser
from wire_recorder.analysis.export import _frames, _session_row
from wire_recorder.analysis.html_report import write_html
from wire_recorder.analysis.sources import open_workspace
from wire_recorder.analysis.ui.conversation import conversation


@pytest.fixture(scope="module")
def report(recorded, tmp_path_factory):
    run = recorded[1][SUBAGENT_ERRORS.name]
    out = tmp_path_factory.mktemp("html") / "report.html"
    p = run_cli("wire-show", run.db, "--html", str(out))
    assert p.returncode == 0, p.stderr
    return run, out, out.read_text(encoding="utf-8")


def _data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="wr-data">(.*?)</script>', page, re.S)
    assert m, "no embedded data"
    return json.loads(m.group(1))


def test_report_is_self_contained_and_complete(report):
    run, _, page = report
    # nothing to fetch: no external script, style, image or URL of any kind
    assert not re.search(r"<link|<img|src=|@import|url\(", page, re.I)
    assert not re.search(r"https?://", page)
    assert "Content-Security-Policy" in page and "script-src 'sha256-" in page
    data = _data(page)
    with open_workspace([run.db]) as ws:
        sid = ws.resolve_session(None)
        n = {v: ws.con.execute(f"select count(*) from {v}").fetchone()[0]
             for v in ("turns", "steps", "tool_calls", "requests", "errors", "frames")}
        items = conversation(_session_row(ws, sid), _frames(ws, sid))
    s = data["sessions"][sid]
    assert data["only"] == sid
    assert {k: s["counts"][k] for k in ("turns", "steps", "tool_calls", "errors", "frames")} == \
        {k: n[k] for k in ("turns", "steps", "tool_calls", "errors", "frames")}
    assert s["counts"]["client_requests"] == n["requests"]
    assert len(s["frames"]) == n["frames"]
    assert s["items"] == json.loads(json.dumps(items))  # the app's conversation, item for item
    assert sum(1 for sp in s["spans"] if sp["kind"] == "tool") == n["tool_calls"]


def _png_size(path) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    exe = find_chromium()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing on CI (apt-get install -y chromium)")
        pytest.skip("chromium not installed")
    real = "/usr/lib/chromium/chromium"
    with Browser(real if os.path.exists(real) else exe, tmp_path_factory.mktemp("profile")) as b:
        yield b


def test_report_renders_offline_in_headless_chromium(report, browser, tmp_path):
    run, html_path, page = report
    b = browser
    b.goto(html_path.resolve().as_uri())
    b.wait_for("document.querySelectorAll('#conv .item').length")
    sid = _data(page)["only"]
    items = _data(page)["sessions"][sid]["items"]
    assert b.eval("document.querySelectorAll('#conv .item').length") == len(items)
    conv = b.text("#conv")
    for it in items:  # every text and line of the conversation is on the page, as text
        want = it["x"] if "x" in it else "".join(g[0] for g in it["g"])
        assert want.split("\n")[0].strip()[:60] in conv
    assert b.eval("document.querySelectorAll('#tl').length") == 1
    # a tool call's frames, from the frames embedded in the file
    b.eval("[...document.querySelectorAll('.item.line')].find(n => n.innerText.includes('tool ')).click()")
    b.wait_for("document.querySelectorAll('#insp .frame').length >= 2")
    png = b.screenshot(tmp_path / "shot.png")
    assert _png_size(png) == (1400, 1000)
    # a blank page compresses to a few KB; bars, charts and text do not
    assert png.stat().st_size > 30_000


def test_several_sessions_get_an_index_page(recorded, browser, tmp_path):
    folder, runs = recorded
    dbs = [runs[n].db for n in ("multi_step", "question")]
    out = tmp_path / "two.html"
    with open_workspace(dbs) as ws:
        sids = ws.session_ids()
        write_html(ws, sids, str(out))
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    b = browser
    b.goto(out.resolve().as_uri())
    b.wait_for("document.querySelectorAll('tr.row').length === 2")
    b.click("tr.row a")
    b.wait_for("document.querySelectorAll('#conv .item').length")
    assert "> prompt" in b.text("#conv")
