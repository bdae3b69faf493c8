"""wire-ui's "answer differently and continue" in headless Chromium: the recorded approve session
forked at its ApprovalRequest with `reject`, run by the UI server (wire-replay --fork-at, with
the agent command given to `wire-ui --agent`) against the real kimi, its branch stored in the
UI's branches file with its links to the parent and opened in the page. One real fork for the
module. Screenshots land in $WIRE_UI_SHOTS when set, else in the test's tmp."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path

import orjson
import pytest

from tests.harness.browser import Browser
from tests.harness.replay import SAMPLES
from tests.test_ui import _chromium
from wire_recorder.recorder.store import open_store
from wire_recorder.recorder.transcript import import_transcript

BIN = Path(sys.executable).parent


def _start_ui(args: list[str], cwd: Path, env: dict) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([str(BIN / "wire-ui"), "--no-browser", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else ""
    return proc, url


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=60)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def ui(kimi_exe, tmp_path_factory):
    root = tmp_path_factory.mktemp("uifork")
    db = root / "approve.db"
    parent = import_transcript(str(SAMPLES / "approve_shell.jsonl"), str(db))
    for d in ("home", "work", "data"):
        (root / d).mkdir()
    env = {**os.environ, "HOME": str(root / "home"), "WIRE_RECORDER_HOME": str(root / "data"),
           "XDG_CACHE_HOME": str(root / "cache")}
    proc, url = _start_ui([str(db), "--agent", "--frame-timeout", "60", "--", str(kimi_exe),
                           "--wire"], root / "work", env)
    shots = Path(os.environ.get("WIRE_UI_SHOTS") or root / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    try:
        with Browser(_chromium(), root / "profile") as b:
            b.goto(url)
            b.wait_for("document.querySelectorAll('tr.row').length >= 1")
            yield {"b": b, "url": url, "db": db, "parent": parent, "root": root, "env": env,
                   "shots": shots, "proc": proc, "recording_sha": _sha(db)}
    finally:
        _stop(proc)
        shutil.rmtree(root / "profile", ignore_errors=True)


@pytest.fixture(scope="module")
def forked(ui):
    """The fork, done from the page: the ApprovalRequest's item, reject, fork; the branch opens."""
    b = ui["b"]
    b.goto(ui["url"])
    b.wait_for("document.querySelectorAll('tr.row').length >= 1")
    rows = b.eval("fetch('/api/index').then(r => r.json()).then(d => d.rows)")
    parent_key = [r["key"] for r in rows if r["session_id"] == ui["parent"]][0]
    b.eval(f"location.hash = '#s/' + encodeURIComponent({json.dumps(parent_key)})")
    b.wait_for("document.querySelector('.forkbtn')", timeout=120)
    offers = b.eval("[...document.querySelectorAll('.forkbtn')].map(x => x.dataset.label)")
    b.click(".forkbtn[data-label=ApprovalRequest]")
    b.wait_for("document.querySelector('#forkform select')")
    choices = b.eval("[...document.querySelectorAll('#forkform select option')].map(o => o.value)")
    # every status the page shows while the fork runs, kept to look at afterwards
    b.eval("window.__seen = []; new MutationObserver(() => window.__seen.push("
           "document.querySelector('#forkstatus') ? document.querySelector('#forkstatus')"
           ".textContent : '')).observe(document.querySelector('#forkform'), "
           "{subtree: true, childList: true, characterData: true})")
    b.eval("(() => { const s = document.querySelector('#forkform select'); s.value = 'reject'; "
           "return s.value; })()")
    b.screenshot(ui["shots"] / "fork-form.png")
    b.click("#forkgo")
    # done: the page moves to the branch (or shows why not)
    b.wait_for(f"location.hash !== '#s/' + encodeURIComponent({json.dumps(parent_key)}) || "
               "(document.querySelector('#forkstatus.bad') !== null)", timeout=1200)
    seen = b.eval("window.__seen || []")
    failed = b.eval("document.querySelector('#forkstatus.bad') ? "
                    "document.querySelector('#forkstatus.bad').textContent : null")
    assert failed is None, failed
    # the branch's page (the parent's has no link to a parent), drawn whole
    b.wait_for("document.querySelector('#cmpparent') && document.querySelector('#title') && "
               "document.querySelector('.forkbtn') !== null", timeout=120)
    b.screenshot(ui["shots"] / "fork-branch.png")
    here, title = b.eval("location.hash"), b.text("#title")
    tags = b.eval("[...document.querySelectorAll('#head .tag')].map(t => t.textContent)")
    # the branch against its parent, as wire-diff compares them
    b.click("#cmpparent")
    b.wait_for("document.querySelector('#cmptable')", timeout=120)
    verdict = b.text("#cmpverdict")
    changed = b.eval("[...document.querySelectorAll('#cmptable tr.changed')].map(r => "
                     "r.dataset.where + ' ' + r.dataset.changed)")
    b.screenshot(ui["shots"] / "fork-compare.png")
    b.eval(f"location.hash = {json.dumps(here)}")
    b.wait_for("document.querySelector('#title') !== null", timeout=120)
    return {"parent_key": parent_key, "offers": offers, "choices": choices, "seen": seen,
            "hash": here, "title": title, "verdict": verdict, "changed": changed, "tags": tags}


