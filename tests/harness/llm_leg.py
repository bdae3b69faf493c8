"""One kimi `--wire` session recorded through `wire-proxy --llm` and the same without the leg,
against tests/harness/model_server.py, for tests/test_llm_leg*.py."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.harness.model_server import StreamingModel, answer, call, failure
from tests.harness.replay import WIRE_PROXY

PROMPT = "Read a.txt, then say what it says"
# any key of the harness's model server (a stored one would be a leak)
KEY_RE = re.compile(rb"sk-stream-[0-9a-f]{24}")


def turns(work: str) -> list[dict[str, Any]]:
    k = len(work) - 2  # the path cut mid-name, as real models do
    return [
        answer(think=["The user wants a file read.\n", "Absolute path."],
               text=["Reading ", "`a.txt`."],
               calls=[call("call-abs", "ReadFile", ['{"path": "' + work[:k], work[k:] + '/a.txt"}'])],
               usage=(900, 40, 300), message_id="chatcmpl-leg-1"),
        failure(503, "upstream overloaded"),  # the client library retries it on its own
        answer(calls=[call("call-ls", "Glob", ['{"pattern": "*.t', 'xt"}'])],
               usage=(1000, 20, 0), message_id="chatcmpl-leg-2"),
        answer(text=["It says:\n\n", "alpha line one\n"], usage=(1100, 30, 900),
               message_id="chatcmpl-leg-3"),
    ]


LLM_TURNS: list[dict[str, Any]] = []  # of the last recording (the work dir is in them)


def record(kimi_exe, root: Path, work: Path, db: Path | None, name: str, llm: bool):
    from tests.harness.kimi_peer import clean_env
    from tests.harness.scripted_client import Approval, ClientPlan, Prompt, run_client

    home = root / f"home-{name}"
    home.mkdir(parents=True)
    script = turns(str(work))
    LLM_TURNS[:] = script
    model = StreamingModel(script)
    cfg = root / f"config-{name}.toml"
    proxy = [WIRE_PROXY, "-q", "--wait", "60", "--db", str(db), *(["--llm"] if llm else []), "--"]
    with model:
        cfg.write_text(model.config_toml(), encoding="utf-8")
        result = run_client(
            [*proxy, str(kimi_exe), "--config-file", str(cfg), "--wire"],
            ClientPlan(prompts=[Prompt(PROMPT)], approval_default=Approval.approve(),
                       init_timeout=600, prompt_timeout=600),
            env={**clean_env(), "HOME": str(home)}, cwd=work, timeout=1200)
    return SimpleNamespace(result=result, requests=model.requests, headers=model.headers,
                           model=model.model, key=model.key, db=db, config=cfg, home=home,
                           work=work, server=model)


def record_pair(kimi_exe, root: Path):
    """(with_leg, without): the same session twice in the same work dir, the recording with the
    leg alone in its folder (so every file beside it can be scanned for keys)."""
    work = root / "work"
    work.mkdir()
    (work / "a.txt").write_text("alpha line one\n", encoding="utf-8")
    (root / "with").mkdir()
    (root / "without").mkdir()
    without = record(kimi_exe, root, work, root / "without" / "s.db", "without", llm=False)
    with_leg = record(kimi_exe, root, work, root / "with" / "s.db", "with", llm=True)
    shutil.rmtree(root / "home-without", ignore_errors=True)
    return SimpleNamespace(with_leg=with_leg, without=without, work=work, root=root)


def exchanges(db) -> list[dict[str, Any]]:
    """The stored exchanges: {n, request: event, response: event}, in order, read from the
    raw rows (the bodies are there only: the payload column leaves them out)."""
    from wire_recorder.recorder.store import open_store

    with open_store(str(db), read_only=True) as store:
        (session,) = store.sessions()
        frames = store.frames(session["session_id"], directions=("proxy",))
    out: dict[int, dict[str, Any]] = {}
    for f in frames:
        if f.method in ("llm_request", "llm_response"):
            p = json.loads(bytes(f.raw))
            out.setdefault(p["n"], {"n": p["n"]})["request" if f.method == "llm_request"
                                                     else "response"] = p
    return [out[k] for k in sorted(out)]


def payloads(db, method: str | None = None) -> list[dict[str, Any]]:
    """The parsed payload column of the model leg's rows (of `method`'s only, when given), in
    stored order: an exchange's response may be stored after the next request, which the agent
    can send once it has the last byte, before the leg has logged that response."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        methods = [method] if method else ["llm_request", "llm_response"]
        rows = con.execute("SELECT payload FROM frames WHERE direction = 'proxy' AND "
                           "list_contains(?, method) ORDER BY seq", [methods]).fetchall()
    finally:
        con.close()
    return [json.loads(r[0]) for r in rows]


def library_leg(base_url: str):
    """A model leg in this process in front of an OpenAI-style model at `base_url`, serving, and
    the list its events go to as (name, data)."""
    from wire_recorder.recorder.llm_leg import ModelLeg
    from wire_recorder.recorder.llm_upstream import Upstream

    events: list = []
    leg = ModelLeg(Upstream(base_url, "OPENAI_BASE_URL", "openai_legacy", "m", "openai-chat",
                            "test"))
    leg.start(lambda name, **data: events.append((name, data)))
    return leg, events
