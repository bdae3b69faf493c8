"""wire-ui in headless Chromium over real recordings: the compare view of two kimi --wire runs
of one scenario whose one tool result differs (wire-diff's alignment and changes, marked on the
row), and the model leg of a session recorded with `wire-proxy --llm` (per call the exact
request, the streamed answer, the prompt diff to the call before). The three sessions are
recorded at once, once per module. Screenshots land in $WIRE_UI_SHOTS when set."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.harness.acp import AcpRun, AcpScenario, run_acp_scenario
from tests.harness.browser import Browser
from tests.harness.llm_leg import exchanges, record
from tests.harness.model_server import StreamingModel, answer, call
from tests.harness.proxy import WIRE_PROXY
from tests.harness.wire import run_scenario
from tests.test_diff import wire_scenario
from tests.test_ui import _chromium

BIN = Path(sys.executable).parent


def _acp_leg(kimi_exe, root: Path) -> Path:
    """kimi acp recorded with its model leg: a ReadFile call, then the answer."""
    run = AcpRun.create([], {"a.txt": "alpha line one\n"}, kimi=kimi_exe, tmp_root=root,
                        keep=True)
    work = str(run.workdir)
    model = StreamingModel([
        answer(text=["Reading ", "a.txt"],
               calls=[call("call-1", "ReadFile", ['{"path": "' + work + '/a.txt"}'])],
               usage=(900, 40, 300), message_id="m-1"),
        answer(text=["It says alpha."], usage=(1000, 10, 900), message_id="m-2")])
    scenario = AcpScenario(name="leg", description="", scripts=[], prompts=["Read a.txt"],
                           permissions=[], timeout=600)
    db = root / "acp.db"
    with model:
        (run.home / ".kimi" / "config.toml").write_text(model.config_toml(), encoding="utf-8")
        result = run_acp_scenario(scenario, [WIRE_PROXY, "-q", "--llm", "--wait", "60", "--name",
                                             "acp-leg", "--db", str(db), "--"], run=run)
    assert result.exit_code == 0, result.client_stderr[-2000:]
    return db


@pytest.fixture(scope="module")
def ui(kimi_exe, tmp_path_factory):
    d = tmp_path_factory.mktemp("uicmp")
    runs, leg_root = d / "runs.db", d / "leg"
    work = leg_root / "work"
    work.mkdir(parents=True)
    (work / "a.txt").write_text("alpha line one\n", encoding="utf-8")
    (leg_root / "with").mkdir()
    leg_db = leg_root / "with" / "s.db"
    base = wire_scenario("I'll print it.", "approve")

    def wire(name: str, value: str):
        return run_scenario(base, [WIRE_PROXY, "-q", "--db", str(runs), "--name", name, "--"],
                            kimi=kimi_exe, env={"WR_DIFF_VALUE": value})

    (d / "acp").mkdir()
    with ThreadPoolExecutor(4) as ex:
        one, two = ex.submit(wire, "run-one", "one"), ex.submit(wire, "run-two", "two")
        leg = ex.submit(record, kimi_exe, leg_root, work, leg_db, "with", True)
        acp = ex.submit(_acp_leg, kimi_exe, d / "acp")
        results = [one.result(), two.result(), leg.result().result]
        acp_db = acp.result()
    for r in results:
        assert r.exit_code == 0 and not r.timed_out, r.stderr[-2000:]
    proc = subprocess.Popen([str(BIN / "wire-ui"), "--no-browser", str(runs), str(leg_db),
                             str(acp_db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "XDG_CACHE_HOME": str(d / "cache")})
    try:
        assert proc.stdout
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else ""
        shots = Path(os.environ.get("WIRE_UI_SHOTS") or d / "shots")
        shots.mkdir(parents=True, exist_ok=True)
        with Browser(_chromium(), d / "profile") as b:
            b.goto(url)
            b.wait_for("document.querySelectorAll('tr.row').length >= 4")
            rows = b.eval("fetch('/api/index').then(r => r.json()).then(d => d.rows)")
            keys = {r["name"] or r["session_id"]: r["key"] for r in rows}
            yield {"b": b, "keys": keys, "shots": shots, "runs": runs, "leg_db": leg_db,
                   "acp_db": acp_db}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(d / "profile", ignore_errors=True)


def _key(ui, name: str) -> str:
    found = [k for n, k in ui["keys"].items() if n == name]
    assert found, ui["keys"]
    return found[0]


def test_compare_view_marks_the_one_changed_tool_result(ui):
    from wire_recorder.analysis.diff import diff

    b = ui["b"]
    one, two = _key(ui, "run-one"), _key(ui, "run-two")
    # from the session view: "compare with…", then the other run
    b.eval(f"location.hash = '#s/' + encodeURIComponent({json.dumps(one)})")
    b.wait_for("document.querySelector('#cmpwith')")
    b.click("#cmpwith")
    b.wait_for(f"document.querySelector('a.cmpto[data-key={json.dumps(two)}]')")
    b.click(f"a.cmpto[data-key={json.dumps(two)}]")
    b.wait_for("document.querySelector('#cmptable')")
    assert b.eval("location.hash") == "#cmp/" + one + "/" + two
    # what wire-diff says, and the rows the page marks
    lib = diff(f"{ui['runs']}#run-one", f"{ui['runs']}#run-two")
    assert [(c.where, c.field) for c in lib.changes] == \
        [("turn 1 step 1 tool call 1 (Shell)", "output")], [c.to_dict() for c in lib.changes]
    assert b.text("#cmpverdict") == "1 difference"
    changed = json.loads(b.eval("JSON.stringify([...document.querySelectorAll('#cmptable tr.changed')]"
                                ".map(r => [r.dataset.where, r.dataset.changed]))"))
    assert changed == [["turn 1 step 1 tool call 1 (Shell)", "output"]]
    row = "#cmptable tr.changed"
    assert b.text(f"{row} td[data-side=a] .cell.chg[data-field=output]").strip().endswith("one")
    assert b.text(f"{row} td[data-side=b] .cell.chg[data-field=output]").strip().endswith("two")
    # the same call's arguments are aligned and unmarked; every turn, step and call has a row
    assert "echo $WR_DIFF_VALUE" in b.text(f"{row} td[data-side=a] .cell[data-field=arguments]")
    assert not b.eval(f"document.querySelector('{row} .cell[data-field=arguments].chg')")
    wheres = b.eval("[...document.querySelectorAll('#cmptable tr.cmprow')].map(r => r.dataset.where)")
    assert wheres[0] == "turn 1" and "turn 2 step 2" in wheres and len(wheres) >= 8, wheres
    # timings and tokens beside each other
    assert b.text(f"{row} td[data-col=time-a]") and b.text(f"{row} td[data-col=time-b]")
    step = "#cmptable tr.step[data-where='turn 1 step 1']"
    assert b.text(f"{step} td[data-col=tokens-a]") == b.text(f"{step} td[data-col=tokens-b]") != ""
    b.screenshot(ui["shots"] / "compare.png")
    # the link itself opens the view; the same run against itself is the same
    b.eval("location.hash = ''")
    b.wait_for("document.querySelector('tr.row')")
    b.eval(f"location.hash = '#cmp/' + encodeURIComponent({json.dumps(one)}) + '/' + "
           f"encodeURIComponent({json.dumps(one)})")
    b.wait_for("document.querySelector('#cmpverdict')")
    assert b.text("#cmpverdict") == "same"
    assert not b.eval("document.querySelector('#cmptable tr.changed')")


def test_model_calls_show_the_request_the_streamed_answer_and_the_prompt_diff(ui):
    b = ui["b"]
    ex = exchanges(ui["leg_db"])
    key = [k for n, k in ui["keys"].items() if n not in ("run-one", "run-two", "acp-leg")][0]
    b.eval(f"location.hash = '#s/' + encodeURIComponent({json.dumps(key)})")
    b.wait_for("document.querySelector('#llmtable')")
    # four exchanges, one a retry of the 503: three calls
    assert b.eval("document.querySelectorAll('#llmtable tbody tr').length") == 3
    b.click("#llmtable tr[data-call='1']")
    b.wait_for("document.querySelector('#llmcall .attempt')")
    first = b.text("#llmcall .attempt[data-n='1'] pre.llmreq")
    assert first == ex[0]["request"]["request_body"]  # the exact request, as text
    assert b.text("#llmcall .attempt[data-n='1'] pre.llmres") == ex[0]["response"]["response_body"]
    assert "data: " in b.text("#llmcall .attempt[data-n='1'] pre.llmres")
    b.click("#llmtable tr[data-call='2']")
    b.wait_for("document.querySelector('#llmcall .attempt[data-n=\"3\"]')")
    assert b.eval("document.querySelectorAll('#llmcall .attempt').length") == 2  # the 503 and its retry
    assert "upstream overloaded" in b.text("#llmcall .attempt[data-n='2'] pre.llmres")
    assert b.text("#llmcall .attempt[data-n='3'] pre.llmreq") == ex[2]["request"]["request_body"]
    # what the prompt gained: the model's tool call and the file's text as the tool's answer
    assert "prompt since call 1" in b.text("#promptdiff")
    added = b.eval("[...document.querySelectorAll('#promptdiff pre.added')].map(p => p.textContent)")
    before = json.loads(ex[0]["request"]["request_body"])["messages"]
    after = json.loads(ex[2]["request"]["request_body"])["messages"]
    assert after[:len(before)] == before and len(added) == len(after) - len(before) >= 2
    assert any("call-abs" in a for a in added) and any("alpha line one" in a for a in added)
    # recorded text is text: the tool's "<system>…</system>" is shown, not made an element
    assert "<system>" in b.text("#promptdiff") and not b.eval("document.querySelector('#llmcall system')")
    assert "kept" in b.text("#promptdiff") and f"{len(before)} messages kept" in b.text("#promptdiff")
    b.screenshot(ui["shots"] / "llm-call.png")
    b.eval("document.querySelector('#llmtable').closest('.tablebox').previousElementSibling.scrollIntoView();"
           " window.scrollBy(0, -50)")
    b.screenshot(ui["shots"] / "llm.png")
    # the frames around a call's request open in the inspector, the llm_request among them
    b.click("#llmtable tr[data-call='2'] a.llmframes")
    b.wait_for("[...document.querySelectorAll('#insp .frame .fh')].some(h => h.textContent.includes('llm_request'))")
    # a session without the leg has no model-call table
    b.eval(f"location.hash = '#s/' + encodeURIComponent({json.dumps(_key(ui, 'run-one'))})")
    b.wait_for("document.querySelector('#tl') && document.querySelector('#cmpwith')")
    assert not b.eval("document.querySelector('#llmtable')")


def test_a_long_comparison_keeps_the_first_rows_and_every_changed_one(ui, monkeypatch):
    from wire_recorder.analysis.ui import compare
    from wire_recorder.recorder.store import open_store

    with open_store(str(ui["runs"]), read_only=True) as store:
        ids = {s["name"]: s["session_id"] for s in store.sessions()}
    sides = (str(ui["runs"]), ids["run-one"]), (str(ui["runs"]), ids["run-two"])
    full = compare.compare_files(*sides)
    changed_at = [i for i, r in enumerate(full["rows"]) if r["changed"]]
    assert changed_at and changed_at[0] > 1
    monkeypatch.setattr(compare, "ROWS_MAX", 1)
    cut = compare.compare_files(*sides)
    assert cut["rows_total"] == len(full["rows"]) > len(cut["rows"])
    assert [r["where"] for r in cut["rows"]] == \
        [full["rows"][0]["where"], *(full["rows"][i]["where"] for i in changed_at)]


def test_model_calls_of_a_kimi_acp_session(ui):
    b = ui["b"]
    ex = exchanges(ui["acp_db"])
    b.eval(f"location.hash = '#s/' + encodeURIComponent({json.dumps(_key(ui, 'acp-leg'))})")
    b.wait_for("document.querySelector('#llmtable')")
    assert b.eval("document.querySelectorAll('#llmtable tbody tr').length") == 2
    assert "turn 1" in b.text("#llmtable tr[data-call='2']")
    b.click("#llmtable tr[data-call='2']")
    b.wait_for("document.querySelector('#llmcall .attempt[data-n=\"2\"]')")
    assert b.text("#llmcall .attempt[data-n='2'] pre.llmreq") == ex[1]["request"]["request_body"]
    assert "It says alpha." in b.text("#llmcall .attempt[data-n='2'] pre.llmres")
    added = b.eval("[...document.querySelectorAll('#promptdiff pre.added')].map(p => p.textContent)")
    assert any("call-1" in a for a in added) and any("alpha line one" in a for a in added)
