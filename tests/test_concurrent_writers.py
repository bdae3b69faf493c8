"""Proxies recording into one `--db` at the same time: every session is stored whole, in that file.

Issue 28: of two proxies sharing a file, one session was lost entirely (a `sessions` row with 0
frames, no spool, no note). The loader's work-dir manifest read the recording itself (it sits in
the agent's folder), and closing that descriptor dropped DuckDB's lock, a POSIX record lock, so
a second loader opened the file for writing too. Here the proxies run in the folder that holds
the file, as an IDE's agents do with a shared WIRE_PROXY_DB.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading

import duckdb

from tests.harness.proxy import WIRE_PROXY, echo_agent_cmd, split_frames, wait_until
from wire_recorder.recorder.handoff import wait_for_loaders
from wire_recorder.recorder.model import COLUMNS, Frame
from wire_recorder.recorder.store import resolve_blobs

PROXIES = 4
# The done-criterion is 20 rounds of 4 (bench/bench_writers.py runs it); each round here costs
# 4 loaders' start on a shared machine, so the suite runs fewer.
ROUNDS = int(os.environ.get("WIRE_TEST_WRITER_ROUNDS", "3"))
FRAMES = 300


def _frames(tag: str) -> bytes:
    return b"".join(b'{"jsonrpc":"2.0","method":"prompt","id":%d,"params":{"from":"%s"}}\n'
                    % (i, tag.encode()) for i in range(FRAMES))


def _run_proxy(db: str, cwd: str, data: bytes, out: dict) -> None:
    p = subprocess.Popen([WIRE_PROXY, "--db", db, "--", *echo_agent_cmd()], cwd=cwd,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = p.communicate(data, timeout=300)
    out.update(rc=p.returncode, stdout=stdout, stderr=stderr)


def _stored(db: str) -> dict[str, dict]:
    """Per session: its row, and its frames per direction."""
    wait_for_loaders(db)
    con = duckdb.connect(db, read_only=True)
    try:
        sessions = con.execute("SELECT session_id, frame_count, lost_frames, end_reason "
                               "FROM sessions").fetchall()
        rows = con.execute(f"SELECT {', '.join(COLUMNS)} FROM frames ORDER BY session_id, seq"
                           ).fetchall()
        gaps = con.execute("SELECT session_id, direction, sum(json_extract(payload, '$.frames')::INT)"
                           " FROM frames WHERE method = 'recording_gap' GROUP BY ALL").fetchall()
    finally:
        con.close()
    frames = resolve_blobs([Frame(*r) for r in rows], db)
    out = {sid: {"frame_count": n, "lost": lost, "end": end, "c2a": [], "a2c": [], "gap": {}}
           for sid, n, lost, end in sessions}
    for f in frames:
        if f.direction in ("c2a", "a2c"):
            out[f.session_id][f.direction].append((bytes(f.raw), f.newline))
    for sid, direction, n in gaps:
        out[sid]["gap"][direction] = n
    return out


def test_proxies_sharing_one_db_each_store_every_frame(tmp_path):
    for round_no in range(ROUNDS):
        folder = tmp_path / f"round{round_no}"
        folder.mkdir()
        db = str(folder / "two.db")
        sent = {f"p{k}": _frames(f"r{round_no}p{k}") for k in range(PROXIES)}
        results: dict[str, dict] = {k: {} for k in sent}
        threads = [threading.Thread(target=_run_proxy, args=(db, str(folder), data, results[k]))
                   for k, data in sent.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for k, res in results.items():
            assert res["rc"] == 0, res["stderr"]
            assert res["stdout"] == sent[k]  # the relay is exact

        # every loader done: no spool left (the proxies exit before their loaders)
        assert wait_until(lambda f=folder: not list(f.glob("*.spool")), timeout=600), \
            sorted(os.listdir(folder))
        stored = {}
        for path in folder.glob("*.db"):  # sibling files too, should there be any
            stored.update(_stored(str(path)))
        assert len(stored) == PROXIES, stored.keys()
        by_origin = {}
        for sid, s in stored.items():
            assert s["c2a"], f"session {sid} has no frames (round {round_no})"
            tag = s["c2a"][0][0].split(b'"from":"')[1].split(b'"')[0].decode()
            by_origin[tag.split("p", 1)[1]] = s
        assert sorted(by_origin) == sorted(k[1:] for k in sent)
        for k, data in sent.items():
            s = by_origin[k[1:]]
            want = split_frames(data)
            assert s["end"] == "agent_exit" and s["lost"] == 0
            for direction in ("c2a", "a2c"):
                # stored + counted in gaps == relayed, and here nothing was lost
                assert len(s[direction]) + s["gap"].get(direction, 0) == len(want)
                assert s[direction] == want
            assert s["frame_count"] == 2 * len(want)
        # loaders of one file take turns: all in the file asked for, none in a sibling
        assert sorted(p.name for p in folder.glob("*.db")) == ["two.db"], "no sibling files"
        assert not list(folder.glob("*.lock")), "the writer lock is let go of and removed"


def test_a_writer_keeps_the_file_when_it_reads_it_for_another_reason(tmp_path):
    """The writer lock survives the writer opening and closing the file itself (DuckDB's POSIX
    lock does not): another process can neither write nor create it meanwhile."""
    from wire_recorder.recorder.store import open_store

    db = str(tmp_path / "held.db")
    try_write = ("import sys\nfrom wire_recorder.recorder.store import open_store\n"
                 "from wire_recorder.recorder.errors import DBLocked\n"
                 "try:\n    open_store(sys.argv[1], wait_for_loader=False).close()\n"
                 "except DBLocked as e:\n    print('locked:', e)\n")
    with open_store(db, wait_for_loader=False) as store:
        with open(db, "rb") as f:  # as the work-dir manifest did: this dropped DuckDB's lock
            f.read(16)
        res = subprocess.run([sys.executable, "-c", try_write, db], capture_output=True,
                             timeout=120)
        assert res.returncode == 0, res.stderr
        assert res.stdout.startswith(b"locked:"), res.stdout
        store.con.execute("SELECT 1").fetchall()
    assert not os.path.exists(db + ".lock")
    res = subprocess.run([sys.executable, "-c", try_write, db], capture_output=True,
                         timeout=120)
    assert res.returncode == 0 and res.stdout == b"", (res.stdout, res.stderr)


def test_a_real_kimi_session_shares_the_db_with_three_other_proxies(tmp_path, kimi_exe):
    """The real `kimi --wire` recorded into one file while three echo proxies record into it: its
    session is whole, as are theirs."""
    from sample_sessions.scenarios import SCENARIOS
    from tests.harness.wire import check_scenario, run_scenario

    db = str(tmp_path / "shared.db")
    sent = {f"p{k}": _frames(f"kimi-p{k}") for k in range(3)}
    results: dict[str, dict] = {k: {} for k in sent}
    threads = [threading.Thread(target=_run_proxy, args=(db, str(tmp_path), data, results[k]))
               for k, data in sent.items()]
    for t in threads:
        t.start()
    # (a shared, busy machine: kimi may take minutes to start beside the other proxies)
    base = SCENARIOS["approve_shell"]
    scenario = dataclasses.replace(base, plan=dataclasses.replace(
        base.plan, init_timeout=600.0, prompt_timeout=300.0, exit_timeout=60.0))
    kimi = run_scenario(scenario, [WIRE_PROXY, "--db", db, "--name", "kimi", "--"], timeout=900,
                        kimi=kimi_exe)
    for t in threads:
        t.join()
    assert check_scenario(scenario, kimi) == []
    for k, res in results.items():
        assert res["rc"] == 0 and res["stdout"] == sent[k], res["stderr"]
    assert wait_until(lambda: not list(tmp_path.glob("*.spool")), timeout=600)
    stored = _stored(db)
    assert len(stored) == 4
    con = duckdb.connect(db, read_only=True)
    try:
        ((kimi_sid,),) = con.execute("SELECT session_id FROM sessions WHERE name = 'kimi'").fetchall()
    finally:
        con.close()
    s = stored.pop(kimi_sid)
    assert s["c2a"] == [(f.raw, f.newline) for f in kimi.sent()]
    assert s["a2c"] == [(f.raw, f.newline) for f in kimi.received()]
    assert s["end"] == "agent_exit" and s["lost"] == 0
    got = sorted(b"".join(raw + b"\n" for raw, _ in s["c2a"]) for s in stored.values())
    assert got == sorted(sent.values())
    for s in stored.values():
        assert s["c2a"] == s["a2c"] and s["lost"] == 0 and s["end"] == "agent_exit"
