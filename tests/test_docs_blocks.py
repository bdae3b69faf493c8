"""The documentation's examples run as written: every fenced block of README.md, docs/*.md and
bench/README.md that is a command runs in a scratch project outside the repository, against
wire-recorder installed from the wheel (not editable), with the real kimi on PATH (configured in
HOME as a user's kimi is; here with its offline scripted LLM). One project per document, the
documents side by side; a document reads top to bottom, so a block may use what an earlier block
of the same document made (README's recordings, docs/replay.md's client.py).

The convention, for whoever writes the docs:

* ```sh (or ```bash) blocks run, in document order, with `bash -e -o pipefail` in the
  document's scratch project: each command must succeed.
* A block whose first line is `# in a clone of this repository` runs instead in the document's
  stand-in clone, a scratch folder (outside the repository too) holding a copy of the
  checkout's `sample_sessions/*.jsonl` and `.venv` linked to the wheel's venv, so
  `.venv/bin/wire-*` are the installed commands.
* A block whose first line is `# not run by the docs test: REASON` is shown, never run; the
  reason is required (e.g. `bash scripts/test`, which is what CI itself runs).
* A block of any language whose first line is a comment naming a file (`# client.py`,
  `# tests/test_client.py`) is that file: it is written into the project when reached.
* Other ```python blocks run with the project's `python`.
* ```sql blocks whose first line is `-- in PATH` run statement by statement through
  `wire-query PATH` (the installed one), where the document's previous block ran.
* ```text blocks (syntax, output, diagrams) and other languages (```toml) are never run. A
  fence without a language is an error: every block says what it is.

A document's set-up that lives in another document is named in SETUP below and stated in the
document's text (README's client.py is docs/replay.md's)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from sample_sessions.scenarios import SCENARIOS
from tests.harness.install import clean_env, tool_dir, wheel_venv
from tests.harness.kimi_peer import CONFIG_TOML

ROOT = Path(__file__).resolve().parents[1]

RUN = ("sh", "bash")
FILE_COMMENT = re.compile(r"^(?:#|//|--)\s*([\w.-]+(?:/[\w.-]+)*\.\w+)\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
IN_CLONE = "# in a clone of this repository"
NOT_RUN = re.compile(r"^# not run by the docs test:\s*(.*)$")
SQL_DB = re.compile(r"^--\s*in\s+(\S+)\s*$")
DOCS = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
        "bench/README.md")
# document -> documents whose file blocks are its set-up
SETUP: dict[str, tuple[str, ...]] = {"README.md": ("docs/replay.md",)}


@dataclass
class Block:
    doc: str
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    section: str  # the heading it is under

    @property
    def first(self) -> str:
        return self.text.split("\n", 1)[0].strip()

    @property
    def file(self) -> str | None:
        m = FILE_COMMENT.match(self.first)
        return m.group(1) if m else None

    @property
    def not_run(self) -> str | None:
        """The reason given for not running the block."""
        m = NOT_RUN.match(self.first)
        return m.group(1) if m else None

    @property
    def in_clone(self) -> bool:
        return self.first == IN_CLONE

    @property
    def sql_db(self) -> str | None:
        m = SQL_DB.match(self.first) if self.lang == "sql" else None
        return m.group(1) if m else None

    @property
    def runs(self) -> bool:
        if self.not_run is not None:
            return False
        return (self.file is not None or self.lang in RUN or self.lang == "python"
                or self.sql_db is not None)

    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(doc: str) -> list[Block]:
    """The fenced blocks of `doc` (relative to the repository)."""
    out: list[Block] = []
    heading = ""
    fence: tuple[str, str, int, list[str]] | None = None
    for n, line in enumerate((ROOT / doc).read_text().splitlines(), 1):
        if fence is not None:
            if line.strip().startswith(fence[0]) and line.strip().strip(fence[0][0]) == "":
                out.append(Block(doc, fence[2], fence[1], "\n".join(fence[3]) + "\n", heading))
                fence = None
            else:
                fence[3].append(line)
            continue
        m = FENCE.match(line)
        if m:
            fence = (m.group(2), m.group(3).lower(), n, [])
        elif line.startswith("#"):
            heading = line.lstrip("#").strip()
    return out


@pytest.fixture(scope="module")
def doc_env(tmp_path_factory, kimi_exe) -> dict[str, str]:
    """PATH: the wheel venv's commands, kimi, the system; HOME: kimi configured with its
    offline LLM, whose scripts answer every run as the approve_shell scenario's model did (a
    Shell call `echo hello`, then text)."""
    venv = wheel_venv(tmp_path_factory.getbasetemp() / "wheel")
    root = tmp_path_factory.mktemp("docs")
    home = root / "home"
    (home / ".kimi").mkdir(parents=True)
    (home / ".kimi" / "config.toml").write_text(CONFIG_TOML.format(max_context_size=100000))
    scripts = root / "scripts.json"
    scripts.write_text(json.dumps(list(SCENARIOS["approve_shell"].scripts)))
    base = {k: v for k, v in clean_env().items() if not k.startswith("KIMI_")}
    tools = tool_dir(root / "tools", kimi=kimi_exe)
    return {**base, "PATH": f"{venv}:{tools}:{base['PATH']}", "HOME": str(home),
            "KIMI_SCRIPTED_ECHO_SCRIPTS": str(scripts), "VIRTUAL_ENV": str(venv.parent)}


def stand_in_clone(path: Path, env: dict[str, str]) -> Path:
    """What the clone blocks need of a clone: the samples, and `.venv` (the wheel's venv)."""
    if not path.exists():
        (path / "sample_sessions").mkdir(parents=True)
        for f in (ROOT / "sample_sessions").glob("*.jsonl"):
            shutil.copy(f, path / "sample_sessions" / f.name)
        (path / ".venv").symlink_to(env["VIRTUAL_ENV"])
    return path


def run_block(block: Block, cwd: Path, env: dict[str, str]) -> str | None:
    """Run (or write) one block in `cwd`; a failure's description, else None."""
    if block.file is not None:
        target = cwd / block.file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text)
        return None
    if block.lang in RUN:
        argvs = [["bash", "-e", "-o", "pipefail", "-c", block.text]]
    elif block.lang == "python":
        argvs = [["python", "-c", block.text]]
    elif block.sql_db is not None:
        sql = "\n".join(line for line in block.text.splitlines()[1:])
        argvs = [["wire-query", block.sql_db, stmt.strip()] for stmt in sql.split(";")
                 if stmt.strip()]
    else:
        return None
    for argv in argvs:
        try:
            p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                               timeout=300, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return f"{block.where()}: the block did not finish in 300 s\n{block.text}"
        if p.returncode != 0:
            return (f"{block.where()} (under '{block.section}'): {argv[0]} exit {p.returncode}\n"
                    f"{block.text}--- stdout\n{p.stdout[-3000:]}\n--- stderr\n{p.stderr[-3000:]}")
    return None