def _frames(frames, direction):
    out = []
    for f in frames:
        if f.direction == direction:
            try:
                out.append(orjson.loads(bytes(f.raw)))
            except orjson.JSONDecodeError:
                pass
    return out


def test_the_fork_from_the_page_stores_a_linked_branch_and_opens_it(ui, forked):
    parent = ui["parent"]
    # the request's item offered the change, with the recorded answer and the refusal
    assert "ApprovalRequest" in forked["offers"]
    assert forked["choices"] == ["approve", "reject"]
    assert any("the fork is running" in s for s in forked["seen"]), forked["seen"]
    # the branch is in the UI's branches file (the data folder's forks.db), linked to its parent
    store = ui["root"] / "data" / "forks.db"
    with open_store(str(store), read_only=True) as s:
        sessions = {x["session_id"]: x for x in s.sessions()}
        frames = s.frames(f"{parent}-fork-1") if f"{parent}-fork-1" in sessions else []
    assert set(sessions) == {f"{parent}-fork-1"}
    tags = sessions[f"{parent}-fork-1"]["tags"]
    tags = tags if isinstance(tags, dict) else orjson.loads(tags)
    assert tags["fork_of"] == parent and "ApprovalRequest" in tags["fork_at"]
    assert tags["fork_change"] == "response 'approve' → 'reject'"  # as the CLI words it
    # the page opened it: its title and its tags
    assert forked["hash"].startswith("#s/") and f"{parent}-fork-1" in forked["hash"]
    assert f"{parent}-fork-1" in forked["title"]
    assert f"fork_of={parent}" in forked["tags"]
    # compared with its parent, the branch differs at the answer (and what followed it)
    assert forked["verdict"] != "same" and any(
        "ApprovalRequest" in c and "answer" in c for c in forked["changed"]), forked["changed"]
    # the agent took the changed answer: the rejected command never ran
    answers = [m["result"]["response"] for m in _frames(frames, "c2a")
               if "request_id" in (m.get("result") or {})]
    assert answers == ["reject"]
    events = [m["params"] for m in _frames(frames, "a2c") if m.get("method") == "event"]
    results = [e["payload"]["return_value"] for e in events if e["type"] == "ToolResult"]
    assert results and all("hello" not in (r.get("output") or "") for r in results)
    # the recording itself was not written
    assert _sha(ui["db"]) == ui["recording_sha"]


def _post(url: str, body: bytes, headers: dict, token: bool = True) -> tuple[int, str]:
    u = urllib.parse.urlsplit(url)
    con = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    con.request("POST", "/api/fork" + ("?" + u.query if token else ""), body=body,
                headers=headers)
    r = con.getresponse()
    return r.status, r.read().decode()


