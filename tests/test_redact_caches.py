"""Derived copies follow a recording through `wire-redact`: a `--no-redact` recording's search
text reaches wire-ui's index cache (`ui-index.json.z`) and the loaders' log of entries beside it;
once `wire-redact` has rewritten the file, neither holds any of its secrets (the entries of other
files stay), and wire-ui's next start reads the redacted file afresh. Summaries stored in the
file (`wr_session_summary`) are not copied into the rewritten one."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from tests.harness import secrets as sx
from tests.harness.proxy import echo_agent_cmd, run_proxy

BIN = Path(sys.executable).parent
NAMES = [n for n in sx.SECRETS if "\n" not in sx.SECRETS[n]]  # one-line values: prompts


def prompt(value: str, i: int) -> bytes:
    return (b'{"jsonrpc":"2.0","id":%d,"method":"prompt","params":{"user_input":"note token=%s"}}\n'
            % (i, value.encode()))


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("WIRE_SUMMARY_MIN_ROWS", "0")  # the loader stores every summary
    monkeypatch.delenv("WIRE_UI_RECORD_INDEX", raising=False)
    folder = tmp_path / "recs"
    folder.mkdir()
    return folder


def _cache_bytes() -> bytes:
    from wire_recorder.analysis.ui.data import index_cache_path
    from wire_recorder.analysis.ui.recindex import log_path

    out = b""
    if os.path.exists(index_cache_path()):
        out += zlib.decompress(Path(index_cache_path()).read_bytes())
    if os.path.exists(log_path()):
        out += Path(log_path()).read_bytes()
    return out


def found(data: bytes) -> list[str]:
    """The secrets in data, in any case (the index keeps its search text lower-cased)."""
    low = data.lower()
    return [n for n in NAMES if any(x.lower() in low for x in sx.needles(sx.SECRETS[n]))]


def test_wire_redact_leaves_no_secret_in_the_ui_cache_or_the_log(home):
    from wire_recorder.analysis.ui.data import Catalog

    plain, other = home / "plain.db", home / "other.db"
    frames = b"".join(prompt(sx.SECRETS[n], i) for i, n in enumerate(NAMES))
    for db, data in ((plain, frames), (other, prompt("keep-this-needle", 1))):
        p = run_proxy(["-q", "--no-redact", "--db", str(db), "--", *echo_agent_cmd()], data,
                      timeout=120)
        assert p.returncode == 0, p.stderr
    # a wire-ui start folds the log into its cache; a later recording logs its entry again
    Catalog([str(home)]).build()
    p = run_proxy(["-q", "--no-redact", "--db", str(plain), "--", *echo_agent_cmd()],
                  prompt(sx.SECRETS[NAMES[0]], 99), timeout=120)
    assert p.returncode == 0, p.stderr
    before = set(found(_cache_bytes()))
    assert len(before) >= 16, before  # the check has teeth: the search text held them
    assert sx.found_in(sx.duckdb_text(plain), NAMES)

    p = subprocess.run([str(BIN / "wire-redact"), str(plain)], capture_output=True, text=True,
                       timeout=180)
    assert p.returncode == 0, p.stderr
    assert found(_cache_bytes()) == []
    assert b"keep-this-needle" in _cache_bytes()  # the other file's entry stays
    assert sx.found_in(sx.duckdb_text(plain), NAMES) == []  # nor in a stored summary
    # the next start reads the redacted file, and finds it by a placeholder, not a secret
    cat = Catalog([str(home)])
    cat.build()
    assert found(_cache_bytes()) == []
    assert cat.page(q="REDACTED")["rows"] and not cat.page(q=sx.SECRETS[NAMES[0]])["rows"]