def run_doc(doc: str, root: Path, env: dict[str, str], keep_going: bool = False) -> list[str]:
    proj, clone = root / "project", root / "clone"
    proj.mkdir(parents=True, exist_ok=True)
    for other in SETUP.get(doc, ()):
        for b in blocks(other):
            if b.file is not None:
                run_block(b, proj, env)
    failures = []
    cwd = proj
    for b in blocks(doc):
        if not b.runs:
            continue
        if b.sql_db is None:
            cwd = stand_in_clone(clone, env) if b.in_clone else proj
        failure = run_block(b, cwd, env)
        if failure is not None:
            failures.append(failure)
            if not keep_going:
                break
    return failures


def test_every_block_says_what_it_is():
    """No bare fences, no unexplained exclusions; the runner finds the kinds the docs use."""
    found = {doc: blocks(doc) for doc in DOCS}
    problems = [f"{b.where()}: a fence without a language" for bs in found.values() for b in bs
                if b.lang == ""]
    problems += [f"{b.where()}: not run, without a reason" for bs in found.values() for b in bs
                 if b.not_run == ""]
    problems += [f"{b.where()}: a sql block without `-- in PATH`" for bs in found.values()
                 for b in bs if b.lang == "sql" and b.sql_db is None and b.not_run is None]
    assert problems == []
    every = [b for bs in found.values() for b in bs]
    assert any(b.lang == "text" and not b.runs for b in every)
    assert any(b.in_clone and b.runs for b in every)
    assert any(b.not_run for b in every)
    assert any(b.sql_db for b in every)
    assert any(b.file == "client.py" for b in found["docs/replay.md"])


def test_the_blocks_of_the_docs_run_as_written(doc_env, tmp_path):
    running = [doc for doc in DOCS if any(b.runs for b in blocks(doc))]
    assert {"README.md", "docs/replay.md", "docs/analysis.md"} <= set(running)
    # the documents side by side, each in its own project (most of the time is kimi starting)
    with ThreadPoolExecutor(len(running)) as pool:
        runs = pool.map(lambda doc: run_doc(doc, tmp_path / doc.replace("/", "_"), doc_env),
                        running)
        failures = [f for run in runs for f in run]
    assert failures == [], "\n\n".join(failures)
