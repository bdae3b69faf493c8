"""`wire-show --html out.html`: wire-ui's session view as one self-contained file.

The page is the web app's own page (`analysis/ui/assets`) with its style and script inline and
the data the app would fetch embedded as JSON (`<script type="application/json">`, never run):
one session opens on its view; several open on an index page that links to each. Nothing is
fetched (no URL, font or CDN), so the file opens offline, from a mail attachment or a CI
artifact. A Content-Security-Policy in the page lets its own script (by hash) run and nothing
else. Text from the recording is put in the page by the script as text, never as HTML, and the
JSON cannot end its element (every `<` is written `\\u003c`).

The frame inspector works from the frames embedded with each session, up to MAX_FRAMES of them
(a longer session's later frames are left out and the page says so).
"""

from __future__ import annotations

import base64
import hashlib
from importlib.resources import files

import orjson

from wire_recorder.recorder.errors import OutputError
from wire_recorder.recorder.paths import open_private
from wire_recorder.recorder.visible import json_visible

from .sources import Workspace

MAX_FRAMES = 20_000


def _asset(name: str) -> str:
    return files("wire_recorder.analysis.ui").joinpath("assets", name).read_text(encoding="utf-8")


def page_data(ws: Workspace, sids: list[str]) -> dict:
    """What the page shows: the index rows of `sids` and each session's view, items and frames."""
    from .export import _frames
    from .ui.conversation import conversation
    from .ui.data import frame_dicts, index_rows, session_data

    wanted = set(sids)
    index = [r for r in index_rows(ws) if r["session_id"] in wanted]
    for r in index:
        r["key"] = r["session_id"]
    sessions = {}
    for sid in sids:
        data, srow = session_data(ws, sid)
        frames = _frames(ws, sid)
        items = conversation(srow, frames)
        calls = ws.con.execute("SELECT seq, tool_call_id FROM tool_calls WHERE session_id = ? "
                               "AND tool_call_id IS NOT NULL ORDER BY seq", [sid]).fetchall()
        kept = frame_dicts(frames[:MAX_FRAMES], 1)
        sessions[sid] = data | {"key": sid, "live": False, "items": items, "frames": kept,
                                "frames_cut": max(0, len(frames) - MAX_FRAMES),
                                "calls": [[s, c] for s, c in calls]}
    return {"index": index, "sessions": sessions, "only": sids[0] if len(sids) == 1 else None}


def render_html(ws: Workspace, sids: list[str]) -> str:
    # no raw control or bidi character in the file either (the page shows them as app.js does)
    data = json_visible(orjson.dumps(page_data(ws, sids), default=str,
                                     option=orjson.OPT_NON_STR_KEYS)).decode().replace("<", "\\u003c")
    script = _asset("app.js")
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
           "img-src data:; base-uri 'none'; form-action 'none'")
    page = _asset("index.html")
    page = page.replace('<meta charset="utf-8">', '<meta charset="utf-8">\n'
                        f'<meta http-equiv="Content-Security-Policy" content="{csp}">')
    page = page.replace('<link rel="stylesheet" href="/assets/app.css">',
                        "<style>\n" + _asset("app.css") + "</style>")
    page = page.replace('<script src="/assets/app.js"></script>',
                        f'<script type="application/json" id="wr-data">{data}</script>\n'
                        f"<script>{script}</script>")
    return page.replace("<title>wire-ui</title>", "<title>wire-show</title>")


def write_html(ws: Workspace, sid: str | list[str], path: str) -> int:
    """The page of one session (its view) or several (an index page first) into `path`, a file
    only its owner reads (the page quotes the recording); returns its size in characters."""
    page = render_html(ws, [sid] if isinstance(sid, str) else list(sid))
    try:
        with open_private(path, "w") as f:
            f.write(page)
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror}") from None
    return len(page)
