"""wire-redact on recordings made with `wire-proxy --no-redact` from the real `kimi --wire`: the
seeded secrets' bytes are gone from the .db, its .blobs sidecar and the transcript (read as raw
bytes), the frame counts stay, and the redacted recording still reads and replays green against
the unchanged agent. Then the rewrite's edges: --dry-run, a file being recorded, a transcript
without secrets, an old schema, --config."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import orjson
import pytest

from tests.harness.kimi_peer import KimiRun, msg_id, script, text, usage
from tests.harness.replay import cli_json
from tests.harness.scripted_client import ClientPlan, Prompt
from tests.harness.wire import Scenario, check_scenario, run_scenario
from wire_recorder.analysis.rewrite import rewrite
from wire_recorder.recorder.handoff import wait_for_loaders
from wire_recorder.recorder.redact import PLACEHOLDER_RE
from wire_recorder.recorder.store import INLINE_MAX

BIN = Path(sys.executable).parent
DATA = Path(__file__).parent / "data"


def _fake(seed: str, n: int) -> str:
    """A token body that looks random and is the same on every run (no literal key in here)."""
    return hashlib.sha256(seed.encode()).hexdigest()[:n]


API_KEY = "sk-" + _fake("wire-redact api key", 40)
BEARER = _fake("wire-redact bearer", 36)
SECRETS = [API_KEY, BEARER]
BIG = "lorem ipsum " * (INLINE_MAX // 10)  # over INLINE_MAX: the frame goes to the sidecar

SCENARIO = Scenario(
    name="seeded_secrets",
    description="secrets in a prompt, in the agent's text and in a prompt over 256 KiB",
    session_id="wr-seeded-secrets",
    scripts=[
        script(msg_id("msg-1"), usage(20, 5), text(f"Noted: your key is {API_KEY}.")),
        # the long prompt is over the context size: kimi compacts first (one more LLM call)
        script(msg_id("msg-2"), usage(30, 5), text("Summary: a key was noted.")),
        script(msg_id("msg-3"), usage(30, 5), text("Read the long one.")),
    ],
    plan=ClientPlan(prompts=[
        Prompt(f"Remember my key {API_KEY} and send Authorization: Bearer {BEARER}"),
        Prompt(BIG + f" the key again: {API_KEY}"),
    ]),
)


def cli(name: str, *args: str | os.PathLike, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / name), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def file_bytes(*paths: Path) -> bytes:
    return b"".join(p.read_bytes() for p in paths if p.exists())


def frame_counts(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT session_id, direction, count(*), count(blob_offset) FROM "
                           "frames GROUP BY ALL ORDER BY ALL").fetchall()
    finally:
        con.close()


def texts_in(db: Path) -> str:
    """Every text the recording holds through DuckDB (the bytes on disk may be compressed)."""
    from wire_recorder.recorder.store import open_store

    with open_store(str(db), read_only=True) as store:
        out = [orjson.dumps(store.sessions(), default=str).decode()]
        for s in store.sessions():
            for f in store.frames(s["session_id"]):
                out += [bytes(f.raw).decode("utf-8", "replace"), f.payload or ""]
    return "\n".join(out)


@pytest.fixture(scope="module")
def recorded(kimi_exe, tmp_path_factory):
    d = tmp_path_factory.mktemp("redact")
    db = d / "seeded.db"
    result = run_scenario(SCENARIO, [str(BIN / "wire-proxy"), "-q", "--no-redact", "--db", str(db),
                                     "--name", SCENARIO.name, "--"], kimi=kimi_exe)
    assert check_scenario(SCENARIO, result) == []
    # the tests copy the file's bytes: only once the loader, which outlives the proxy, is done
    wait_for_loaders(str(db), limit=600)
    return db


def test_wire_redact_removes_the_secrets_bytes(recorded, kimi_exe, tmp_path):
    db = tmp_path / "seeded.db"
    db.write_bytes(recorded.read_bytes())
    blobs = Path(f"{db}.blobs")
    blobs.write_bytes(Path(f"{recorded}.blobs").read_bytes())
    transcript = tmp_path / "seeded.jsonl"
    p = cli("wire-export", db, "-o", transcript)
    assert p.returncode == 0, p.stderr
    # the recording holds them as they were said: the test means something
    before = frame_counts(db)
    assert any(n for *_, n in before), "no frame in the sidecar"
    for s in SECRETS:
        assert s.encode() in file_bytes(db, blobs), s
        assert s.encode() in transcript.read_bytes(), s
        assert s in texts_in(db)

    p = cli("wire-redact", db, transcript)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    lines = p.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"{db}: ") and "secrets replaced" in lines[0]

    for s in SECRETS:
        for path in (db, blobs, transcript):
            assert s.encode() not in path.read_bytes(), (s, path)
        assert s not in texts_in(db)
    assert PLACEHOLDER_RE.search(blobs.read_bytes())
    assert PLACEHOLDER_RE.search(transcript.read_bytes())
    assert frame_counts(db) == before
    for path in (db, blobs, transcript):
        assert path.stat().st_mode & 0o777 == 0o600, path
    # nothing is left beside them: no temp file, no WAL
    assert sorted(x.name for x in tmp_path.iterdir()) == ["seeded.db", "seeded.db.blobs",
                                                         "seeded.jsonl"]
    con = duckdb.connect(str(db), read_only=True)
    (redaction,) = con.execute("SELECT redaction FROM sessions").fetchone()
    con.close()
    record = orjson.loads(redaction)
    assert "token-shapes" in record["rules"] and "bearer" in record["rules"]

    # it still reads
    p = cli("wire-query", db, "SELECT count(*) AS n FROM turns", "-f", "csv")
    assert p.returncode == 0 and p.stdout.splitlines() == ["n", "2"], p.stderr
    p = cli("wire-show", db)
    assert p.returncode == 0 and "REDACTED:" in p.stdout, p.stderr

    # and replays green against the unchanged agent, the .db and the transcript alike
    for path in (db, transcript):
        run = KimiRun.create(SCENARIO.scripts, session_id=SCENARIO.session_id, kimi=kimi_exe,
                             tmp_root=tmp_path)
        try:
            extra = {k: v for k, v in run.env().items() if os.environ.get(k) != v}
            args = [str(path), "--frame-timeout", "60", "--cwd", str(run.workdir)]
            for k, v in sorted(extra.items()):
                args += ["--env", f"{k}={v}"]
            code, report = cli_json([*args, "--", *run.argv()])
        finally:
            run.cleanup()
        # the agent's own text holds the secret, the recording its placeholder: replay masks it
        assert code == 0 and report["ok"], (path.name, report["divergences"][:3])


def test_dry_run_changes_nothing(recorded, tmp_path):
    db = tmp_path / "dry.db"
    db.write_bytes(recorded.read_bytes())
    Path(f"{db}.blobs").write_bytes(Path(f"{recorded}.blobs").read_bytes())
    before = file_bytes(db, Path(f"{db}.blobs"))
    p = cli("wire-redact", "--dry-run", db)
    assert p.returncode == 0, p.stderr
    assert file_bytes(db, Path(f"{db}.blobs")) == before
    session_line, total = p.stdout.splitlines()
    assert "would change" in session_line and "secrets" in session_line
    assert total.startswith(f"{db}: ") and "to replace" in total


def test_a_file_being_recorded_is_refused(tmp_path):
    db = tmp_path / "live.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from wire_recorder.recorder.store import "
         "open_store; s = open_store(sys.argv[1]); print('ready', flush=True); time.sleep(60)",
         str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        p = cli("wire-redact", db)
    finally:
        holder.kill()
        holder.wait()
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("wire-redact: ")
    assert "in use by another process" in p.stderr and "Traceback" not in p.stderr


def test_a_file_with_a_spool_beside_it_is_refused(tmp_path):
    db = tmp_path / "r.db"
    db.write_bytes((DATA / "schema3.db").read_bytes())
    spool = tmp_path / "r.db.0123abcd.spool"
    spool.write_bytes(b"")
    before = db.read_bytes()
    p = cli("wire-redact", db)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert "recover" in p.stderr and spool.name in p.stderr
    assert db.read_bytes() == before


def test_bad_inputs_are_one_line_each_and_the_others_are_done(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_bytes((Path(__file__).parents[1] / "sample_sessions" / "question.jsonl").read_bytes())
    junk = tmp_path / "junk.txt"
    junk.write_text("not a recording\n")
    # a path that names nothing: nothing is done
    p = cli("wire-redact", good, tmp_path / "missing.db")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("wire-redact: ") and "no such" in p.stderr
    # a file that is not a recording: one line, and the other files are done
    p = cli("wire-redact", junk, good)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "neither a DuckDB file nor a .jsonl" in p.stderr
    assert p.stdout.startswith(f"{good}: 0 of ")


def test_a_transcript_without_secrets_is_left_as_it_is(tmp_path):
    sample = Path(__file__).parents[1] / "sample_sessions" / "approve_shell.jsonl"
    t = tmp_path / "t.jsonl"
    t.write_bytes(sample.read_bytes())
    p = cli("wire-redact", t)
    assert p.returncode == 0, p.stderr
    assert "0 secrets replaced (left as it is)" in p.stdout
    assert t.read_bytes() == sample.read_bytes()


def test_an_old_schema_file_is_rewritten_to_the_current_one(tmp_path):
    from wire_recorder.recorder.store import SCHEMA_VERSION, open_store

    db = tmp_path / "old.db"
    db.write_bytes((DATA / "schema1.db").read_bytes())
    with open_store(str(db), read_only=True) as store:
        old_frames = {s["session_id"]: len(store.frames(s["session_id"]))
                      for s in store.sessions()}
    p = cli("wire-redact", db)
    assert p.returncode == 0, p.stderr
    with open_store(str(db), read_only=True) as store:
        assert store.version == SCHEMA_VERSION
        assert {s["session_id"]: len(store.frames(s["session_id"]))
                for s in store.sessions()} == old_frames


def test_config_adds_rules(tmp_path):
    """--config FILE: a project's own pattern, here the name of an internal host."""
    sample = Path(__file__).parents[1] / "sample_sessions" / "approve_shell.jsonl"
    t = tmp_path / "t.jsonl"
    t.write_bytes(sample.read_bytes().replace(b"echo hello", b"echo build-07.corp.internal"))
    cfg = tmp_path / "extra.toml"
    cfg.write_text('[redact]\npatterns = ["[a-z0-9-]+\\\\.corp\\\\.internal"]\n')
    p = cli("wire-redact", "--config", cfg, t)
    assert p.returncode == 0, p.stderr
    assert b"corp.internal" not in t.read_bytes() and PLACEHOLDER_RE.search(t.read_bytes())
    bad = tmp_path / "bad.toml"
    bad.write_text("[redact]\nunknown = 1\n")
    p = cli("wire-redact", "--config", bad, t)
    assert p.returncode == 2 and p.stderr.startswith("wire-redact: ") and "unknown" in p.stderr


