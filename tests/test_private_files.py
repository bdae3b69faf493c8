"""Every file wire-recorder creates is its owner's only (0600; folders 0700), whatever the umask:
recordings and their sidecars (wire-proxy, wire-import), exports (transcript, JSONL, Parquet),
HTML reports, replay reports and updated recordings, and wire-redact's rewrites. Each command
runs under umask 022, the common default that would make them world-readable."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.proxy import echo_agent_cmd
from wire_recorder.recorder.handoff import wait_for_loaders
from wire_recorder.recorder.store import INLINE_MAX

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_sessions"


def run(name: str, *args: str | os.PathLike, data: bytes = b"", cwd: Path | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / name), *map(str, args)], input=data, capture_output=True,
                          timeout=timeout, cwd=cwd, preexec_fn=lambda: os.umask(0o022))


def assert_private(root: Path) -> None:
    bad = {}
    for p in [root, *root.rglob("*")]:
        mode = p.stat().st_mode & 0o777
        want = 0o700 if stat.S_ISDIR(p.stat().st_mode) else 0o600
        if mode != want:
            bad[str(p)] = oct(mode)
    assert not bad, bad


@pytest.fixture
def out(tmp_path) -> Path:
    """A folder of the command's output, itself made 0700 by the commands that create it."""
    return tmp_path / "out"


def test_wire_proxy_recording_db_sidecar_and_folders(tmp_path, out):
    big = b'{"jsonrpc":"2.0","method":"x","params":{"s":"' + b"a" * (INLINE_MAX + 10) + b'"}}\n'
    data = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n' + big
    db = out / "day" / "rec.db"
    p = run("wire-proxy", "-q", "--db", db, "--", *echo_agent_cmd(), data=data)
    assert p.returncode == 0, p.stderr
    assert p.stdout == data  # relayed as it came
    wait_for_loaders(str(db))  # the proxy exits before its loader has stored the session
    assert Path(f"{db}.blobs").exists()
    # no spool left, the DB, its sidecar and the folders made for them: owner only
    assert sorted(x.name for x in db.parent.iterdir()) == ["rec.db", "rec.db.blobs"]
    assert_private(out)


def test_wire_import_db(tmp_path, out):
    out.mkdir(mode=0o700)
    p = run("wire-import", SAMPLES / "approve_shell.jsonl", "--db", out / "imported.db")
    assert p.returncode == 0, p.stderr
    assert_private(out)


def test_wire_export_transcript_jsonl_and_parquet(tmp_path, out):
    out.mkdir(mode=0o700)
    src = SAMPLES / "approve_shell.jsonl"
    for fmt, name in (("transcript", "t.jsonl"), ("jsonl", "frames.jsonl")):
        p = run("wire-export", src, "--format", fmt, "-o", out / name)
        assert p.returncode == 0, p.stderr
    p = run("wire-export", src, "--format", "parquet", "--out", out / "pq")
    assert p.returncode == 0, p.stderr
    assert len(list((out / "pq").rglob("*.parquet"))) == 2
    assert_private(out)
    # a file that was there, readable by all, is written over and made the owner's only
    existing = out / "old.jsonl"
    existing.write_text("old\n")
    existing.chmod(0o644)
    p = run("wire-export", src, "-o", existing)
    assert p.returncode == 0, p.stderr
    assert_private(out)


def test_wire_show_html(tmp_path, out):
    out.mkdir(mode=0o700)
    p = run("wire-show", SAMPLES / "approve_shell.jsonl", "--html", out / "report.html")
    assert p.returncode == 0, p.stderr
    assert_private(out)


def test_export_transcript_library_function(tmp_path, out):
    from wire_recorder.recorder.transcript import export_transcript, import_transcript

    out.mkdir(mode=0o700)
    db = out / "x.db"
    old = os.umask(0o022)
    try:
        import_transcript(str(SAMPLES / "approve_shell.jsonl"), str(db))
        export_transcript(str(db), str(out / "x.jsonl"))
    finally:
        os.umask(old)
    assert_private(out)


def test_wire_redact_rewrites(tmp_path, out):
    out.mkdir(mode=0o700)
    t = out / "t.jsonl"
    t.write_bytes((SAMPLES / "approve_shell.jsonl").read_bytes().replace(
        b"Run echo hello", b"Run echo hello with password=" + b"hunter2-" * 3))
    t.chmod(0o644)
    p = run("wire-import", t, "--db", out / "t.db")
    assert p.returncode == 0, p.stderr
    p = run("wire-redact", t, out / "t.db")
    assert p.returncode == 0, p.stderr
    assert b"hunter2" not in t.read_bytes()
    assert sorted(x.name for x in out.iterdir()) == ["t.db", "t.jsonl"]
    assert_private(out)


def test_wire_replay_report_and_update(kimi_exe, tmp_path, out):
    from tests.harness.replay import Agent

    out.mkdir(mode=0o700)
    rec = out / "rec.jsonl"
    rec.write_bytes((SAMPLES / "approve_shell.jsonl").read_bytes())
    rec.chmod(0o600)
    for report in ("r.json", "r.xml", "r.txt"):
        with Agent("approve_shell", tmp_root=tmp_path) as agent:
            p = subprocess.run(
                [str(BIN / "wire-replay"), str(rec), "--frame-timeout", "60", "--report",
                 str(out / report), *agent.cli_args()], capture_output=True, timeout=180,
                preexec_fn=lambda: os.umask(0o022))
        assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert json.loads((out / "r.json").read_text())["ok"] is True
    with Agent("approve_shell", tmp_root=tmp_path) as agent:
        p = subprocess.run(
            [str(BIN / "wire-replay"), str(rec), "--frame-timeout", "60", "--update", "-o",
             str(out / "updated.jsonl"), *agent.cli_args()], capture_output=True, timeout=180,
            preexec_fn=lambda: os.umask(0o022))
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert (out / "updated.jsonl").exists()
    assert_private(out)


def test_the_wal_of_a_store_open_for_writing_is_private(tmp_path):
    """DuckDB creates the .wal at its first write, after the connect: the umask stays 077 for as
    long as a store is open for writing, and comes back when the last one closes."""
    from wire_recorder.recorder.store import open_store

    old = os.umask(0o022)
    try:
        store = open_store(str(tmp_path / "w.db"))
        store.con.execute("CREATE TABLE scratch AS SELECT range AS x FROM range(1000)")
        wal = tmp_path / "w.db.wal"
        assert wal.exists()
        assert stat.S_IMODE(wal.stat().st_mode) == 0o600
        inner = open_store(str(tmp_path / "v.db"))
        inner.close()
        assert os.umask(0o077) == 0o077  # still private while the first store is open
        os.umask(0o077)
        store.close()
        assert os.umask(0o022) == 0o022  # the caller's umask is back
    finally:
        os.umask(old)
