"""wire-ui in a real headless Chromium: the index over several files and search, a session's
conversation with its frames behind a tool call, a live recording growing, and a replay report's
first divergence beside the recorded frame. One wire-ui and one browser for the module.

The screenshots land in $WIRE_UI_SHOTS when set (the author looks at them), else in tmp."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from tests.harness.analysis import find_chromium
from tests.harness.browser import Browser
from tests.harness.replay import SAMPLES, Agent, cli_json, scripts_with

BIN = Path(sys.executable).parent


def _chromium() -> str:
    exe = find_chromium()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing on CI (apt-get install -y chromium)")
        pytest.skip("chromium not installed")
    real = "/usr/lib/chromium/chromium"  # Debian's launcher script is not needed for a pipe
    return real if os.path.exists(real) else exe


class LiveProxy:
    """A real wire-proxy recording `cat` (it answers every frame with itself)."""

    def __init__(self, db: Path):
        self.p = subprocess.Popen([str(BIN / "wire-proxy"), "--db", str(db), "--name", "live-one",
                                   "--", "cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.n = 0

    def send(self) -> None:
        self.n += 1
        assert self.p.stdin and self.p.stdout
        frame = {"jsonrpc": "2.0", "id": self.n, "method": "ping", "params": {"n": self.n}}
        self.p.stdin.write(json.dumps(frame).encode() + b"\n")
        self.p.stdin.flush()
        assert self.p.stdout.readline()  # relayed back: it is in the spool

    def end(self) -> None:
        if self.p.stdin and not self.p.stdin.closed:
            self.p.stdin.close()
        self.p.wait(timeout=60)


@pytest.fixture(scope="module")
def app(kimi_exe, tmp_path_factory):
    d = tmp_path_factory.mktemp("ui")
    db = d / "three.db"
    imp = subprocess.run([str(BIN / "wire-import"), "-q", "--db", str(db),
                          *(str(SAMPLES / f"{n}.jsonl") for n in ("multi_step", "acp_tools", "mcp_time"))],
                         capture_output=True, text=True, timeout=120)
    assert imp.returncode == 0, imp.stderr
    # a changed agent: the replay diverges at the tool call's arguments
    with Agent("approve_shell", scripts_with("approve_shell", "echo hello", "echo bye"),
               tmp_root=d) as agent:
        code, report = cli_json([SAMPLES / "approve_shell.jsonl", "--frame-timeout", "30",
                                 "--live-llm", *agent.cli_args()])
    assert code == 1 and not report["ok"]
    rep = d / "approve_shell.replay.json"
    rep.write_text(json.dumps(report))
    live_dir = d / "live"
    live_dir.mkdir()
    live = LiveProxy(live_dir / "live.db")
    live.send()
    ui = subprocess.Popen([str(BIN / "wire-ui"), "--no-browser", str(db),
                           str(SAMPLES / "approve_shell.jsonl"), str(SAMPLES / "mcp_demo_2026.jsonl"),
                           str(live_dir), str(rep)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env={**os.environ, "XDG_CACHE_HOME": str(d / "cache")})
    try:
        assert ui.stdout
        url = ui.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "token=" in url, ui.stderr.read() if ui.stderr else ""
        shots = Path(os.environ.get("WIRE_UI_SHOTS") or d / "shots")
        shots.mkdir(parents=True, exist_ok=True)
        with Browser(_chromium(), d / "profile") as b:
            b.goto(url)
            yield {"b": b, "url": url, "live": live, "shots": shots}
    finally:
        live.end()
        ui.terminate()
        ui.wait(timeout=30)
        shutil.rmtree(d / "profile", ignore_errors=True)


def _open_session(b: Browser, name: str) -> None:
    b.eval("location.hash = ''")
    b.wait_for(f"document.querySelector('tr.row[data-key$={json.dumps('.' + name)}]')")
    b.eval(f"location.hash = '#s/' + encodeURIComponent(document.querySelector("
           f"'tr.row[data-key$={json.dumps('.' + name)}]').dataset.key)")
    b.wait_for(f"document.querySelector('#title') && document.querySelector('#title').innerText"
               f".startsWith({json.dumps(name)}) && document.querySelectorAll('.item').length")


def test_index_lists_every_file_and_search_finds_a_prompt(app):
    b = app["b"]
    b.wait_for("document.querySelectorAll('tr.row').length >= 6")
    names = b.eval("[...document.querySelectorAll('tr.row td:first-child a')].map(a => a.innerText)")
    # three sessions from the imported .db, two transcripts, the session being recorded
    assert sorted(names) == ["acp_tools", "approve_shell", "live-one", "mcp_demo_2026",
                             "mcp_time", "multi_step"]
    assert "live" in b.text("tr.row[data-key^='live.']")
    assert "replay report approve_shell.replay.json" in b.text("#reports")
    app["b"].screenshot(app["shots"] / "index.png")
    b.fill("#q", '"Run echo hello"')
    b.wait_for("document.querySelectorAll('tr.row').length === 1")
    assert b.text("tr.row td:first-child a") == "approve_shell"
    b.fill("#q", "")
    b.wait_for("document.querySelectorAll('tr.row').length >= 6")


def test_session_view_and_the_frames_behind_a_tool_call(app):
    b = app["b"]
    _open_session(b, "approve_shell")
    conv = b.text("#conv")
    assert "> prompt Run echo hello" in conv
    assert "assistant I'll run it." in conv.replace("assistantI", "assistant I")
    assert "✓ Shell" in conv and ": hello" in conv  # the tool's output
    assert "approval: approve" in conv
    assert b.eval("document.querySelectorAll('#tl').length") == 1
    b.eval("[...document.querySelectorAll('.item.line')].find(n => n.innerText.includes('tool Shell')).click()")
    b.wait_for("document.querySelectorAll('#insp .frame').length >= 2")
    heads = b.eval("[...document.querySelectorAll('#insp .frame .fh')].map(h => h.innerText)")
    assert any("ToolCall" in h and "agent → client" in h for h in heads), heads
    assert any("ToolResult" in h for h in heads), heads
    assert '"echo hello"' in b.text("#insp") or "echo hello" in b.text("#insp")
    b.screenshot(app["shots"] / "session.png")
    # an MCP call: the JSON-RPC request and its response, both directions
    _open_session(b, "mcp_demo_2026")
    assert "✓ add" in b.text("#conv")
    b.eval("[...document.querySelectorAll('.item.line')].find(n => n.innerText.includes('tool add')).click()")
    b.wait_for("document.querySelectorAll('#insp .frame').length >= 2")
    heads = b.eval("[...document.querySelectorAll('#insp .frame .fh')].map(h => h.innerText)")
    assert any("client → agent" in h and "request tools/call" in h for h in heads), heads
    assert any("agent → client" in h and "response" in h for h in heads), heads
    assert "2 + 3 = 5" in b.text("#insp")
    b.screenshot(app["shots"] / "mcp.png")
    # jump to a seq: the frame inspector opens there
    b.eval("document.querySelector('#jump').value = 3")
    b.click("#jumpgo")
    b.wait_for("document.querySelector('#insp .frame[data-seq=\"3\"]')")
    b.screenshot(app["shots"] / "inspector.png")


def test_a_live_recording_grows(app):
    b, live = app["b"], app["live"]
    b.eval("location.hash = ''")
    b.wait_for("document.querySelector(\"tr.row[data-key^='live.']\")")
    b.eval("location.hash = '#s/' + encodeURIComponent(document.querySelector(\"tr.row[data-key^='live.']\").dataset.key)")
    b.wait_for("document.querySelector('#livebadge') && document.querySelectorAll('.item').length")
    before = b.eval("document.querySelectorAll('.item').length")
    pings = b.eval("[...document.querySelectorAll('.item')].filter(n => n.innerText.includes('> ping')).length")
    live.send()
    live.send()
    b.wait_for(f"[...document.querySelectorAll('.item')].filter(n => n.innerText.includes('> ping')).length >= {pings + 2}")
    assert b.eval("document.querySelectorAll('.item').length") > before
    # `cat` echoes each request: no adapter claims the session, it is drawn as plain JSON-RPC
    texts = b.eval("[...document.querySelectorAll('.item')].map(n => n.innerText)")
    assert not [t for t in texts if t.rstrip().endswith("None")], texts
    assert sum("ping" in t for t in texts) >= 2 * sum("> ping" in t for t in texts), texts
    b.screenshot(app["shots"] / "live.png")
    live.end()
    b.wait_for("document.querySelector('#livebadge').innerText.includes('ended')", timeout=60)


def test_a_replay_report_shows_the_first_divergence_beside_the_recorded_frame(app):
    b = app["b"]
    b.eval("location.hash = '#r/0'")
    b.wait_for("document.querySelector('#div0')")
    first = b.text("#div0")
    assert first.startswith("first divergence") and "turn 1, step 1" in first
    recorded, live = b.text("#div0 .recorded pre"), b.text("#div0 .live-side pre")
    assert "echo hello" in recorded and "echo bye" not in recorded
    assert "echo bye" in live
    # the lines that differ are marked on both sides, the ones they share are not
    marked = b.eval("[...document.querySelectorAll('#div0 .sbs pre')].map(p => "
                    "[...p.querySelectorAll('.chg')].map(c => c.textContent))")
    assert any("echo hello" in c for c in marked[0]) and any("echo bye" in c for c in marked[1]), marked
    assert not any("echo bye" in c for c in marked[0])
    assert len(marked[0]) < len(recorded.splitlines())
    assert "open the recorded session" in b.text("#main")
    b.screenshot(app["shots"] / "replay.png")
    # the recorded frame itself, in the recording's frame inspector
    assert b.text("#div0 .recseq").strip() == "frame #8 in the recording"
    b.click("#div0 .recseq")
    b.wait_for("document.querySelector('#insp .frame.target[data-seq=\"8\"]')")
    target = b.text("#insp .frame.target")
    assert "ToolCall" in target and "echo hello" in target


def test_only_loopback_with_the_token_and_read_only(app):
    parts = urllib.parse.urlsplit(app["url"])
    token = urllib.parse.parse_qs(parts.query)["token"][0]

    def ask(method: str, path: str, host: str | None = None) -> int:
        c = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=30)
        c.putrequest(method, path, skip_host=True)
        c.putheader("Host", host or parts.netloc)
        c.endheaders()
        status = c.getresponse().status
        c.close()
        return status

    assert ask("GET", f"/api/index?token={token}") == 200
    assert ask("GET", "/api/index") == 403  # no token
    assert ask("GET", "/api/index?token=wrong") == 403
    assert ask("GET", f"/api/index?token={token}", host=f"evil.example:{parts.port}") == 403
    assert ask("POST", f"/api/index?token={token}") == 405
    assert ask("GET", f"/assets/../cli.py?token={token}") == 404
    assert ask("GET", f"/?token={token}") == 303  # the token becomes a cookie
    time.sleep(0)  # nothing to wait for: every answer above is final


def test_cli_manners(tmp_path):
    v = subprocess.run([str(BIN / "wire-ui"), "--version"], capture_output=True, text=True, timeout=60)
    assert v.returncode == 0 and v.stdout.startswith("wire-ui ")
    h = subprocess.run([str(BIN / "wire-ui"), "--help"], capture_output=True, text=True, timeout=60)
    assert h.returncode == 0 and "Examples" in h.stdout and "wire-ui session.db" in h.stdout
    bad = subprocess.run([str(BIN / "wire-ui"), "--no-browser", str(tmp_path / "nothing.db")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert bad.stderr.startswith("wire-ui: ") and "Traceback" not in bad.stderr
    empty = subprocess.run([str(BIN / "wire-ui"), "--no-browser"], capture_output=True, text=True,
                           timeout=60, env={**os.environ, "WIRE_RECORDER_HOME": str(tmp_path)})
    assert empty.returncode == 2 and "no recordings yet" in empty.stderr, empty.stderr


def test_the_index_cache_reads_only_changed_files(tmp_path, monkeypatch):
    """A second index build (a new wire-ui start) opens no unchanged file; a changed one is
    read again; a corrupt cache is discarded and everything is read."""
    from wire_recorder.analysis.ui import coldindex
    from wire_recorder.analysis.ui.data import Catalog
    from wire_recorder.recorder.store import open_store

    folder = tmp_path / "sessions"
    folder.mkdir()
    first = folder / "a.db"
    imp = subprocess.run([str(BIN / "wire-import"), "-q", "--db", str(first),
                          str(SAMPLES / "multi_step.jsonl")], capture_output=True, text=True,
                         timeout=120)
    assert imp.returncode == 0, imp.stderr
    for n in "bc":
        shutil.copy(first, folder / f"{n}.db")
    opened: list[str] = []  # files whose rows were read (the search text pass is apart)
    real = coldindex.read_files

    def counting(paths, what="rows"):
        if what == "rows":
            opened.extend(os.path.basename(str(s)) for s in paths)
        return real(paths, what)

    monkeypatch.setattr(coldindex, "read_files", counting)
    cache = tmp_path / "cache" / "ui-index.json"

    def build() -> Catalog:
        opened.clear()
        cat = Catalog([str(folder)], cache=str(cache))
        cat.build()
        return cat

    cold = build()
    assert sorted(opened) == ["a.db", "b.db", "c.db"] and len(cold.rows) == 3
    assert cache.stat().st_mode & 0o777 == 0o600
    warm = build()
    assert opened == [] and warm.files_read == 0
    assert sorted((r["source_file"], r["session_id"], r["turns"], r["_text"]) for r in warm.rows) \
        == sorted((r["source_file"], r["session_id"], r["turns"], r["_text"]) for r in cold.rows)
    st = open_store(str(folder / "b.db"))
    st.upsert_session({"session_id": "added-later", "name": "added later", "protocol": "wire",
                       "source": "proxy", "frame_count": 0})
    st.close()
    changed = build()
    assert opened == ["b.db"] and changed.files_read == 1
    assert "added later" in {r["name"] for r in changed.rows} and len(changed.rows) == 4
    cache.write_bytes(b'{"format": "wire-ui index cache 2", "files": {"x": 1}}')
    assert len(build().rows) == 4 and sorted(opened) == ["a.db", "b.db", "c.db"]


def test_a_folder_whose_only_session_is_still_being_recorded(tmp_path):
    """wire-proxy writes its spool before the loader has made the .db: such a folder is an input,
    not an error, and the other inputs are still read."""
    from wire_recorder.analysis.ui.cli import _check_inputs
    from wire_recorder.analysis.ui.data import Catalog

    live = tmp_path / "live"
    live.mkdir()
    (live / "s.db.20260101T000000-abcd.spool").write_bytes(b"")
    _check_inputs([str(live)])  # no NoRecordings
    cat = Catalog([str(live), str(SAMPLES / "approve_shell.jsonl")], cache=None)
    assert cat._paths() == [str(SAMPLES / "approve_shell.jsonl")] and cat.problems == []
    empty = tmp_path / "empty"
    empty.mkdir()
    cat = Catalog([str(empty)], cache=None)
    assert cat._paths() == [] and "without recordings" in cat.problems[0]


def test_batch_index_rows_stored_or_computed_agree_and_hostile_files_are_refused(tmp_path):
    """The cold index reads files a batch at a time (one catalog check for the batch): a file's
    stored summary and the views give the same row; a file whose frames or sessions is a view
    or a macro is refused before anything of it is read, the batch's good files are still read;
    the search text comes in its own pass; the worker process returns what this process does."""
    import duckdb

    from wire_recorder.analysis.summary import write_summaries
    from wire_recorder.analysis.ui import coldindex
    from wire_recorder.recorder.store import open_store

    plain = tmp_path / "plain.db"
    imp = subprocess.run([str(BIN / "wire-import"), "-q", "--db", str(plain),
                          str(SAMPLES / "multi_step.jsonl")], capture_output=True, text=True,
                         timeout=120)
    assert imp.returncode == 0, imp.stderr
    summed = tmp_path / "summed.db"  # with the summary the loader stores
    shutil.copy(plain, summed)
    st = open_store(str(summed))
    write_summaries(st.con)
    st.close()
    secret = tmp_path / "secret.txt"
    secret.write_text("do-not-read")
    for name, ddl in (("view", "CREATE VIEW frames AS SELECT * FROM read_text('{s}')"),
                      ("macro", "CREATE MACRO sessions() AS TABLE SELECT * FROM read_text('{s}')")):
        hostile = tmp_path / f"{name}.db"
        shutil.copy(plain, hostile)
        con = duckdb.connect(str(hostile))
        con.execute("DROP TABLE frames" if name == "view" else "DROP TABLE sessions")
        con.execute(ddl.format(s=secret))
        con.close()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all")
    files = [str(tmp_path / f"{n}.db") for n in ("plain", "view", "summed", "macro", "junk")]
    got = coldindex.read_files(files, "rows")
    assert sorted(got["rows"]) == [str(plain), str(summed)] and got["busy"] == []
    assert "frames is a view" in got["problems"][files[1]]
    assert "sessions is a macro" in got["problems"][files[3]]
    assert "not a DuckDB file" in got["problems"][str(junk)]
    assert not any("do-not-read" in str(v) for v in got.values())
    (a,), (b,) = got["rows"][str(plain)], got["rows"][str(summed)]
    raw = coldindex._read_files(files, "rows")["rows"]
    assert (raw[str(plain)][0]["stored"], raw[str(summed)][0]["stored"]) == (False, True)
    numbers = ("session_id", "name", "turns", "tokens", "tool_calls", "errors", "duration_ms")
    assert {k: a[k] for k in numbers} == {k: b[k] for k in numbers}
    assert a["turns"] >= 1 and a["tokens"] > 0
    assert a["_text"] is None
    text = coldindex.read_files(files, "text")
    assert "do the two steps" in text["text"][str(summed)][a["session_id"]].lower()
    workers = coldindex.Workers(1)
    try:
        assert workers.read(files, "rows") == orjson_roundtrip(got)
    finally:
        workers.close()


def test_search_text_takes_each_frame_s_strings_from_its_head_even_when_cut_there(monkeypatch):
    """Search text: every text/think/user_input string of a frame's first HEAD_CHARS
    characters, up to PIECE_CAP of them a frame, frames in seq order; a string the head cuts
    (also inside an escape) is taken up to the cut, not dropped."""
    import duckdb

    from wire_recorder.analysis.ui.coldindex import HEAD_CHARS, PIECE_CAP, text_sql, unescape

    long_text = "word " * (HEAD_CHARS // 5 + 100)
    # the head's cut falls between the backslash and the quote of an escaped quote
    escaped = "a" * (HEAD_CHARS - len('{"text":"') - 1) + '\\"tail'
    payloads = [
        (1, '{"type":"text","text":"first said"}'),
        (2, '{"type":"text","text":"' + long_text + '"}'),
        (3, '{"text":"' + escaped + '"}'),
        (4, '{"blob":"' + "x" * HEAD_CHARS + '","text":"beyond the head"}'),
        (5, '{"user_input":"last \\"quoted\\" prompt"}'),
    ]
    con = duckdb.connect()
    con.execute("CREATE TABLE f (session_id VARCHAR, seq BIGINT, direction VARCHAR, "
                "payload JSON)")
    con.executemany("INSERT INTO f VALUES ('s', ?, 'a2c', ?)", payloads)
    con.execute("INSERT INTO f VALUES ('s', 6, 'proxy', '{\"text\":\"not a frame\"}')")
    # another session in the same file, whose frames' seqs run past the first one's
    con.executemany("INSERT INTO f VALUES ('t', ?, 'c2a', ?)",
                    [(i, f'{{"text":"{chr(ord("a") + i)}"}}') for i in range(1, 40)])
    found = dict(con.execute(text_sql("f")).fetchall())
    said = found["s"]
    assert found["t"] == " ".join(chr(ord("a") + i) for i in range(1, 40))
    pieces = said.split(" ", 2)
    assert pieces[:2] == ["first", "said"]
    assert said == " ".join(["first said", long_text[:PIECE_CAP],
                             escaped[:PIECE_CAP], 'last \\"quoted\\" prompt'])
    assert "beyond the head" not in said and "not a frame" not in said
    assert unescape(said).endswith('last "quoted" prompt')
    from wire_recorder.analysis.ui import coldindex

    monkeypatch.setattr(coldindex, "TEXT_CAP", 7)  # the first frames with text, per session
    assert dict(con.execute(text_sql("f")).fetchall()) == {"s": "first s", "t": "b c d e"}


def orjson_roundtrip(obj):
    import orjson

    return orjson.loads(orjson.dumps(obj, default=str))


# -- where the time went: a real kimi session recorded through wire-proxy ------------------------

@pytest.fixture(scope="module")
def timed(kimi_recordings, tmp_path_factory):
    """wire-ui over one real kimi Wire session (approve_shell: a tool call behind an approval),
    recorded through wire-proxy, so its timings (kimi's start-up first) are real."""
    d = tmp_path_factory.mktemp("timed")
    db = kimi_recordings.get(["approve_shell"])["approve_shell"].copy_to(d, "timed")
    ui = subprocess.Popen([str(BIN / "wire-ui"), "--no-browser", str(db)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "XDG_CACHE_HOME": str(d / "cache")})
    try:
        assert ui.stdout
        url = ui.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), ui.stderr.read() if ui.stderr else ""
        shots = Path(os.environ.get("WIRE_UI_SHOTS") or d / "shots")
        shots.mkdir(parents=True, exist_ok=True)
        with Browser(_chromium(), d / "profile") as b:
            b.goto(url)
            b.wait_for("document.querySelector('tr.row')")
            key = b.eval("document.querySelector('tr.row').dataset.key")
            b.eval(f"location.hash = '#s/' + encodeURIComponent({json.dumps(key)})")
            b.wait_for("document.querySelector('#tl')")  # drawn in the same task as it is put
            yield {"b": b, "key": key, "shots": shots}
    finally:
        ui.terminate()
        ui.wait(timeout=30)
        shutil.rmtree(d / "profile", ignore_errors=True)


