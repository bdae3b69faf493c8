"""Readers bounded whatever their input (issue 28, items 4 and 5): wire-query's statement time
limit, wire-ui's answers to bad parameters and to a burst of parallel requests, and readers of a
big recording that show the first frames and say what they left out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.harness.ui_server import running_ui

BIN = Path(sys.executable).parent
SAMPLES = Path(__file__).resolve().parents[1] / "sample_sessions"

ENDLESS = "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"


def _run(argv, env=None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})}, **kw)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("limits")
    out = d / "s.db"
    res = _run([BIN / "wire-import", SAMPLES / "approve_shell.jsonl", "--db", out, "-q"])
    assert res.returncode == 0, res.stderr
    return out


def _one_line_exit_2(res: subprocess.CompletedProcess, prog: str) -> str:
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: "), res.stderr
    return lines[0]


def test_an_endless_recursive_query_is_stopped_by_the_time_limit(db):
    line = _one_line_exit_2(_run([BIN / "wire-query", db, "--timeout", "1", ENDLESS]),
                            "wire-query")
    assert "longer than 1 s" in line and "--timeout" in line
    # the environment sets it too; a bad value is a usage error before anything runs
    line = _one_line_exit_2(_run([BIN / "wire-query", db, ENDLESS],
                                 env={"WIRE_QUERY_TIMEOUT": "1"}), "wire-query")
    assert "longer than 1 s" in line
    line = _one_line_exit_2(_run([BIN / "wire-query", db, "SELECT 1"],
                                 env={"WIRE_QUERY_TIMEOUT": "soon"}), "wire-query")
    assert "WIRE_QUERY_TIMEOUT" in line
    ok = _run([BIN / "wire-query", db, "--timeout", "0", "-f", "csv", "SELECT 41 + 1 AS n"])
    assert ok.returncode == 0 and ok.stdout == "n\n42\n", ok.stderr


@pytest.fixture(scope="module")
def ui(db, tmp_path_factory):
    with running_ui(db, cache=tmp_path_factory.mktemp("cache")) as (get, port, proc):
        yield {"get": get, "proc": proc, "port": port}


def test_wire_ui_answers_400_to_bad_numbers(ui):
    get = ui["get"]
    key = json.loads(get("/api/index")[1])["rows"][0]["key"]
    k = urllib.parse.quote(key)
    for path in (f"/api/index?offset={2**70}", "/api/index?offset=-1", "/api/index?limit=x",
                 f"/api/items?k={k}&from={2**64}", f"/api/frames?k={k}&seq=1&n={2**80}",
                 f"/api/related?k={k}&seq=abc", f"/api/related?k={k}", "/api/report?n=1e3"):
        status, body = get(path)
        assert status == 400, (path, status, body)
        assert "error" in json.loads(body)
    assert get("/api/index?offset=0")[0] == 200  # and it still serves


def test_wire_ui_answers_every_one_of_200_parallel_requests(ui):
    get = ui["get"]
    key = urllib.parse.quote(json.loads(get("/api/index")[1])["rows"][0]["key"])
    paths = [f"/api/frames?k={key}&seq={1 + i % 10}&n=5" if i % 2 else "/api/index"
             for i in range(200)]
    with ThreadPoolExecutor(200) as pool:
        statuses = list(pool.map(lambda p: get(p)[0], paths))
    assert statuses == [200] * 200


def test_wire_ui_logs_no_traceback_when_clients_hang_up(ui):
    import socket

    port = ui["port"]
    for _ in range(20):  # ask, then leave (a reset) before the answer is read
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(b"GET /api/index HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
    assert ui["get"]("/api/index")[0] == 200
    ui["proc"].terminate()
    _, err = ui["proc"].communicate(timeout=60)
    assert "Traceback" not in err, err


# -- a big recording: the first frames shown, the rest said to be left out ----------------------
BIG = 200_000


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """One session of 200,017 client/agent frames: a real recording grown with DuckDB SQL in the
    store's own schema (bench/bench_big.py, which measures 10^7)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    try:
        from bench_big import build
    finally:
        sys.path.pop(0)
    path = tmp_path_factory.mktemp("big") / "big.db"
    build(str(path), BIG)
    return path


def test_wire_show_of_a_big_recording_shows_the_first_frames_and_says_so(big):
    from wire_recorder.analysis.show import SHOW_MAX

    res = _run([BIN / "wire-show", big])
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("session approve_shell")
    last = res.stdout.strip().splitlines()[-1]
    assert last.startswith(f"… {BIG + 22 - SHOW_MAX:,} more frames left out"), last
    assert f"the first {SHOW_MAX:,} of {BIG + 22:,}" in last


def test_wire_check_of_a_big_recording_checks_the_first_frames_and_says_so(big):
    res = _run([BIN / "wire-check", big, "--max-frames", "50000"])
    assert res.returncode == 0, res.stderr
    assert f"… {BIG + 17 - 50_000:,} more frames left out: the first 50,000 were checked" \
        in res.stdout
    res = _run([BIN / "wire-check", big, "--json", "--max-frames", "50000"])
    assert json.loads(res.stdout)["sessions"][0]["frames_left_out"] == BIG + 17 - 50_000


def test_wire_ui_pages_a_big_session(big, tmp_path):
    from wire_recorder.analysis.ui.data import READ_MAX

    assert BIG > READ_MAX
    def get(path: str) -> dict:
        status, body = get_raw(path)
        assert status == 200, (path, status)
        return json.loads(body)

    with running_ui(big, cache=tmp_path, timeout=600) as (get_raw, _, _):
        key = urllib.parse.quote(get("/api/index")["rows"][0]["key"])
        assert get(f"/api/session?k={key}")["counts"]["frames"] == BIG + 22
        first = get(f"/api/items?k={key}&from=0&n=2000")
        # one request read a bounded share of the session: there is more, and it is answered
        assert first["items"] and first["more"] is True
        nxt = get(f"/api/items?k={key}&from={first['items_total']}&n=2000")
        assert nxt["items_total"] >= first["items_total"]
        frames = get(f"/api/frames?k={key}&seq={BIG}&n=10")["frames"]
        assert [f["seq"] for f in frames][:1] == [BIG]