class _Upper:
    """A stand-in redactor: the mechanics of the rewrite do not depend on the rules."""

    rules = ["upper"]

    def redact_bytes(self, raw: bytes) -> bytes:
        return raw.replace(b"hello", b"REDACTED:000000000001")

    def redact_text(self, text: str) -> str:
        return self.redact_bytes(text.encode()).decode()

    def redact_json(self, obj):
        return orjson.loads(self.redact_bytes(orjson.dumps(obj)))


def test_a_sidecar_no_frame_needs_any_more_is_removed(tmp_path):
    """A frame that redaction brings under INLINE_MAX goes inline; the old sidecar goes."""
    from wire_recorder.recorder.transcript import import_transcript

    payload = "hello" * (INLINE_MAX // 5 + 10)
    line = orjson.dumps({"dir": "c2a", "frame": {"jsonrpc": "2.0", "method": "prompt", "id": 1,
                                                 "params": {"user_input": payload}}})
    t = tmp_path / "big.jsonl"
    t.write_bytes(b'{"wire_transcript":1,"session":{"session_id":"s1"}}\n' + line + b"\n")
    db = tmp_path / "big.db"
    import_transcript(str(t), str(db))
    blobs = Path(f"{db}.blobs")
    assert blobs.exists() and b"hello" in blobs.read_bytes()
    # the placeholder is longer than "hello": make the frame small instead
    r = rewrite(str(db), _Shrink(), placeholder_re=PLACEHOLDER_RE)
    assert r.written and r.frames_changed == 1
    assert not blobs.exists()
    assert b"hellohello" not in db.read_bytes()


class _Shrink(_Upper):
    def redact_bytes(self, raw: bytes) -> bytes:
        return raw.replace(b"hello", b"")
