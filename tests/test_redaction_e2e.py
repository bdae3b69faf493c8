"""Redaction on capture, end to end: seeded fake secrets (tests/harness/secrets.py) travel through
the real `wire-proxy` in front of the real `kimi --wire`, `kimi acp` (ACP SDK client) and the MCP
SDK client and demo server, in prompts, tool arguments and output, the agent's text, ACP
`session/new` mcpServers env and headers, MCP `initialize`, the agent's argv, environment and
stderr, and a frame over 256 KiB. The client and the agent get every secret unchanged; none of
their bytes is in the recording, its blob sidecar or any export (transcript, JSONL, Parquet,
HTML); the redacted recordings still replay green against the unchanged agent and with --serve.

One recording per protocol, shared by the module (the ACP one needs a small HTTP MCP server up
while kimi connects to it, during the recording and the replay).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.harness import secrets as sx
from tests.harness.acp import AcpRun, check_acp_scenario, run_acp_scenario
from tests.harness.kimi_peer import KimiRun
from tests.harness.mcp import check_mcp_scenario, run_mcp_scenario
from tests.harness.proxy import db_rows, echo_agent_cmd, run_proxy
from tests.harness.scripted_client import run_client
from tests.harness.wire import check_scenario, run_scenario
from wire_recorder.recorder.redact import FRAGMENT_MIN, PLACEHOLDER_RE

BIN = Path(sys.executable).parent
WIRE_PROXY = str(BIN / "wire-proxy")
WIRE_REPLAY = str(BIN / "wire-replay")


@dataclass
class Recorded:
    folder: Path  # the recording, its sidecar and its exports: nothing else
    db: Path
    result: Any  # what the client saw


def proxy(db: Path, name: str) -> list[str]:
    return [WIRE_PROXY, "-q", "--db", str(db), "--name", name, "--"]


def cli(*args: str | Path, timeout: float = 120, **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / str(args[0])), *map(str, args[1:])], capture_output=True,
                          timeout=timeout, **kw)


def ui_index(folder: Path) -> None:
    """wire-ui's index of the folder, as its start builds it: the loader's entry log folded into
    its cache (`folder/cache/wire-recorder/ui-index.json.z`, XDG_CACHE_HOME of the recording)."""
    code = ("import sys; from wire_recorder.analysis.ui.data import Catalog; "
            "Catalog([sys.argv[1]]).build()")
    p = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, timeout=120,
                       env={**os.environ, "XDG_CACHE_HOME": str(folder / "cache")})
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert (folder / "cache" / "wire-recorder" / "ui-index.json.z").exists()


def cache_hits(folder: Path, names: Iterable[str]) -> dict[str, list[str]]:
    """Secrets in wire-ui's cache and log, in any case (its search text is lower-cased)."""
    hits: dict[str, list[str]] = {}
    for p in sorted((folder / "cache").rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            data = (zlib.decompress(data) if p.suffix == ".z" else data).lower()
            found = [n for n in names if any(x.lower() in data for x in sx.needles(sx.SECRETS[n]))]
            if found:
                hits[str(p.relative_to(folder))] = found
    return hits


def export_everything(folder: Path, db: Path) -> None:
    """Every export beside the recording: transcript, JSONL, Parquet, the HTML report, and
    wire-ui's index cache."""
    argvs: list[list[str | Path]] = [
        ["wire-export", db, "--format", "transcript", "-o", folder / "export.transcript.jsonl"],
        ["wire-export", db, "--format", "jsonl", "-o", folder / "export.frames.jsonl"],
        ["wire-export", db, "--format", "parquet", "-o", folder / "parquet"],
        ["wire-show", db, "--html", folder / "report.html"],
    ]
    for argv in argvs:
        p = cli(*argv)
        assert p.returncode == 0, (argv, p.stderr.decode()[-2000:])
    assert list((folder / "parquet").rglob("*.parquet")), "no Parquet file written"
    ui_index(folder)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with sx.http_mcp_server() as url:
        yield url


def record_wire(folder: Path, kimi_exe: Path, *proxy_options: str) -> Recorded:
    db = folder / "wire.db"
    sc = sx.WIRE_SCENARIO
    prefix = proxy(db, sc.name)
    prefix[1:1] = proxy_options
    # the proxy's own environment holds WR_DEPLOY_TOKEN; sh writes the stderr line, env puts
    # FAKE_API_KEY into the agent's argv, then kimi's argv follows
    result = run_scenario(sc, [*prefix, *sx.wire_agent([])], kimi=kimi_exe,
                          env={**sx.WIRE_ENV, "XDG_CACHE_HOME": str(folder / "cache")})
    assert check_scenario(sc, result) == []
    export_everything(folder, db)
    return Recorded(folder, db, result)


@pytest.fixture(scope="module")
def wire_rec(tmp_path_factory, kimi_exe) -> Recorded:
    return record_wire(tmp_path_factory.mktemp("wire-rec"), kimi_exe)


@pytest.fixture(scope="module")
def acp_rec(tmp_path_factory, kimi_exe, acp_python, mcp_peers, http_url) -> Recorded:
    folder = tmp_path_factory.mktemp("acp-rec")
    db = folder / "acp.db"
    sc = sx.acp_scenario(http_url)
    with pytest.MonkeyPatch.context() as mp:  # the proxy's loader logs wire-ui's entry there
        mp.setenv("XDG_CACHE_HOME", str(folder / "cache"))
        result = run_acp_scenario(sc, [*proxy(db, sc.name), *sx.acp_agent([])], kimi=kimi_exe,
                                  acp_python=acp_python)
    assert check_acp_scenario(sc, result) == []
    export_everything(folder, db)
    return Recorded(folder, db, result)


@pytest.fixture(scope="module")
def mcp_rec(tmp_path_factory, mcp_peers) -> Recorded:
    folder = tmp_path_factory.mktemp("mcp-rec")
    db = folder / "mcp.db"
    sc = sx.MCP_SCENARIO
    result = run_mcp_scenario(sc, proxy(db, sc.name),
                              env={**sx.MCP_ENV, "XDG_CACHE_HOME": str(folder / "cache")})
    assert check_mcp_scenario(sc, result) == [], result.stderr[-2000:]
    export_everything(folder, db)
    return Recorded(folder, db, result)


@pytest.fixture
def recs(request) -> dict[str, Recorded]:
    """The recording of the protocol a parametrized test names (fixtures started on demand)."""
    return {request.param: request.getfixturevalue(f"{request.param}_rec")}


PROTOCOLS = ("wire", "acp", "mcp")
SECRETS_OF = {"wire": sx.WIRE, "acp": sx.ACP, "mcp": sx.MCP}


def _where(hits: dict[str, list[str]]) -> str:
    return "; ".join(f"{f}: " + ", ".join(f"{n} ({sx.PLACES.get(n, '')})" for n in names)
                     for f, names in hits.items())


def fragments(folder: Path, names: Iterable[str]) -> dict[str, set[str]]:
    """{file [+ " (values)"]: secrets of which a piece of FRAGMENT_MIN bytes is in it}: what an
    agent's shortening for display (kimi's `head...tail` tool titles) leaves of a secret. Pieces
    of each line of a secret (a PEM block's lines), in the raw bytes of every file and the values
    of .db and .parquet files."""
    n = FRAGMENT_MIN
    windows: dict[bytes, str] = {}
    for name in names:
        for line in sx.SECRETS[name].encode().split():
            for i in range(len(line) - n + 1):
                windows[line[i:i + n]] = name
    hits: dict[str, set[str]] = {}
    for p in sorted(folder.rglob("*")):
        if not p.is_file():
            continue
        datas = {str(p.relative_to(folder)): p.read_bytes()}
        if p.suffix in (".db", ".parquet"):
            datas[f"{p.relative_to(folder)} (values)"] = sx.duckdb_text(p)
        for where, data in datas.items():
            found = {windows[w] for w in (data[i:i + n] for i in range(len(data) - n + 1))
                     if w in windows}
            if found:
                hits[where] = found
    return hits


# ---------------------------------------------------------------------------------------------
# the detector itself


def test_the_seeded_secrets_are_many_distinct_and_realistic():
    assert len(sx.SECRETS) >= 20 and len(set(sx.SECRETS.values())) == len(sx.SECRETS)
    shapes = ("sk-proj-", "sk-ant-", "AKIA", "ghp_", "glpat-", "xoxb-", "eyJ", "-----BEGIN PRIVATE KEY")
    for shape in shapes:
        assert any(v.startswith(shape) for v in sx.SECRETS.values()), shape


def test_the_scan_finds_every_secret_in_a_recording_made_with_no_redact(tmp_path):
    """The check has teeth: the same scan over a `--no-redact` recording of every secret finds
    each one, in the file's bytes or in its values (DuckDB may compress what it stores)."""
    frames = b"".join(json.dumps({"jsonrpc": "2.0", "method": "note", "params": {"v": v}}).encode() + b"\n"
                      for v in sx.SECRETS.values())
    db = tmp_path / "plain.db"
    p = run_proxy(["-q", "--no-redact", "--db", str(db), "--", *echo_agent_cmd()], frames)
    assert p.returncode == 0 and p.stdout == frames, p.stderr.decode()
    found = {n for names in sx.scan(tmp_path).values() for n in names}
    assert found == set(sx.SECRETS), set(sx.SECRETS) - found


def test_without_redaction_the_recording_and_every_export_would_hold_them(tmp_path, kimi_exe):
    """The same Wire session recorded with `--no-redact`: the scan finds every one of its
    secrets, and some in each file, so an empty scan of a redacted recording means something."""
    rec = record_wire(tmp_path, kimi_exe, "--no-redact")
    hits = sx.scan(tmp_path)
    # those streamed in pieces: no frame holds them whole (the HTML report joins them)
    whole = set(sx.WIRE) - set(sx.SPLIT_ONLY)
    assert {n for names in hits.values() for n in names} - set(sx.SPLIT_ONLY) == whole, \
        _where(hits)
    assert set(sx.SPLIT_ONLY) <= fragments(tmp_path, sx.SPLIT_ONLY).get(f"{rec.db.name} (values)",
                                                                        set())
    # wire-ui keeps the prompts and texts as search text: its cache would hold those
    assert len({n for names in cache_hits(tmp_path, sx.WIRE).values() for n in names}) >= 4
    files = {f.split(" ")[0].split("/")[0] for f in hits}
    assert {rec.db.name, rec.db.name + ".blobs", "export.transcript.jsonl", "export.frames.jsonl",
            "parquet", "report.html"} <= files, _where(hits)


# ---------------------------------------------------------------------------------------------
# the client and the agent got them unchanged


def test_wire_client_and_agent_got_the_secrets(wire_rec):
    r = wire_rec.result
    sent = b"\n".join(f.raw for f in r.frames if f.dir == "c2a")
    received = b"\n".join(f.raw for f in r.frames if f.dir == "a2c")
    assert set(sx.found_in(sent)) == {"openai_prompt", "db_url_password", "pem_private_key",
                                      "anthropic_big_frame"}
    # kimi echoes each prompt in TurnBegin, runs the Shell with the arguments its LLM gave, prints
    # its environment's token and argv's key, and says its text: all verbatim to the client
    assert set(sx.found_in(received)) == {
        "openai_prompt", "db_url_password", "pem_private_key", "anthropic_big_frame",
        "anthropic_tool_args", "aws_tool_output", "env_token", "openai_argv", "jwt_agent_text",
        *sx.SCANNER_SHAPES}
    # the Shell's arguments and one text came in pieces that cut a key
    events = [json.loads(f.raw)["params"] for f in r.frames
              if f.dir == "a2c" and b'"method":"event"' in f.raw]
    parts = [e["payload"]["arguments_part"] for e in events if e["type"] == "ToolCallPart"]
    assert len(parts) == 2 and sx.S["anthropic_tool_args"] not in "".join(parts)
    said = "".join(e["payload"]["text"] for e in events if e["type"] == "ContentPart"
                   and e["payload"].get("type") == "text")
    assert sx.S["moonshot_split_text"] in said
    assert not [e for e in events if sx.S["moonshot_split_text"] in json.dumps(e)]
    assert sx.found_in(r.stderr) == ["github_stderr"]
    big = [f for f in r.frames if f.dir == "c2a" and len(f.raw) > 256 * 1024]
    assert len(big) == 1 and sx.found_in(big[0].raw) == ["anthropic_big_frame"]


def test_acp_client_and_agent_got_the_secrets(acp_rec):
    r = acp_rec.result
    assert set(sx.found_in(r.raw_out)) == {"gitlab_prompt", "slack_shell", "bearer_header",
                                           "header_api_key", "mcp_env_password", "mcp_env_github"}
    # the Shell command (terminal/create) came from the agent, its output went back to it
    assert sx.found_in(r.raw_in) == ["slack_shell"]
    assert r.prompts[0]["requests"][1]["params"]["command"] == sx.ACP_SHELL


def test_mcp_client_and_server_got_the_secrets(mcp_rec):
    r = mcp_rec.result
    # the server forwarded the question in sampling/createMessage and echoed the action (with
    # the proxy environment's secret) in its result; its stderr came through
    assert r.summary["callback_log"][0]["messages"][0]["content"]["text"] == sx.MCP_QUESTION
    assert r.summary["results"][1]["content"] == [f"confirmed {sx.MCP_ACTION}: True (ok)"]
    assert sx.found_in(r.stderr_bytes) == ["aws_stderr"]


# ---------------------------------------------------------------------------------------------
# none of them is stored


@pytest.mark.parametrize("recs", PROTOCOLS, indirect=True)
def test_no_secret_in_the_recording_its_blobs_or_any_export(recs):
    ((protocol, rec),) = recs.items()
    files = sorted(str(p.relative_to(rec.folder)) for p in rec.folder.rglob("*") if p.is_file())
    assert {"export.transcript.jsonl", "export.frames.jsonl", "report.html"} <= set(files), files
    assert not [f for f in files if f.endswith(".spool")], files  # raw bytes only until stored
    hits = sx.scan(rec.folder)
    assert hits == {}, f"secrets stored: {_where(hits)}"
    hits = cache_hits(rec.folder, SECRETS_OF[protocol])
    assert hits == {}, f"secrets in wire-ui's cache: {_where(hits)}"
    # nor a piece of one that an agent's shortening for display left (kimi's tool titles)
    pieces = fragments(rec.folder, SECRETS_OF[protocol])
    assert pieces == {}, f"pieces of secrets stored: {pieces}"
    # the secrets became placeholders (frames kept, not dropped)
    stored = sx.duckdb_text(rec.db)
    assert PLACEHOLDER_RE.search(stored), "no placeholder in the recording"
    rules = [r for (r,) in db_rows(str(rec.db), "SELECT redaction FROM sessions")]
    assert len(rules) == 1 and rules[0] and "off" not in str(rules[0]), rules


def test_the_big_frame_went_to_the_sidecar_redacted(wire_rec):
    blobs = wire_rec.db.with_name(wire_rec.db.name + ".blobs")
    assert blobs.exists() and blobs.stat().st_size > 256 * 1024
    rows = db_rows(str(wire_rec.db), "SELECT direction FROM frames WHERE blob_offset IS NOT NULL")
    assert sorted(d for (d,) in rows) == ["a2c", "c2a"]  # the prompt and kimi's TurnBegin echo
    assert sx.found_in(blobs.read_bytes()) == [] and PLACEHOLDER_RE.search(blobs.read_bytes())


# ---------------------------------------------------------------------------------------------
# the redacted recordings replay


def test_wire_replays_against_the_unchanged_agent(wire_rec, kimi_exe, tmp_path):
    """With the pinned model: it re-serves the streamed pieces as recorded (the key cut across
    the Shell's ToolCallParts, the one cut across two ContentParts), kimi joins them to the
    placeholder its approval and result got, and nothing diverges; the report holds no secret."""
    sc = sx.WIRE_SCENARIO
    report = tmp_path / "replay.json"
    with KimiRun.create(sc.scripts, session_id=sc.session_id, kimi=kimi_exe) as run:
        p = cli("wire-replay", wire_rec.db, "--cwd", run.workdir, "--report", report, "--",
                *sx.wire_agent(run.argv()), env={**run.env(), **sx.WIRE_ENV}, timeout=180)
    out = p.stdout.decode() + p.stderr.decode()
    assert p.returncode == 0, out[-4000:]
    assert json.loads(report.read_bytes())["ok"]
    # (its stderr passes the live agent's own stderr through, as a terminal would show it)
    for where, data in (("report", report.read_bytes()), ("stdout", p.stdout)):
        assert sx.found_in(data, sx.WIRE) == [], where


@pytest.mark.parametrize("source", ["db", "transcript"])
def test_wire_serve_stands_in_for_the_agent(wire_rec, source):
    rec = wire_rec.db if source == "db" else wire_rec.folder / "export.transcript.jsonl"
    r = run_client([WIRE_REPLAY, str(rec), "--serve", "--frame-timeout", "10"], sx.WIRE_SCENARIO.plan,
                   timeout=90)
    assert r.exit_code == 0, r.stderr.decode()[-4000:]
    assert r.stderr == b""


def test_acp_replays_against_the_unchanged_agent(acp_rec, kimi_exe, http_url):
    sc = sx.acp_scenario(http_url)
    with AcpRun.create(sc.scripts, sc.files, kimi=kimi_exe) as run:
        # The model's own scripts (--live-llm): a pinned model could only say the placeholder
        # where the secret was, and kimi words a secret in a tool's title its own way.
        p = cli("wire-replay", acp_rec.db, "--cwd", run.workdir, "--live-llm", "--",
                *sx.acp_agent(run.argv()), env=run.env(), timeout=180)
    out = p.stdout.decode() + p.stderr.decode()
    assert p.returncode == 0, out[-4000:]


def test_acp_serve_stands_in_for_the_agent(acp_rec, acp_python, http_url, tmp_path):
    report = tmp_path / "serve.json"
    sc = sx.acp_scenario(http_url)
    result = run_acp_scenario(sc, acp_python=acp_python,
                              agent=[WIRE_REPLAY, str(acp_rec.db), "--serve", "--report", str(report)])
    assert result.exit_code == 0, result.client_stderr[-4000:]
    r = json.loads(report.read_bytes())
    assert r["ok"], r["divergences"]


def test_mcp_replays_against_the_unchanged_server(mcp_rec):
    server = sx.MCP_SCENARIO.server(None)  # type: ignore[arg-type]  # the demo server needs no run
    p = cli("wire-replay", "--json", mcp_rec.db, "--", *server, env=sx.env_with(sx.MCP_ENV))
    assert p.returncode == 0, (p.stdout.decode()[-4000:], p.stderr.decode()[-2000:])


def test_mcp_serve_stands_in_for_the_server(mcp_rec, tmp_path):
    report = tmp_path / "serve.json"
    served = dataclasses.replace(
        sx.MCP_SCENARIO,
        server=lambda run: [WIRE_REPLAY, str(mcp_rec.db), "--serve", "--report", str(report)])
    result = run_mcp_scenario(served, env=sx.MCP_ENV)
    assert result.exit_code == 0, result.stderr[-4000:]
    r = json.loads(report.read_bytes())
    assert r["ok"], r["divergences"]
