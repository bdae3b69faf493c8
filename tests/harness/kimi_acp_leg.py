"""One real `kimi acp` session recorded through `wire-proxy --llm` against
tests/harness/model_server.py, and its replays from the recorded leg, for
tests/test_llm_leg_acp.py (OpenAI dialect) and tests/test_llm_leg_kimi_acp_anthropic.py."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from tests.harness.acp import AcpRun, AcpScenario, run_acp_scenario
from tests.harness.model_server import StreamingModel
from tests.harness.replay import WIRE_PROXY, parallel, run_cli


def record_kimi_acp_leg(kimi_exe, root: Path, prompt: str,
                        model_for: Callable[[str], StreamingModel],
                        config_of: Callable[[StreamingModel], str]) -> SimpleNamespace:
    """The session (a work dir with a.txt, `prompt`) against `model_for(work dir)`, kimi's
    config `config_of(model)` in the run's HOME (`kimi acp` takes no options), into root/acp.db;
    then a copy of the work dir with an AGENTS.md added, for a replay that must go red.
    -> run, model, config, db, result, agents_md."""
    run = AcpRun.create([], {"a.txt": "alpha line one\n"}, kimi=kimi_exe, tmp_root=root,
                        keep=True)
    scenario = AcpScenario(name="leg", description="", scripts=[], prompts=[prompt],
                           permissions=[], timeout=600)
    db = root / "acp.db"
    with model_for(str(run.workdir)) as model:
        config = config_of(model)
        (run.home / ".kimi" / "config.toml").write_text(config, encoding="utf-8")
        result = run_acp_scenario(scenario, [WIRE_PROXY, "-q", "--llm", "--wait", "60", "--db",
                                             str(db), "--"], run=run)
    agents_md = root / "work-agents-md"
    shutil.copytree(run.workdir, agents_md)
    (agents_md / "AGENTS.md").write_text("# Rules\n\nAnswer in one line.\n", encoding="utf-8")
    return SimpleNamespace(run=run, model=model, config=config, db=db, result=result,
                           agents_md=agents_md)


def replay_kimi_acp_leg(rec: SimpleNamespace, cases: list[tuple[str, str]],
                        edit_home: Callable[[str, Path], None] | None = None) -> dict:
    """`wire-replay --json` of the recording for each (name, work dir), two side by side, each
    in a copy of the user's HOME as it is now (its config names the stopped upstream), which
    `edit_home(name, home)` may change first. -> {name: CompletedProcess}."""
    def one(case: tuple[str, str]):
        name, cwd = case
        home = rec.db.parent / f"home-{name}"
        shutil.copytree(rec.run.home, home)  # kimi acp reads its config and login from HOME
        if edit_home is not None:
            edit_home(name, home)
        return name, run_cli(["--json", rec.db, "--", rec.run.kimi, "acp"], timeout=1200,
                             env={"HOME": str(home)}, cwd=cwd)

    return dict(parallel(one, cases, workers=2))