def test_the_fork_post_passes_the_same_checks_as_any_request(ui, forked):
    url = ui["url"]
    port = urllib.parse.urlsplit(url).port
    body = json.dumps({"k": forked["parent_key"], "n": 1, "answer": "reject"}).encode()
    h = {"Content-Type": "application/json", "Host": f"127.0.0.1:{port}"}
    assert _post(url, body, h, token=False)[0] == 403
    assert _post(url, body, {**h, "Host": "evil.example:80"})[0] == 403
    assert _post(url, body, {**h, "Origin": "http://evil.example"})[0] == 403
    assert _post(url, body, {**h, "Content-Type": "text/plain"})[0] == 415
    code, text = _post(url, b'{"k": 1}', h)
    assert code == 400 and "give k" in text
    # other methods stay refused
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    con.request("PUT", "/api/fork?" + urllib.parse.urlsplit(url).query, body=body, headers=h)
    assert con.getresponse().status == 405


def test_without_an_agent_command_the_offer_says_how_to_enable_it(ui, forked):
    root = ui["root"]
    proc, url = _start_ui([str(ui["db"])], root / "work", ui["env"])
    try:
        b = ui["b"]
        b.goto(url)
        b.wait_for("document.querySelectorAll('tr.row').length >= 1")
        b.eval(f"location.hash = '#s/' + encodeURIComponent({json.dumps(forked['parent_key'])})")
        b.wait_for("document.querySelector('.forkbtn')", timeout=120)
        b.click(".forkbtn")
        b.wait_for("document.querySelector('#forkhow')")
        assert "--agent" in b.text("#forkhow")
        assert b.eval("document.querySelector('#forkgo').disabled") is True
    finally:
        _stop(proc)


@pytest.mark.parametrize("args, needle", [
    (["--agent"], "--agent: no command after it"),
    (["--agent", "--"], "--agent: no command after it"),
    (["--forks", "b.txt", "--agent", "--", "kimi"], "--forks b.txt: not a .db file"),
])
def test_a_bad_agent_or_forks_option_is_a_usage_error(tmp_path, args, needle):
    db = tmp_path / "approve.db"
    import_transcript(str(SAMPLES / "approve_shell.jsonl"), str(db))
    p = subprocess.run([str(BIN / "wire-ui"), "--no-browser", str(db), *args],
                       capture_output=True, timeout=120, text=True)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert len(lines) == 1 and lines[0].startswith("wire-ui: ") and needle in lines[0], lines


def test_each_answered_agent_request_is_offered_with_what_can_change(tmp_path):
    """The list behind the buttons (no agent, no browser): an approval with its choices, a
    question and an external tool call with their recorded answers to edit."""
    from wire_recorder.analysis.sources import open_workspace
    from wire_recorder.analysis.ui.forkable import forkable

    got = {}
    for name in ("approve_shell", "question", "external_tool"):
        db = tmp_path / f"{name}.db"
        sid = import_transcript(str(SAMPLES / f"{name}.jsonl"), str(db))
        with open_workspace([str(db)]) as ws:
            got[name] = forkable(ws, sid, "wire")
    (approve,), (question,), (tool,) = got["approve_shell"], got["question"], got["external_tool"]
    assert (approve["n"], approve["label"], approve["choices"]) == \
        (1, "ApprovalRequest", {"response": ["approve", "reject"]})
    assert approve["answer_seq"] > approve["seq"]
    assert question["label"] == "QuestionRequest" and question["choices"] == {}
    assert question["result"]["answers"] == {"Which database should I use?": "SQLite"}
    assert tool["label"] == "ToolCallRequest"
    assert tool["result"]["return_value"]["output"].startswith("Paris: sunny")


def test_a_change_is_worded_alike_as_one_word_or_as_the_json_object_the_page_sends():
    """The fork_change tag the UI's fork stores (the page sends a JSON object) is the CLI's
    (`--answer reject`): one function words both (no agent run)."""
    from wire_recorder.replay.engine.fork import changed_answer, fork_point
    from wire_recorder.replay.recording import load

    rec = load(str(SAMPLES / "approve_shell.jsonl"))
    req = fork_point(rec, "1")
    word = changed_answer(rec, req, "reject")
    page = changed_answer(rec, req, '{"response": "reject"}')
    assert word[1] == page[1] == "response 'approve' → 'reject'"
    assert word[0].obj == page[0].obj
    # a field the recorded answer did not have, and a value that is not a string
    assert changed_answer(rec, req, '{"feedback": "no", "n": [1]}')[1] == \
        "feedback (absent) → 'no', n (absent) → [1]"
