"""The agent's work dir at session start (recorder/workdir.py) and the work dir a replay runs in
(replay/workdir.py): the manifest's listing, bounds and redaction, untrusted manifests that must
never write outside the copy, and one real `kimi --wire` session recorded with
`--snapshot-workdir`, exported to a transcript and made again in a fresh dir."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.harness.kimi_peer import script, text
from tests.harness.scripted_client import ClientPlan, Prompt, run_client
from wire_recorder.recorder.handoff import wait_for_loaders
from wire_recorder.recorder.redact import Redactor
from wire_recorder.recorder.store import open_store
from wire_recorder.recorder.transcript import encode_session, read_transcript
from wire_recorder.recorder.workdir import (
    Entry,
    Limits,
    Manifest,
    agent_workdir,
    read_manifest,
    read_stored,
    safe_relpath,
    store_workdir,
    take_manifest,
)
from wire_recorder.replay import recording as replay_recording
from wire_recorder.replay.workdir import compare, materialize, prepare_workdir

BIN = Path(sys.executable).parent
SECRET = "sk-proj-Zq8vXb2Lm4Nc6Rt9Wy1Kd3Hf5Gj7Pa0Qe"


def _tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def _rows(m: Manifest) -> dict[str, Entry]:
    return m.by_path()


# -- the recorder's side --------------------------------------------------------------------------
def test_the_walk_skips_what_is_not_the_project_and_keeps_its_bounds(tmp_path):
    root = tmp_path / "w"
    _tree(root, {"a.txt": b"hello\n", "src/m.py": b"print(1)\n", "big.bin": b"\0" * 5000,
                 ".env": f"API_KEY={SECRET}\n".encode(), ".git/config": b"x",
                 "node_modules/p/i.js": b"x", ".venv/bin/python": b"x",
                 "src/__pycache__/m.pyc": b"x"})
    (root / "run.sh").write_bytes(b"#!/bin/sh\n")
    (root / "run.sh").chmod(0o4755)
    (root / "link").symlink_to("src/m.py")
    (root / "out").symlink_to("/etc")  # listed, never followed
    os.mkfifo(root / "fifo")  # never opened: reading it would block
    os.close(os.open(os.path.join(os.fsencode(root), b"bad-\xff"), os.O_CREAT | os.O_WRONLY))
    red = Redactor.from_config(str(tmp_path), env={})
    m = take_manifest(str(root), red, snapshot=True,
                      limits=Limits(file_max=1000, snapshot_max_bytes=40), listed="walk")
    e = _rows(m)
    assert m.source == "walk" and sorted(e) == [".env", "a.txt", "big.bin", "link", "out",
                                               "run.sh", "src/m.py"]
    assert e["a.txt"].sha256 == "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
    assert e["a.txt"].content == b"hello\n" and e["a.txt"].mode == 0o644
    # a file with a secret: stored redacted, and no hash to test guesses against
    assert e[".env"].sha256 is None and e[".env"].note == "redacted"
    assert SECRET.encode() not in e[".env"].content and b"REDACTED:" in e[".env"].content
    assert (e["link"].kind, e["link"].link, e["out"].link) == ("symlink", "src/m.py", "/etc")
    assert e["run.sh"].mode == 0o4755
    # bounds: over file_max (hashed, not kept), over the snapshot's total (kept out, cut)
    assert e["big.bin"].sha256 and e["big.bin"].content is None
    assert "over 0 KiB" in (e["big.bin"].note or "")
    kept = [p for p, x in e.items() if x.content is not None]
    assert sum(len(e[p].content or b"") for p in kept) <= 40 and m.cut
    assert any("not UTF-8" in n for n in m.notes) and any("special" in n for n in m.notes)
    s = m.summary()
    assert s["files"] == 7 and s["snapshot"] and s["snapshot_files"] == len(kept) and s["cut"]

    few = take_manifest(str(root), None, limits=Limits(max_files=2, max_hash_bytes=7),
                        listed="walk")
    assert len(few.entries) <= 3 and few.cut and any("more than 2 files" in n for n in few.notes)
    assert all(x.content is None for x in few.entries)  # no snapshot asked
    hashed = [x for x in few.entries if x.sha256]
    assert sum(x.size or 0 for x in hashed) <= 7


def test_a_git_work_tree_lists_tracked_and_untracked_files_but_not_ignored_ones(tmp_path):
    root = tmp_path / "repo"
    _tree(root, {".gitignore": b"build/\n*.log\n", "tracked.txt": b"t\n", "new.txt": b"n\n",
                 "build/out.o": b"x", "debug.log": b"x", "sub/.venv/kept": b"tracked here"})
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True, env=env)
    subprocess.run([*git, "add", ".gitignore", "tracked.txt", "sub/.venv/kept"], cwd=root,
                   check=True, env=env)
    (root / "tracked.txt").unlink()  # tracked but deleted: not there, not listed
    m = take_manifest(str(root / "."), None)
    assert m.source == "git" and not m.notes
    assert sorted(_rows(m)) == [".gitignore", "new.txt", "sub/.venv/kept"]
    sub = take_manifest(str(root / "sub"), None)  # paths relative to the dir, not the repo
    assert sorted(_rows(sub)) == [".venv/kept"]


def test_the_work_dir_is_kimis_work_dir_flag_else_the_cwd():
    assert agent_workdir(["/x/kimi", "--wire", "-w", "w"], "/p") == "/p/w"
    assert agent_workdir(["kimi", "acp", "--work-dir=/abs"], "/p") == "/abs"
    assert agent_workdir(["kimi", "--work-dir", "../up"], "/p/q") == "/p/up"
    assert agent_workdir(["other-agent", "-w", "w"], "/p") == "/p"
    assert agent_workdir(["kimi", "--wire"], "/p") == "/p"


def test_the_loader_step_stores_the_manifest_takes_none_late_and_never_raises(tmp_path, capsys):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "f.txt").write_text("x")
    meta = {"session_id": "s1", "command": ["kimi", "-w", "w"], "cwd": str(tmp_path),
            "started_wall_ns": time.time_ns(), "snapshot_workdir": True}
    with open_store(str(tmp_path / "r.db")) as store:
        for sid, late in (("s1", 0), ("s2", 300)):
            store.upsert_session({"session_id": sid})
            store_workdir(store, dict(meta, session_id=sid,
                                      started_wall_ns=meta["started_wall_ns"] - late * 10**9),
                          None)
        m1, m2 = (read_stored(store, store.session(s)) for s in ("s1", "s2"))
        store_workdir(None, meta, None)  # a store that fails: one line, no exception
    assert m1 and m1.workdir == str(tmp_path / "w") and m1.entries[0].content == b"x"
    assert m2 and m2.source is None and not m2.entries and "recovered" in m2.notes[0]
    assert "work dir manifest not stored" in capsys.readouterr().err


# -- untrusted manifests --------------------------------------------------------------------------
HOSTILE = [Entry("ok.txt", content=b"ok", mode=0o6777),
           Entry("../escape.txt", content=b"x"), Entry("/tmp/abs-escape.txt", content=b"x"),
           Entry("a/../../escape2.txt", content=b"x"), Entry("", content=b"x"),
           Entry("nul\0.txt", content=b"x"), Entry("ok.txt", content=b"again"),
           Entry("dir/f.txt", content=b"in a folder"),
           Entry("up", "symlink", link="../.."), Entry("abs", "symlink", link="/etc"),
           Entry("self", "symlink", link="."),
           # lexically inside, but through `self` it resolves to the copy's parent
           Entry("sneaky", "symlink", link="self/../escape3"),
           Entry("dir", "symlink", link="ok.txt"),  # a folder already: not replaced
           Entry("fine", "symlink", link="dir/f.txt")]


def test_a_hostile_manifest_writes_nothing_outside_the_copy(tmp_path):
    outer = tmp_path / "outer"
    root = outer / "copy"
    root.mkdir(parents=True)
    notes = materialize(Manifest("/w", list(HOSTILE), "walk", True), str(root))
    assert sorted(os.listdir(outer)) == ["copy"]
    assert sorted(os.listdir(root)) == ["dir", "fine", "ok.txt", "self"]
    assert (root / "ok.txt").read_bytes() == b"ok"
    assert (root / "ok.txt").stat().st_mode & 0o7777 == 0o755  # no set-id bits, no o+w
    assert (root / "fine").read_bytes() == b"in a folder"
    assert len(notes) == 2 and notes[0].startswith("9 paths") and "could not" in notes[1]
    assert all(not safe_relpath(p) for p in ("../x", "/x", "a//b", "a/./b", "", "a/..", 3))


def test_a_hostile_transcript_header_is_refused_or_kept_inside(tmp_path):
    head = {"wire_transcript": 2, "session": {"protocol": "wire", "cwd": "/w",
                                              "command": ["kimi", "--wire"]}}
    frame = b'{"dir":"c2a","frame":{"jsonrpc":"2.0","method":"initialize","id":1,"params":{}}}'
    bad = tmp_path / "bad.jsonl"
    for workdir, msg in ((["x"], "is not an object"), ({"entries": {}}, "not a list"),
                         ({"entries": [{"path": 1}]}, 'needs a "path"'),
                         ({"entries": [{"path": "a", "b64": "%%"}]}, "not valid base64"),
                         ({"entries": [{"path": "a", "size": True}]}, "wrong type")):
        bad.write_bytes(orjson.dumps(dict(head, workdir=workdir)) + b"\n" + frame + b"\n")
        with pytest.raises(Exception) as e:
            read_transcript(str(bad))
        assert msg in str(e.value) and "bad.jsonl:1" in str(e.value)
    files = [{"path": "../../escape.txt", "text": "x"}, {"path": "fine.txt", "b64": "AAE="},
             {"path": "l", "kind": "symlink", "link": "/etc/passwd"}]
    t = tmp_path / "t.jsonl"
    t.write_bytes(orjson.dumps(dict(head, workdir={"source": "walk", "snapshot": True,
                                                     "entries": files})) + b"\n" + frame + b"\n")
    plan = prepare_workdir(replay_recording.load(str(t)), None)
    try:
        assert plan.snapshot and plan.cwd and os.listdir(plan.cwd) == ["fine.txt"]
        assert (Path(plan.cwd) / "fine.txt").read_bytes() == b"\0\1"
        assert "(1 files from its snapshot)" in plan.notes[0] and "2 paths" in plan.notes[1]
        assert not (Path(plan.cwd).parent.parent / "escape.txt").exists()
    finally:
        plan.cleanup()
    assert not os.path.exists(plan.cwd)


# -- a real session -------------------------------------------------------------------------------
def test_a_real_session_records_its_work_dir_and_a_replay_starts_from_a_copy(kimi_run, tmp_path):
    run = kimi_run([script(text("hello"))])
    _tree(run.workdir, {"notes.txt": b"hello\n", ".env": f"API_KEY={SECRET}\n".encode(),
                        "src/tool.sh": b"#!/bin/sh\necho hi\n"})
    (run.workdir / "src" / "tool.sh").chmod(0o755)
    db = tmp_path / "rec.db"
    # the proxy runs in the run's root: the work dir is the one kimi's -w names
    res = run_client([str(BIN / "wire-proxy"), "-q", "--db", str(db), "--snapshot-workdir",
                      "--", *run.argv()], ClientPlan(prompts=[Prompt("hi")]), env=run.env(),
                     cwd=run.root, timeout=90)
    assert res.exit_code == 0 and not res.timed_out, res.stderr[-2000:]
    wait_for_loaders(str(db), limit=600)  # the proxy exits before its loader has stored it all
    assert SECRET.encode() not in db.read_bytes()

    with open_store(str(db), read_only=True) as store:
        session = store.session()
        rows = store.con.execute("SELECT path, size, sha256, mode, content, note FROM "
                                 "workdir_files ORDER BY path").fetchall()
    assert session["workdir"] == str(run.workdir)
    summary = orjson.loads(session["workdir_manifest"])
    assert (summary["source"], summary["files"], summary["snapshot"],
            summary["snapshot_files"]) == ("walk", 3, True, 3)
    by = {r[0]: r[1:] for r in rows}
    assert sorted(by) == [".env", "notes.txt", "src/tool.sh"]
    assert by["notes.txt"][3] == b"hello\n" and by["src/tool.sh"][2] == 0o755
    env_row = by[".env"]
    assert env_row[1] is None and env_row[4] == "redacted" and b"REDACTED:" in env_row[3]

    # to a transcript with wire-export, and back
    t = tmp_path / "rec.jsonl"
    out = subprocess.run([str(BIN / "wire-export"), str(db), "-o", str(t)], capture_output=True)
    assert out.returncode == 0, out.stderr
    data = t.read_bytes()
    head = orjson.loads(data.split(b"\n", 1)[0])
    assert SECRET.encode() not in data and str(run.root).encode() not in data
    assert [f["path"] for f in head["workdir"]["entries"]] == [".env", "notes.txt", "src/tool.sh"]
    assert head["workdir"]["files"] == 3 and head["workdir"]["snapshot"] is True
    assert "workdir" not in head["session"] and "workdir_manifest" not in head["session"]
    assert encode_session(*read_transcript(str(t))) == data  # read and written again: same bytes
    back = tmp_path / "back.db"
    imp = subprocess.run([str(BIN / "wire-import"), str(t), "--db", str(back)],
                         capture_output=True)
    assert imp.returncode == 0, imp.stderr
    again, first = read_manifest(str(back)), read_manifest(str(db))
    assert again and first and again.summary() == first.summary() == summary
    assert again.workdir == "/wire-recorder-workdir/work"  # the reader's stand-in for ${workdir}
    assert [(e.path, e.size, e.sha256, e.mode) for e in again.entries] == \
        [(e.path, e.size, e.sha256, e.mode) for e in first.entries]

    # a replay starts from a fresh copy of the snapshot, whatever the recorded dir holds now
    (run.workdir / "notes.txt").write_bytes(b"changed by the agent\n")
    for path in (db, t):
        plan = prepare_workdir(replay_recording.load(str(path)), None)
        try:
            assert plan.snapshot and plan.cwd and plan.cwd != str(run.workdir)
            copy = Path(plan.cwd)
            assert (copy / "notes.txt").read_bytes() == b"hello\n"
            assert os.access(copy / "src" / "tool.sh", os.X_OK)
            assert b"REDACTED:" in (copy / ".env").read_bytes()
            assert plan.differences == [] and \
                plan.notes[0].endswith("(3 files from its snapshot); --cwd DIR runs it in DIR instead")
        finally:
            plan.cleanup()
        assert not os.path.exists(plan.cwd)
        # a dir asked for (--cwd) is where the agent runs, compared with the snapshot's manifest
        given = prepare_workdir(replay_recording.load(str(path)), str(run.workdir))
        assert (given.cwd, given.snapshot) == (str(run.workdir), False)
        assert given.differences == ["changed notes.txt (size 6 -> 21)"]
        assert given.notes and "not in a fresh copy" in given.notes[0]

    # without a snapshot, the dir is compared with the manifest and the differences named
    (run.workdir / ".env").unlink()
    (run.workdir / "out.txt").write_bytes(b"new\n")
    assert first is not None
    for e in first.entries:
        e.content = None
    first.snapshot = False
    session_t, frames_t = read_transcript(str(t))
    manifest_only = tmp_path / "manifest-only.jsonl"
    manifest_only.write_bytes(encode_session(session_t, frames_t, workdir=first))
    plan = prepare_workdir(replay_recording.load(str(manifest_only)), str(run.workdir))
    assert (plan.cwd, plan.snapshot) == (str(run.workdir), False)
    assert plan.differences == ["missing .env", "changed notes.txt (size 6 -> 21)",
                                "extra out.txt"]
    assert compare(first, str(tmp_path / "nowhere")) == \
        [f"the work dir {tmp_path / 'nowhere'} does not exist"]

    # wire-redact with new rules redacts the stored files too, and keeps them
    rules = tmp_path / "rules" / "wire-recorder.toml"
    rules.parent.mkdir()
    rules.write_text('[redact]\npatterns = ["hel+o"]\n')
    t2 = tmp_path / "t2.jsonl"
    t2.write_bytes(data)
    r = subprocess.run([str(BIN / "wire-redact"), "--config", str(rules), str(back), str(t2)],
                       capture_output=True)
    assert r.returncode == 0, r.stderr
    for p in (back, t2):
        m = read_manifest(str(p))
        assert m is not None and len(m.entries) == 3
        notes = m.by_path()["notes.txt"]
        assert notes.content and b"hello" not in notes.content and notes.sha256 is None


def test_a_recording_without_a_manifest_changes_nothing(tmp_path):
    db = tmp_path / "old.db"
    db.write_bytes((Path(__file__).parent / "data" / "schema4.db").read_bytes())
    plan = prepare_workdir(replay_recording.load(str(db)), str(tmp_path))
    assert (plan.cwd, plan.snapshot, plan.differences, plan.notes) == (str(tmp_path), False, [], [])