def test_time_went_timeline_zoomed_with_lanes_per_method_and_fine_ticks(timed):
    b = timed["b"]
    spans = b.eval(f"fetch('/api/session?k=' + encodeURIComponent({json.dumps(timed['key'])}))"
                   ".then(r => r.json()).then(d => d.spans)")
    lanes = json.loads(b.eval("document.querySelector('#tl').dataset.lanes"))
    # Wire has per-method lanes too: each request with the time to its answer
    assert "c2a initialize" in lanes and "c2a prompt" in lanes, lanes
    assert any(lane.startswith("a2c ") for lane in lanes), lanes  # the approval asked of the client
    init = [s for s in spans if s["lane"] == "c2a initialize"]
    assert init and init[0]["end_ms"] is not None and init[0]["status"] == "response"
    # kimi's start-up (before the first turn) is one labelled span when it is most of the session
    first = min(s["start_ms"] for s in spans if s["kind"] in ("turn", "step", "tool", "request"))
    end = max(s["end_ms"] or s["start_ms"] for s in spans)
    view = json.loads(b.eval("document.querySelector('#tl').dataset.view"))
    if first > 0.3 * end:
        label = b.text("#startup")
        assert label.startswith("start-up ") and label[9].isdigit(), label
        assert lanes[0] == "start-up"
        assert view[0] > 0.5 * first  # opened on the turns, not on the start-up
    else:
        assert not b.eval("document.querySelector('#startup')") and view[0] == 0
    b.screenshot(timed["shots"] / "timeline.png")
    # zoomed in around the turn, the axis labels get finer instead of repeating
    for _ in range(14):
        b.eval("(() => { const c = document.querySelector('#tl'), r = c.getBoundingClientRect();"
               " c.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + r.width * 0.6,"
               " clientY: r.top + 30, bubbles: true, cancelable: true})); })()")
    ticks = json.loads(b.eval("document.querySelector('#tl').dataset.ticks"))
    view2 = json.loads(b.eval("document.querySelector('#tl').dataset.view"))
    assert view2[1] - view2[0] < (view[1] - view[0]) / 10
    assert len(ticks) >= 3 and len(set(ticks)) == len(ticks), ticks
    b.screenshot(timed["shots"] / "timeline-zoomed.png")
    b.eval("document.querySelector('#tl').dispatchEvent(new MouseEvent('dblclick', {bubbles: true}))")
    assert json.loads(b.eval("document.querySelector('#tl').dataset.view")) == view


