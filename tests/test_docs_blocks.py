"""The documentation's examples run as written: the fenced blocks of README.md and docs/*.md run
in a scratch project outside the repository, against wire-recorder installed from the wheel (not
editable), with the real kimi on PATH (configured in HOME as a user's kimi is; here with its
offline scripted LLM).

The convention, for whoever writes the docs:

* ```sh (or ```bash) blocks run, in document order, with `bash -e -o pipefail` in the
  document's scratch project: each command must succeed. A block may rely on what an earlier
  block of the same document made (the document reads top to bottom).
* A block of any language whose first line is a comment naming a file (`# client.py`,
  `# tests/test_client.py`) is that file: it is written into the project when reached.
* Other ```python blocks run with the project's `python`.
* ```text blocks, and blocks without a language, are output or syntax: shown, never run.

A document's set-up that lives in another document is named in DOCS below and stated in the
document's text (README's replay section says its client.py is docs/replay.md's)."""

from __future__ import annotations

import json
import re
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


@dataclass
class Block:
    doc: str
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    section: str  # the heading it is under

    @property
    def file(self) -> str | None:
        first = self.text.split("\n", 1)[0]
        m = FILE_COMMENT.match(first.strip())
        return m.group(1) if m else None

    @property
    def runs(self) -> bool:
        return self.file is not None or self.lang in RUN or self.lang == "python"

    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(doc: str, section: str | None = None) -> list[Block]:
    """The fenced blocks of `doc` (relative to the repository), or of its `##` section named
    `section` (the heading's text) with its subsections."""
    out: list[Block] = []
    heading, in_section = "", section is None
    fence: tuple[str, str, int, list[str]] | None = None
    for n, line in enumerate((ROOT / doc).read_text().splitlines(), 1):
        if fence is not None:
            if line.strip().startswith(fence[0]) and line.strip().strip(fence[0][0]) == "":
                if in_section:
                    out.append(Block(doc, fence[2], fence[1], "\n".join(fence[3]) + "\n", heading))
                fence = None
            else:
                fence[3].append(line)
            continue
        m = FENCE.match(line)
        if m:
            fence = (m.group(2), m.group(3).lower(), n, [])
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            heading = line.lstrip("#").strip()
            if section is not None and level <= 2:
                in_section = heading == section
    return out


# document -> (section or None for all, documents whose file blocks are its set-up)
DOCS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "README.md": ("Replay: `wire-replay`", ("docs/replay.md",)),
    "docs/replay.md": (None, ()),
}


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


def run_block(block: Block, proj: Path, env: dict[str, str]) -> str | None:
    """Run (or write) one block in `proj`; a failure's description, else None."""
    if block.file is not None:
        target = proj / block.file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text)
        return None
    if block.lang in RUN:
        argv = ["bash", "-e", "-o", "pipefail", "-c", block.text]
    elif block.lang == "python":
        argv = ["python", "-c", block.text]
    else:
        return None
    try:
        p = subprocess.run(argv, cwd=proj, env=env, capture_output=True, text=True, timeout=300,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"{block.where()}: the block did not finish in 300 s\n{block.text}"
    if p.returncode == 0:
        return None
    return (f"{block.where()} (under '{block.section}'): exit {p.returncode}\n{block.text}"
            f"--- stdout\n{p.stdout[-3000:]}\n--- stderr\n{p.stderr[-3000:]}")


def run_doc(doc: str, proj: Path, env: dict[str, str], keep_going: bool = False) -> list[str]:
    section, setup = DOCS.get(doc, (None, ()))
    proj.mkdir(parents=True, exist_ok=True)
    for other in setup:
        for b in blocks(other):
            if b.file is not None:
                run_block(b, proj, env)
    failures = []
    for b in blocks(doc, section):
        failure = run_block(b, proj, env)
        if failure is not None:
            failures.append(failure)
            if not keep_going:
                break
    return failures


def test_the_runner_reads_the_convention():
    found = blocks("docs/replay.md")
    assert any(b.lang == "text" and not b.runs for b in found)
    assert any(b.lang == "sh" and b.runs for b in found)
    assert any(b.file == "client.py" for b in found)
    readme = blocks("README.md", DOCS["README.md"][0])
    assert readme and all(b.section.startswith("Replay") for b in readme)


def test_the_blocks_of_the_docs_run_as_written(doc_env, tmp_path):
    for doc, (section, _) in DOCS.items():
        assert any(b.runs for b in blocks(doc, section)), f"{doc}: no block runs"
    # the documents side by side, each in its own project (most of the time is kimi starting)
    with ThreadPoolExecutor(len(DOCS)) as pool:
        runs = pool.map(lambda doc: run_doc(doc, tmp_path / doc.replace("/", "_"), doc_env),
                        list(DOCS))
        failures = [f for run in runs for f in run]
    assert failures == [], "\n\n".join(failures)
