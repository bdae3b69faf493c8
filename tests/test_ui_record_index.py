"""wire-ui's index entries written at record time (analysis/ui/recindex.py): the real wire-proxy's
loader appends an entry per recording to a log beside wire-ui's cache, and a first wire-ui start
serves those files' rows and search text without opening them; a file changed since its entry is
read afresh; a garbled or forged entry is ignored."""

from __future__ import annotations

import os
import stat

import orjson
import pytest

from tests.harness.proxy import echo_agent_cmd, run_proxy

PROMPT = b'{"jsonrpc":"2.0","id":1,"method":"prompt","params":{"user_input":"find the %s"}}\n'


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A scratch cache (inherited by wire-proxy's loader) and a folder of recordings."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("WIRE_UI_RECORD_INDEX", raising=False)
    folder = tmp_path / "recs"
    folder.mkdir()
    return folder


def _record(db, word: str, env=None) -> None:
    res = run_proxy(["-q", "--db", str(db), "--", *echo_agent_cmd()], PROMPT % word.encode(),
                    timeout=90, env=env)
    assert res.returncode == 0, res.stderr


def _builds(monkeypatch):
    """A Catalog build as a new wire-ui start runs it, and the files whose rows it read."""
    from wire_recorder.analysis.ui import coldindex
    from wire_recorder.analysis.ui.data import Catalog

    opened: list[str] = []
    real = coldindex.read_files

    def counting(paths, what="rows"):
        opened.extend(os.path.basename(str(p)) for p in paths)
        return real(paths, what)

    monkeypatch.setattr(coldindex, "read_files", counting)

    def build(folder, cache="") -> Catalog:
        opened.clear()
        cat = Catalog([str(folder)], cache=cache)
        cat.build()
        return cat

    return build, opened


def test_recorded_files_are_indexed_without_being_read(home, monkeypatch):
    from wire_recorder.analysis.ui.data import index_cache_path
    from wire_recorder.analysis.ui.recindex import log_path

    a, b = home / "a.db", home / "b.db"
    _record(a, "zebra-needle")
    _record(b, "okapi-needle")
    _record(b, "lynx-needle")  # a second session in the same file
    log = log_path()
    assert os.path.dirname(log) == os.path.dirname(index_cache_path())
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
    lines = [orjson.loads(x) for x in open(log, "rb").read().splitlines()]
    assert [os.path.basename(e["path"]) for e in lines] == ["a.db", "b.db", "b.db"]
    assert [len(e["rows"]) for e in lines] == [1, 1, 2]  # an entry holds every session of its file

    build, opened = _builds(monkeypatch)
    cold = build(home, cache=None)  # no cache, no log: every file read, as before
    assert sorted(opened) == ["a.db", "a.db", "b.db", "b.db"]  # (rows, then search text)
    fast = build(home)
    assert opened == [] and fast.files_read == 0 and fast.search_ready
    assert not os.path.exists(log) and os.path.exists(index_cache_path())  # folded into the cache
    keys = ("source_file", "session_id", "name", "protocol", "started_at", "duration_ms", "turns",
            "tokens", "tool_calls", "errors", "anomalies", "frame_count", "_text")

    def rows(cat):
        return sorted(tuple(r.get(k) for k in keys) for r in cat.rows)

    assert len(fast.rows) == 3 and rows(fast) == rows(cold)
    hit = fast.page(q="okapi-needle")["rows"]
    assert [r["source_file"] for r in hit] == [str(b)]

    # another session appended with the entries turned off: no entry, the file is read afresh
    _record(a, "tapir-needle", env={**os.environ, "WIRE_UI_RECORD_INDEX": "0"})
    assert not os.path.exists(log)
    changed = build(home)
    assert opened == ["a.db", "a.db"] and changed.files_read == 1 and len(changed.rows) == 4
    assert [r["name"] for r in changed.page(q="tapir-needle")["rows"]] != []


def test_garbled_forged_and_stale_entries_are_ignored(home, monkeypatch):
    from wire_recorder.analysis.ui.data import _file_sig, index_cache_path
    from wire_recorder.analysis.ui.recindex import log_path

    a, b = home / "a.db", home / "b.db"
    _record(a, "zebra-needle")
    _record(b, "okapi-needle", env={**os.environ, "WIRE_UI_RECORD_INDEX": "0"})
    log = log_path()
    good = open(log, "rb").read()
    row = orjson.loads(good)["rows"][0]
    forged = [
        b"not json at all\n",
        b'{"path": ["x"], "sig": [1, 2, null, null], "rows": []}\n',
        # a's true signature, but a row the cache would not hold: the line is skipped
        orjson.dumps({"path": str(a), "sig": list(_file_sig(str(a))),
                      "rows": [row | {"turns": "many", "name": "forged"}]}) + b"\n",
        # b's rows under a signature the file does not have
        orjson.dumps({"path": str(b), "sig": [1, 2, None, None],
                      "rows": [row | {"name": "forged"}]}) + b"\n",
        good[:len(good) // 2] + b"\n",  # torn
    ]
    with open(log, "wb") as fh:
        fh.write(b"".join(forged))
    build, opened = _builds(monkeypatch)
    cat = build(home)
    assert sorted(opened) == ["a.db", "a.db", "b.db", "b.db"] and cat.files_read == 2
    assert "forged" not in {r["name"] for r in cat.rows} and len(cat.rows) == 2
    assert not os.path.exists(log) and os.path.exists(index_cache_path())
    # a true entry of a file whose time has changed since is stale: the file is read
    with open(log, "wb") as fh:
        fh.write(good)
    os.utime(a, ns=(1, 1))
    os.unlink(index_cache_path())
    again = build(home)
    assert "a.db" in opened and again.files_read == 2