def test_time_went_tables_sort_by_duration_and_the_token_chart_has_a_key(timed):
    b = timed["b"]
    for table in ("#tooltable", "#reqtable"):
        assert b.eval(f"document.querySelectorAll('{table} tbody tr').length") >= 1, table
    n = b.eval("document.querySelectorAll('#reqtable tbody tr').length")
    assert n >= 3  # initialize, the prompt, the approval (and its wait)
    ms = "[...document.querySelectorAll('#reqtable tbody tr')].map(r => r.dataset.ms === '' ? -1 : Number(r.dataset.ms))"
    unsorted = b.eval(ms)
    b.click("#reqtable th[data-col=duration]")
    down = b.eval(ms)
    assert down == sorted(unsorted, reverse=True) and b.text("#reqtable th[data-col=duration]").endswith("▾")
    b.click("#reqtable th[data-col=duration]")
    assert b.eval(ms) == sorted(unsorted)
    b.click("#reqtable th[data-col=duration]")
    b.click("#tooltable th[data-col=duration]")
    assert "Shell" in b.text("#tooltable tbody tr")
    # the approval was asked while the Shell call ran: its wait is the call's wait
    waited = b.text("#tooltable tbody tr td[data-col=waited]")
    assert waited[:1].isdigit() and waited.endswith("s"), b.text("#tooltable")
    b.eval("document.querySelector('#reqtable').scrollIntoView()")
    b.screenshot(timed["shots"] / "tables-sorted.png")
    if b.eval("!!document.querySelector('#tok')"):
        swatches = b.eval("[...document.querySelectorAll('#toklegend .swatch')].map(s => s.style.backgroundColor)")
        assert len(swatches) == 5 and len(set(swatches)) == 5, swatches
        assert "output" in b.text("#toklegend") and "cache read" in b.text("#toklegend")
        steps = json.loads(b.eval("document.querySelector('#tok').dataset.steps"))
        assert steps and steps[0].startswith("t1"), steps
        b.eval("(() => { const c = document.querySelector('#tok'), r = c.getBoundingClientRect();"
               " c.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + 60, clientY: r.bottom - 20,"
               " bubbles: true})); })()")
        assert "total" in b.text("#tip") and "turn 1" in b.text("#tip")
        b.eval("document.querySelector('#tok').scrollIntoView()")
        b.screenshot(timed["shots"] / "tokens.png")


def test_time_went_links_name_the_session_not_the_position(timed):
    b = timed["b"]
    key = timed["key"]
    sid = key.split(".", 1)[1]
    assert len(key.split(".", 1)[0]) == 10 and not key.split(".", 1)[0].isdigit()
    # an older link by file position, and a bare session id, still open the session
    for link in ("0." + sid, sid):
        b.eval("location.hash = ''")
        b.wait_for("document.querySelector('tr.row')")
        b.eval(f"location.hash = '#s/' + encodeURIComponent({json.dumps(link)})")
        b.wait_for("document.querySelector('#title') && document.querySelector('#tl')")
        assert sid in b.text("#head")
