"""Redaction on capture (recorder/redact.py): each rule, stable placeholders, the project config,
frames without secrets left byte-identical, huge and non-UTF-8 frames; and a real `kimi --wire`
session through wire-proxy whose stored copy holds no secret while the client got them all, and
whose recording replays green against the unchanged kimi."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from wire_recorder.recorder.config import ConfigError
from wire_recorder.recorder.redact import HUGE_FRAME, PLACEHOLDER_RE, Redactor

SK = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
SECRETS = {
    "openai": SK,
    "anthropic": "sk-ant-api03-" + "x" * 40,
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "google": "AIza" + "SyA1234567890abcdefghijklmnopqrstuv",
    "github": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "github_pat": "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnop",
    "gitlab": "glpat-" + "abcdefghij0123456789",
    "slack": "xoxb-" + "1234567890-abcdefghij",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r",
}


def R(**kw) -> Redactor:
    return Redactor.from_config("/", env=kw.pop("env", {}), **kw)


def frame(params: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "prompt", "params": params},
                      separators=(",", ":")).encode()


@pytest.mark.parametrize("name", list(SECRETS))
def test_each_token_shape_is_replaced_in_json_and_in_text(name):
    r = R()
    secret = SECRETS[name].encode()
    for raw in (frame({"user_input": f"use {SECRETS[name]} now"}),
                b"stderr: using " + secret + b" \xff\xfe", secret):
        out = r.redact_bytes(raw)
        assert secret not in out, (name, out)
        assert PLACEHOLDER_RE.search(out)
        assert r.redact_bytes(out) == out  # a placeholder is never redacted again


def test_context_rules_bearer_url_password_assignment_pem():
    r = R()
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----"
    cases = {
        "Authorization: Bearer abcdefghijk123": "abcdefghijk123",
        "postgres://admin:hunter2pw@db.local/x": "hunter2pw",
        "export PASSWORD=correcthorse9": "correcthorse9",
        'api_key: "zzzzyyyyxxxx"': "zzzzyyyyxxxx",
        pem: "MIIEpAIBAAKCAQEA7",
    }
    for text, secret in cases.items():
        for raw in (text.encode(), frame({"user_input": text})):
            out = r.redact_bytes(raw)
            assert secret.encode() not in out, (text, out)
    assert r.redact_text("postgres://admin:pw12@h/x").startswith("postgres://admin:REDACTED:")
    for code in ("token = get_token()", 'api_key = os.environ["X"]', "password: short"):
        assert r.redact_text(code) == code  # code and short values are not secrets


def test_values_under_secret_keys_anywhere_and_every_env_and_header_value():
    r = R()
    msg = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {
        "cwd": "/w",
        "deep": [{"apiKey": "k1"}, {"X-Api-Key": "k2", "Client_Secret": "k3", "passwd": "k4",
                                    "set-cookie": "k5", "token": "k6", "tokens": 5}],
        "mcpServers": [
            {"name": "s", "command": "/bin/s", "args": [], "env": [
                {"name": "DB_PASS", "value": "e1"}, {"name": "SHELL", "value": "/bin/bash"},
                {"name": "ANY", "value": "Zq8xW2vB7nM4kL9pR3tY"}]},
            {"type": "http", "name": "h", "url": "http://h/",
             "headers": [{"name": "X-Auth-Token", "value": "h1"},
                         {"name": "X-Trace", "value": "trace-0001"}]},
            {"name": "m", "command": "x", "env": {"GH_PAT": "e2", "HOME": "/home/u",
                                                  "LANG": "C.UTF-8"}},
        ], "note": "runs /bin/bash as trace-0001 in C.UTF-8"}}
    raw = json.dumps(msg).encode()
    out = r.redact_bytes(raw)
    got = json.loads(out)
    deep = got["params"]["deep"]
    for v in (deep[0]["apiKey"], deep[1]["X-Api-Key"], deep[1]["Client_Secret"],
              deep[1]["passwd"], deep[1]["set-cookie"], deep[1]["token"]):
        assert PLACEHOLDER_RE.fullmatch(v.encode()), v
    assert deep[1]["tokens"] == 5
    servers = got["params"]["mcpServers"]
    # names stay; a value goes when its name says secret or it looks like a token
    assert [e["name"] for e in servers[0]["env"]] == ["DB_PASS", "SHELL", "ANY"]
    assert PLACEHOLDER_RE.fullmatch(servers[0]["env"][0]["value"].encode())
    assert PLACEHOLDER_RE.fullmatch(servers[0]["env"][2]["value"].encode())
    assert PLACEHOLDER_RE.fullmatch(servers[1]["headers"][0]["value"].encode())
    assert PLACEHOLDER_RE.fullmatch(servers[2]["env"]["GH_PAT"].encode())
    # the others stay, and so do their values elsewhere in the frame
    assert servers[0]["env"][1]["value"] == "/bin/bash"
    assert servers[1]["headers"][1]["value"] == "trace-0001"
    assert servers[2]["env"]["HOME"] == "/home/u" and servers[2]["env"]["LANG"] == "C.UTF-8"
    assert got["params"]["note"] == msg["params"]["note"]
    assert got["params"]["cwd"] == "/w" and got["id"] == 2


def test_secret_looking_env_values_are_replaced_wherever_they_appear():
    env = {"MY_SERVICE_TOKEN": "svc-0123456789", "DB_PASSWORD": "pa$$\"word99",
           "FEATURE_KEY": "true", "HOME": "/home/u", "LONG_SECRET": "s" * 12}
    r = R(env=env)
    assert "env:MY_SERVICE_TOKEN" in r.rules and "env:DB_PASSWORD" in r.rules
    assert not any("FEATURE_KEY" in x or "HOME" in x for x in r.rules)  # short / not secret
    raw = frame({"user_input": "svc-0123456789 and " + env["DB_PASSWORD"] + " true /home/u"})
    out = r.redact_bytes(raw)
    assert b"svc-0123456789" not in out and b"word99" not in out
    assert b" true /home/u" in out
    assert r.redact_bytes(b"stderr svc-0123456789") != b"stderr svc-0123456789"


def test_placeholders_are_stable_within_a_recording_and_differ_across():
    r1, r2 = R(), R()
    a = r1.redact_text(f"x {SK} y {SK}")
    ph = PLACEHOLDER_RE.findall(a.encode())
    assert len(ph) == 2 and ph[0] == ph[1]
    assert r1.redact_text(SK) == ph[0].decode()
    assert r2.redact_text(SK) != r1.redact_text(SK)
    assert all(c not in ph[0] for c in b'"\\<>&\'') and ph[0].isascii()


SLACK = "xoxb-" + "4701234567890-1234567890123-" + "cxYyeqrNzrRURP9lj4LohTEQ"  # no literal token


def _title(s: str) -> str:
    """kimi's tool-call title: kimi_cli.utils.string.shorten_middle(s, width=50)."""
    return s if len(s) <= 50 else s[:25] + "..." + s[-25:]


def test_shortened_forms_of_a_secret_seen_before_lose_their_long_pieces():
    r, other = R(), R()
    cmd = f"echo 'posting as {SLACK}'"
    first = r.redact_bytes(frame({"command": cmd}))
    assert SLACK.encode() not in first
    # a later frame: kimi's title and both ways of shortening, plain, JSON and JSON-escaped `…`
    later = [f"Shell: {_title(cmd)}", _title(SLACK), f"{SLACK[:20]}\u2026 and \u2026{SLACK[-15:]}",
             f"see {SLACK[:14]}... then ...{SLACK[-12:]}!"]
    tail24, head14 = SLACK[-24:].encode(), SLACK[:14].encode()
    outs = []
    for text in later:
        for raw in (frame({"title": text}), text.encode(),
                    json.dumps({"t": text}).encode()):  # ensure_ascii: `\u2026`
            out = r.redact_bytes(raw)
            outs.append(out)
            pieces = [SLACK[i:i + 12].encode() for i in range(len(SLACK) - 11)]
            assert not [p for p in pieces if p in out], (raw, out)
            assert PLACEHOLDER_RE.search(out)
    # kimi's title keeps the token's public 8-char head (`xoxb-470`), under the 12 bytes
    assert b"as xoxb-470...REDACTED:" in outs[0]
    # stable per piece within the recording, not the whole secret's placeholder
    ph_tail = r.redact_bytes(b"..." + tail24)
    assert ph_tail == r.redact_bytes(b"..." + tail24) == b"..." + r.placeholder(tail24)
    assert r.placeholder(tail24) != r.placeholder(SLACK.encode())
    # only pieces of what this Redactor replaced, only next to an ellipsis, only 12+ bytes
    for raw in (b"..." + tail24, head14 + b"\xe2\x80\xa6"):
        assert other.redact_bytes(raw) is raw
    for raw in (b"x " + tail24 + b" y", b"..." + SLACK[-11:].encode(), b"...cxYyeqrNzrRUxx",
                b"unrelated ...abcdefghijklmnop and qrstuvwxyzab...", SLACK[:11].encode() + b"..."):
        assert r.redact_bytes(raw) is raw, raw
    # the same frame: the secret and its shortened form together
    r2 = R()
    both = r2.redact_bytes(frame({"command": cmd, "title": _title(cmd)}))
    assert tail24 not in both and SLACK.encode() not in both
    # frames are seen in order: a piece before its secret was seen stays
    r3, early = R(), b"..." + tail24
    assert r3.redact_bytes(early) is early
    r3.redact_text(SLACK)
    assert r3.redact_bytes(early) == b"..." + r3.placeholder(tail24)

def test_frames_without_secrets_are_left_byte_identical():
    r = R(env={"MY_SERVICE_TOKEN": "svc-0123456789"})
    samples = Path(__file__).parent.parent / "tests" / "data" / "wire_frames_real.jsonl"
    frames = [json.loads(ln)["frame"].encode() for ln in samples.read_text().splitlines()]
    frames += [b'{"a" :  1 ,"token_usage":{"input_tokens":3}}', b"", b"\xff\xfe not utf-8",
               b'{"env": {}, "headers": []}']
    for raw in frames:
        assert r.redact_bytes(raw) is raw
    # formatting is kept when a secret is replaced in place
    raw = b'{ "password" :  "hunter22hunter", "n": 1.50 }'
    assert r.redact_bytes(raw).replace(b"hunter22hunter", b"") != raw
    assert r.redact_bytes(raw).startswith(b'{ "password" :  "REDACTED:')
    assert r.redact_bytes(raw).endswith(b'", "n": 1.50 }')


def test_nested_json_invalid_json_and_huge_frames():
    r = R(env={"MY_SERVICE_TOKEN": "svc-0123456789"})
    nested = {"a": [{"b": {"c": [{"secret": "abc", "text": SK}]}}]}
    out = r.redact_json(nested)
    assert out["a"][0]["b"]["c"][0]["secret"].startswith("REDACTED:")
    assert SK not in json.dumps(out)
    assert nested["a"][0]["b"]["c"][0]["secret"] == "abc"  # the input is not changed
    bad = b'{"jsonrpc":"2.0", "params": {"password": "zzzzzzzzzz", '  # cut short
    assert b"zzzzzzzzzz" not in r.redact_bytes(bad)
    huge = b'{"x":"' + b"a" * (HUGE_FRAME + 10) + b" " + SK.encode() + b' svc-0123456789",' \
        b'"password":"short"}'
    out = r.redact_bytes(huge)
    assert SK.encode() not in out and b"svc-0123456789" not in out
    assert b'"password":"short"' in out  # not parsed: only the byte rules run on huge frames


def test_off_changes_nothing():
    r = Redactor.from_config("/", env={}, enabled=False)
    assert r.describe() == "off" and r.rules == []
    raw = frame({"user_input": SK})
    assert r.redact_bytes(raw) is raw and r.redact_text(SK) == SK


def test_project_config_rules(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.wire-recorder.redact]\n'
        'patterns = ["ACME-[0-9]{6}", "pin=(?P<secret>[0-9]{4})"]\n'
        'json_paths = ["params.meta.*.hidden"]\n'
        'keys = ["sessionKey"]\n'
        'env = ["ACME_ID"]\n')
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    r = Redactor.from_config(str(sub), env={"ACME_ID": "acme-42"})
    assert r.config_path == str(tmp_path / "pyproject.toml")
    assert {"config:patterns(2)", "config:json_paths(1)", "config:keys(1)", "config:env(1)",
            "env:ACME_ID"} <= set(r.rules)
    raw = frame({"user_input": "ACME-123456 pin=9876 acme-42",
                 "meta": {"x": {"hidden": "h1", "shown": "s1"}}, "sessionKey": "k"})
    got = json.loads(r.redact_bytes(raw))
    p = got["params"]
    assert "ACME-123456" not in p["user_input"] and "9876" not in p["user_input"]
    assert "pin=REDACTED:" in p["user_input"] and "acme-42" not in p["user_input"]
    assert p["meta"]["x"]["hidden"].startswith("REDACTED:") and p["meta"]["x"]["shown"] == "s1"
    assert p["sessionKey"].startswith("REDACTED:")
    assert json.loads(r.describe())["config"] == str(tmp_path / "pyproject.toml")


@pytest.mark.parametrize("text,needle", [
    ('[redact]\nbogus = ["x"]\n', "redact.bogus: unknown key"),
    ('[redact]\npatterns = "x"\n', "redact.patterns: must be a list"),
    ('[redact]\npatterns = ["("]\n', "redact.patterns: '('"),
    ("[redact\n", "not valid TOML"),
])
def test_a_bad_config_is_one_line_naming_file_and_key_and_falls_back(tmp_path, text, needle):
    cfg = tmp_path / "wire-recorder.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as e:
        Redactor.from_config(str(tmp_path), env={}, strict=True)
    assert str(cfg) in e.value.one_line() and needle in e.value.one_line()
    assert "\n" not in e.value.one_line()
    r = Redactor.from_config(str(tmp_path), env={})  # the loader's way: built-ins + a note
    assert "token-shapes" in r.rules and not any(x.startswith("config:") for x in r.rules)
    assert needle in json.loads(r.describe())["notes"][0]
    assert SK.encode() not in r.redact_bytes(SK.encode())


# -- the real kimi through wire-proxy ----------------------------------------------------------

TOKEN = "svc-tok-" + "9f8e7d6c5b4a3210"


def test_real_kimi_session_is_stored_redacted_relayed_unchanged_and_replays_green(
        tmp_path, kimi_exe):
    from sample_sessions.scenarios import SCENARIOS
    from tests.harness.proxy import WIRE_PROXY
    from tests.harness.replay import Agent, run_cli
    from tests.harness.scripted_client import Prompt
    from tests.harness.wire import run_scenario
    from wire_recorder.recorder.handoff import wait_for_loaders
    from wire_recorder.recorder.store import open_store

    db = tmp_path / "secret.db"
    sc = SCENARIOS["approve_shell"]
    sc = dataclasses.replace(sc, plan=dataclasses.replace(
        sc.plan, prompts=[Prompt(f"Run echo hello, key {SK}, token {TOKEN}")]))
    result = run_scenario(sc, [WIRE_PROXY, "-q", "--db", str(db), "--name", "s", "--"],
                          kimi=kimi_exe, env={"MY_SERVICE_TOKEN": TOKEN})
    # the proxy exits before its loader has stored the session (its spool, raw bytes, is still
    # beside the file then): the files are read once it is stored
    wait_for_loaders(str(db), limit=600)
    received = b"\n".join(f.raw for f in result.received())
    sent = b"\n".join(f.raw for f in result.sent())
    # the client sent both and got both back (kimi echoes the prompt in TurnBegin), unchanged
    assert SK.encode() in sent and TOKEN.encode() in sent
    assert SK.encode() in received and TOKEN.encode() in received
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("secret.db"))
    assert SK.encode() not in data and TOKEN.encode() not in data
    assert not list(tmp_path.glob("*.spool"))  # the spool is gone once the session is stored
    with open_store(str(db), read_only=True) as store:
        (session,) = store.sessions()
        frames = store.frames(session["session_id"])
    rules = json.loads(session["redaction"])["rules"]
    assert "env:MY_SERVICE_TOKEN" in rules and "token-shapes" in rules
    prompt = next(f for f in frames if f.method == "prompt")
    assert b"REDACTED:" in prompt.raw and "REDACTED:" in (prompt.payload or "")

    with Agent("approve_shell") as agent:
        p = run_cli([db, *agent.cli_args()], env={"MY_SERVICE_TOKEN": TOKEN})
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()


def test_no_redact_stores_the_secret_and_says_off(tmp_path, kimi_exe):
    from sample_sessions.scenarios import SCENARIOS
    from tests.harness.proxy import WIRE_PROXY
    from tests.harness.scripted_client import Prompt
    from tests.harness.wire import run_scenario
    from wire_recorder.recorder.store import open_store

    db = tmp_path / "plain.db"
    sc = SCENARIOS["approve_shell"]
    sc = dataclasses.replace(sc, plan=dataclasses.replace(
        sc.plan, prompts=[Prompt(f"Run echo hello, key {SK}")]))
    run_scenario(sc, [WIRE_PROXY, "-q", "--no-redact", "--db", str(db), "--"], kimi=kimi_exe)
    with open_store(str(db), read_only=True) as store:
        (session,) = store.sessions()
        frames = store.frames(session["session_id"])
    assert session["redaction"] == "off"
    assert any(SK.encode() in (f.raw or b"") for f in frames)
    assert SK.encode() in db.read_bytes()  # so the byte checks of the redacted test mean something


def test_recover_stores_a_left_spool_redacted_and_removes_it(tmp_path, monkeypatch):
    """A spool left by a killed proxy (no end marker) holds raw bytes; `recover` loads it
    redacted (stderr, a frame over 256 KiB in the sidecar, argv included) and deletes it."""
    from wire_recorder.recorder.recover import recover
    from wire_recorder.recorder.spool import A2C, C2A, STDERR, SpoolWriter
    from wire_recorder.recorder.store import open_store

    monkeypatch.setenv("MY_SERVICE_TOKEN", TOKEN)
    db = str(tmp_path / "r.db")
    spool = f"{db}.t1.spool"
    writer = SpoolWriter(spool, {"session_id": "t1", "started_wall_ns": 1, "db": db,
                                 "cwd": str(tmp_path), "command": ["agent", "--key", SK]})
    writer.put(C2A, frame({"user_input": f"hi {SK}"}) + b"\n")
    writer.put(A2C, b'{"jsonrpc":"2.0","id":1,"result":{"text":"' + b"x" * (300 << 10)
               + TOKEN.encode() + b'"}}\n')
    writer.put(STDERR, b"debug: token=" + TOKEN.encode() + b"\n")
    writer.close()
    assert SK.encode() in Path(spool).read_bytes()
    (summary,) = recover(spool)
    assert summary["session_id"] == "t1" and not os.path.exists(spool)
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert SK.encode() not in data and TOKEN.encode() not in data
    with open_store(db, read_only=True) as store:
        (session,) = store.sessions()
        frames = store.frames("t1")
    assert "REDACTED:" in session["command"] and SK not in session["command"]
    assert len(frames) == 3 and any(f.blob_offset is not None for f in frames)


def test_a_bad_project_config_is_noted_and_the_built_in_rules_still_run(tmp_path, capfd):
    from wire_recorder.recorder.loader import ingest_spool
    from wire_recorder.recorder.spool import C2A, SpoolWriter
    from wire_recorder.recorder.store import open_store

    (tmp_path / "wire-recorder.toml").write_text('[redact]\npaterns = ["x"]\n')
    db = str(tmp_path / "n.db")
    writer = SpoolWriter(f"{db}.t2.spool", {"session_id": "t2", "started_wall_ns": 1, "db": db,
                                            "cwd": str(tmp_path)})
    writer.put(C2A, frame({"user_input": SK}) + b"\n")
    writer.close()
    ingest_spool(f"{db}.t2.spool", follow=False)
    err = capfd.readouterr().err
    assert "redact.paterns: unknown key" in err and "only the built-in rules ran" in err
    with open_store(db, read_only=True) as store:
        (session,) = store.sessions()
        (f,) = [f for f in store.frames("t2") if f.direction == "c2a"]
    assert "redact.paterns" in json.loads(session["redaction"])["notes"][0]
    assert SK.encode() not in f.raw


def test_imported_kimi_logs_are_stored_redacted(tmp_path):
    from wire_recorder.analysis.importers import import_files

    log = tmp_path / "wire.jsonl"
    log.write_text(json.dumps({"type": "metadata", "protocol_version": "1.10"}) + "\n"
                   + json.dumps({"timestamp": 1.5, "message": {
                       "type": "TurnBegin", "payload": {"user_input": f"key {SK}"}}}) + "\n")
    db = tmp_path / "i.db"
    (res,) = import_files([str(log)], str(db))
    assert res["frames"] == 1
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("i.db"))
    assert SK.encode() not in data
    # the check means something: unredacted, the key's bytes are in the file
    import_files([str(log)], str(tmp_path / "plain.db"), redact=False)
    assert SK.encode() in (tmp_path / "plain.db").read_bytes()


# -- big frames and the anchors that decide which rules run ------------------------------------

BIG = 2 << 20


def _filler(n: int, alphabet: bytes) -> bytes:
    return (alphabet * (n // len(alphabet) + 1))[:n]


@pytest.mark.parametrize("alphabet", [
    b"abcdefghijklmnopqrstuvwxyz0123456789 ",  # no anchor byte at all
    b"Ab-_J x-y_z AKIB eyX sk_ gh-_ -----BEGIN PUBLIC KEY----- ",  # anchor bytes everywhere
])
@pytest.mark.parametrize("size", [BIG, 512 << 10])  # over HUGE_FRAME: not parsed; under: parsed
def test_a_2_mib_frame_loses_its_secrets_near_the_start_and_at_the_end(alphabet, size):
    env = {"MY_SERVICE_TOKEN": "svc-0123456789"}
    r = R(env=env)
    secrets = [*SECRETS.values(), "svc-0123456789"]
    pem = b"-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----"
    words = b" ".join(s.encode() for s in secrets) + b" " + pem + b" "
    plain = _filler(size, alphabet)
    assert r.redact_bytes(plain) is plain
    for raw in (b"x " + words + plain[len(words) + 2:],  # near the start
                plain[:size - len(words) - 1] + b" " + words):  # at the very end
        for text in (raw, b'{"x":"' + raw.replace(b"\n", b"\\n") + b'"}'):
            out = r.redact_bytes(text)
            for s in secrets:
                assert s.encode() not in out, s
            assert b"MIIEpAIBAAKCAQEA7" not in out
            assert len(PLACEHOLDER_RE.findall(out)) == len(secrets) + 1
            assert r.redact_bytes(out) == out


def _all_rules(r: Redactor, raw: bytes) -> bytes:
    """The byte rules as they ran before they were guarded by anchors: every regex over raw."""
    found: list[bytes] = []
    plain, bounded = r._subber(found), r._subber(found, bounded=True)
    out = raw
    for rx, b in r._shapes:
        out = rx.sub(bounded if b else plain, out)
    if len(raw) <= HUGE_FRAME:
        for rx in r._context:
            out = rx.sub(plain, out)
    for secret in sorted(set(found), key=len, reverse=True):
        out = out.replace(secret, r.placeholder(secret))
    return r._base64(out)  # not anchored: the same in both


PIECES = [*SECRETS.values(), "api_key", "API-KEY", "apikey", "token", "Token", "secret",
          "client_secret", "client-secret", "Xclient-secret", "secret_key", "mysecret_key",
          "private_key", "refresh-token", "password", "PASSWD", "my_", "a_", "a-", "_", "-", "__",
          "=", ":", " ", "\t", '"', "'", '\\"', "\\", "(", "[", ",", "\n", "Bearer ", "basic ",
          "https://", "u:", "pw", "@", "h/", "sk-", "AKIA", "eyJ", ".", "xoxb-", "ghp_",
          "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "svc-0123456789",
          "REDACTED:0123456789ab", "abcdefghij", "XYZ", "9", "get_token()", "é"]


def test_the_anchored_rules_do_what_every_regex_over_the_whole_frame_did():
    """Each rule runs only where what its matches hold is (a token shape's anchor, a secret word
    followed by `=`/`:`, ...): on text made of secrets, near-secrets and their pieces the result
    is the one of running every regex over the frame, and a frame the first look clears is one
    those regexes leave alone."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    r = R(env={"MY_SERVICE_TOKEN": "svc-0123456789"})

    @settings(max_examples=400, deadline=None, derandomize=True)
    @given(st.lists(st.sampled_from(PIECES) | st.text("aZ9_-=: ", max_size=12), max_size=30))
    def check(parts):
        raw = "".join(parts).encode()
        want = _all_rules(r, raw)
        assert r._byte_rules(raw, may=True) == want, raw
        if not r._may_match(raw):
            assert want == raw, raw
        for pad in (4 << 10, 70 << 10):  # the first looks of frames over 1 KiB and 64 KiB
            big = raw + b" " * pad
            if not r._may_match(big):
                assert _all_rules(r, big) == big, raw

    for text in ("PASSWD=abcdefghij", "my_passwd: 'abcdefghij'", "x Xclient-secret=abcdefghij",
                 "secret_key = abcdefghij", "refresh-token:abcdefghij", 'api-Key: "abcdefghij"',
                 "x Bearer abcdefghij", "basic\tabcdefghij", "https://u:abcdefghij@h/"):
        for raw in (text.encode(), text.encode() + b" " * (4 << 10),
                    text.encode() + b" " * (70 << 10)):
            assert r._may_match(raw), text
            out = r._byte_rules(raw, may=True)
            assert out == _all_rules(r, raw) and b"abcdefghij" not in out, text
    check()


def test_secret_assignments_scan_long_runs_once():
    """`\\b(?:[a-z0-9]+[_-])*` tried from every start of a long `a-a-a-...` run walked the run
    again each time (16 KB took seconds); each word is now looked at once."""
    r = R()
    run = b"a-" * (64 << 10)
    for raw in (run + b"key=xxxxxxxxxxxx api_key=" + b"s3cr3t-value",
                b"password: " + b"hunter2hunter " + run + b"token=short"):
        out = r.redact_bytes(raw)
        assert out.startswith(run) or out.startswith(b"password: REDACTED:")
        assert b"s3cr3t-value" not in out and b"hunter2hunter" not in out
        assert b"token=short" in out or b"key=xxxxxxxxxxxx" in out


# -- the shapes of the major secret scanners, KEY=value lines, base64, frames over 1 MiB --------

def _mix(seed: str, n: int, alphabet: str = "aB3cD4eF5gH6iJ7kL8mN9pQ0rS1tU2vW") -> str:
    import hashlib
    d = hashlib.sha256(seed.encode()).digest() * 4
    return "".join(alphabet[b % len(alphabet)] for b in d[:n])


def _b64(s: str) -> str:
    import base64
    return base64.b64encode(s.encode()).decode()


AWS_SECRET = _mix("aws", 36) + "/K7+"  # 40 characters of base64
SCANNER_SHAPES = {  # name -> (text the secret travels in, the secret); built, not literal
    "aws_ini": (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    "aws_env": (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\nAWS_REGION=eu-west-1", AWS_SECRET),
    "stripe_live": (f"STRIPE=sk_live_{_mix('st', 24)}", f"sk_live_{_mix('st', 24)}"),
    "stripe_restricted": (f"use rk_live_{_mix('rk', 24)} here", f"rk_live_{_mix('rk', 24)}"),
    "npm": (f"//registry.npmjs.org/:_authToken=npm_{_mix('npm', 36)}", f"npm_{_mix('npm', 36)}"),
    "pypi": (f"password = pypi-AgEIcHlwaS5vcmc{_mix('pypi', 70)}",
             f"pypi-AgEIcHlwaS5vcmc{_mix('pypi', 70)}"),
    "docker": (f"docker login -p dckr_pat_{_mix('dk', 27)}", f"dckr_pat_{_mix('dk', 27)}"),
    "sendgrid": (f"SG.{_mix('sg1', 22)}.{_mix('sg2', 43)}", f"SG.{_mix('sg1', 22)}.{_mix('sg2', 43)}"),
    "huggingface": (f"token hf_{_mix('hf', 34)}", f"hf_{_mix('hf', 34)}"),
    "twilio_sid": ("AC" + _mix("tw", 32, "0123456789abcdef"), "AC" + _mix("tw", 32, "0123456789abcdef")),
    "twilio_key": ("SK" + _mix("tk", 32, "0123456789abcdef"), "SK" + _mix("tk", 32, "0123456789abcdef")),
    "azure_storage": (f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={_mix('az', 86)}==;"
                      "EndpointSuffix=core.windows.net", _mix("az", 86) + "=="),
    "azure_ad": (f'"clientSecret": "abc8Q~{_mix("aad", 34)}"', f"abc8Q~{_mix('aad', 34)}"),
    "gcp_oauth": (f"ya29.{_mix('ya', 60)}", f"ya29.{_mix('ya', 60)}"),
    "moonshot": (f"MOONSHOT_API_KEY=sk-{_mix('ms', 48)}", f"sk-{_mix('ms', 48)}"),
    "slack_webhook": (f"https://hooks.slack.com/services/T{_mix('t', 8)}/B{_mix('b', 8)}/{_mix('w', 24)}",
                      _mix("w", 24)),
    "gcp_key_id": (f'"private_key_id": "{_mix("gk", 40, "0123456789abcdef")}"',
                   _mix("gk", 40, "0123456789abcdef")),
    "dotenv_token": (f"DEPLOY_TOKEN={_mix('dt', 30)}", _mix("dt", 30)),
    "dotenv_password": (f'DB_PASSWORD="{_mix("dp", 16)}"', _mix("dp", 16)),
    "generic_key": (f"SIGNING_KEY: {_mix('sk', 32)}", _mix("sk", 32)),
    "base64_secret": (f"echo {_b64('sk_live_' + _mix('b64', 24))} | base64 -d",
                      _b64("sk_live_" + _mix("b64", 24))),
    "base64_credentials": (f'{{"auths":{{"r.io":{{"x":"{_b64("deploy:" + _mix("dc", 20))}"}}}}}}',
                           _b64("deploy:" + _mix("dc", 20))),
    "base64_random": (f"data: {_b64(_mix('br', 32))}", _b64(_mix("br", 32))),
}
SCANNER_GCP = json.dumps({"type": "service_account", "project_id": "p", "private_key_id": _mix("pk", 40, "0123456789abcdef"),
                          "private_key": "-----BEGIN PRIVATE KEY-----\n" + _mix("pem", 64) + "\n-----END PRIVATE KEY-----\n",
                          "client_email": "x@p.iam.gserviceaccount.com"})
NOT_SECRETS = ["SHELL=/bin/bash", "sort_key=created_at_desc", "PATH=/usr/local/bin:/usr/bin",
               "token_count = 12345678", "primary_key: user_id", "The quick brown fox jumps over",
               "sha256:" + "0123456789abcdef" * 4, "tool_call_id=call_0123456789abcdef",
               "/home/user/project/src/module/file_name_longer.py", _b64("plain words in a sentence"),
               "max_tokens=4096", "session/new", '"type":"ContentPart"']


@pytest.mark.parametrize("name", list(SCANNER_SHAPES))
def test_the_shapes_of_the_major_secret_scanners_are_replaced(name):
    text, secret = SCANNER_SHAPES[name]
    r = R()
    for raw in (text.encode(), frame({"user_input": text}),
                b"x" * (HUGE_FRAME + 1) + b" " + text.encode() + b" " + b"y" * 100):
        out = r.redact_bytes(raw)
        assert secret.encode() not in out, (name, out[-300:])
        assert PLACEHOLDER_RE.search(out)
        assert r.redact_bytes(out) == out


def test_a_gcp_service_account_json_keeps_no_key():
    r = R()
    for raw in (SCANNER_GCP.encode(), frame({"output": SCANNER_GCP})):
        out = r.redact_bytes(raw)
        sa = json.loads(SCANNER_GCP)
        assert sa["private_key_id"].encode() not in out and _mix("pem", 64).encode() not in out


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_what_is_not_a_secret_stays(text):
    r = R()
    for raw in (text.encode(), frame({"user_input": text})):
        assert r.redact_bytes(raw) is raw, raw


def test_frames_over_1_mib_get_the_context_rules():
    r = R()
    pad = b"lorem ipsum dolor sit amet " * 45000
    for text, secret in ((b"Authorization: Bearer abcDEF123456ghiJKL", b"abcDEF123456ghiJKL"),
                         (b"https://h/login?user=a&password=hunter2hunter2&x=1", b"hunter2hunter2"),
                         (b"postgres://u:pw0rd1234@db/x", b"pw0rd1234"),
                         (b'"api_key": "zzzyyyxxx12"', b"zzzyyyxxx12")):
        for raw in (pad + text + pad, text + pad, pad + text):
            assert len(raw) > HUGE_FRAME
            out = r.redact_bytes(raw)
            assert secret not in out and out.count(b"REDACTED:") == 1, text


def test_a_secret_scanner_signs_off_the_redacted_text():
    """detect-secrets 1.5.0 (its pattern plugins; the entropy and IP ones flag placeholders and
    every hash alike) flags the shapes it knows in the clear text and nothing once redacted."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    skip = {"Base64 High Entropy String", "Hex High Entropy String", "Public IP (ipv4)"}
    r = R()
    lines = [t for t, _ in SCANNER_SHAPES.values()] + [f"{k} = {v}" for k, v in SECRETS.items()]
    with default_settings():
        def flagged(line: str) -> list[str]:
            return [f"{s.type}: {s.secret_value}" for s in scan_line(line) if s.type not in skip
                    and not PLACEHOLDER_RE.fullmatch((s.secret_value or "").strip("\"'").encode())]

        before = [line for line in lines if flagged(line)]
        assert len(before) >= 15, before  # the scanner knows these shapes
        after = {line: flagged(r.redact_text(line)) for line in lines}
        assert {k: v for k, v in after.items() if v} == {}


# -- secrets split across the streamed pieces of one message ------------------------------------

def _event(etype: str, payload: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "event",
                       "params": {"type": etype, "payload": payload}},
                      separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def test_a_secret_split_across_streamed_pieces_is_masked_in_every_piece(tmp_path):
    """A key cut between a ToolCall's arguments and its ToolCallParts (and a password between
    two ContentParts, and a key between ACP chunks): no piece keeps a byte of it, the pieces
    join to what the rules make of the whole (the placeholder of the later complete frame), and
    no piece that had text is left empty."""
    from wire_recorder.recorder.loader import ingest_spool
    from wire_recorder.recorder.spool import A2C, C2A, SpoolWriter
    from wire_recorder.recorder.store import open_store

    key = "sk-ant-api03-" + _mix("split", 60)
    args = json.dumps({"command": f"true '{key}'; echo done"})
    cuts = [10, 27, 40, 41, 55, 70]  # inside the key: several pieces hold only key bytes
    parts = [args[a:b] for a, b in zip([0, *cuts], [*cuts, len(args)], strict=True)]
    texts = ["Use PASSWORD=hunt", "er2hunter2", " now; the key ", key[:20], key[20:], "."]
    db = str(tmp_path / "s.db")
    w = SpoolWriter(f"{db}.t3.spool", {"session_id": "t3", "started_wall_ns": 1, "db": db,
                                       "cwd": str(tmp_path), "protocol": "wire"})
    w.put(C2A, frame({"user_input": "go"}) + b"\n")
    for t in texts:
        w.put(A2C, _event("ContentPart", {"type": "text", "text": t}))
    w.put(A2C, _event("ToolCall", {"type": "function", "id": "c1",
                                   "function": {"name": "Shell", "arguments": parts[0]}}))
    for p in parts[1:]:
        w.put(A2C, _event("ToolCallPart", {"arguments_part": p}))
    w.put(A2C, _event("StatusUpdate", {"context_usage": 0.1}))
    w.put(A2C, _event("ToolResult", {"tool_call_id": "c1", "return_value": {
        "is_error": False, "output": f"ran true '{key}'", "message": "", "display": []}}))
    w.close()
    ingest_spool(f"{db}.t3.spool", follow=False)
    with open_store(db, read_only=True) as store:
        frames = [f for f in store.frames("t3") if f.direction == "a2c"]
    msgs = [json.loads(f.raw) for f in frames]
    got_texts = [m["params"]["payload"]["text"] for m in msgs[:len(texts)]]
    got_parts = [msgs[len(texts)]["params"]["payload"]["function"]["arguments"]] + \
        [m["params"]["payload"]["arguments_part"] for m in msgs[len(texts) + 1:len(texts) + len(parts)]]
    stored = b"".join(f.raw for f in frames)
    for s in (key, "hunter2"):
        assert not [s[i:i + 6] for i in range(len(s) - 5) if s[i:i + 6].encode() in stored], s
    assert all(got_texts) and all(got_parts), (got_texts, got_parts)
    # the joined arguments hold the placeholder the complete command gets in the ToolResult
    ph = PLACEHOLDER_RE.findall(frames[-1].raw)
    assert len(ph) == 1 and json.loads("".join(got_parts))["command"] == \
        f"true '{ph[0].decode()}'; echo done"
    assert PLACEHOLDER_RE.search("".join(got_texts).encode())
    assert "".join(got_texts).startswith("Use PASSWORD=REDACTED:")
    # the frames keep their other bytes, and the rows say what the classifier says of them
    assert all(f.method == "event" and f.kind == "notification" for f in frames)
    assert all(json.loads(f.payload) == m["params"]["payload"] for f, m in zip(frames, msgs, strict=True))


def test_a_secret_split_across_acp_message_chunks_is_masked_in_every_chunk(tmp_path):
    from wire_recorder.recorder.loader import ingest_spool
    from wire_recorder.recorder.spool import A2C, C2A, SpoolWriter
    from wire_recorder.recorder.store import open_store

    key = "ghp_" + _mix("acp-split", 36)
    said = ["Your token: ", key[:22], key[22:], " (keep it safe)."]
    db = str(tmp_path / "a.db")
    w = SpoolWriter(f"{db}.t4.spool", {"session_id": "t4", "started_wall_ns": 1, "db": db,
                                       "cwd": str(tmp_path), "protocol": "acp"})
    w.put(C2A, b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1",'
               b'"prompt":[{"type":"text","text":"hi"}]}}\n')
    for t in said:
        w.put(A2C, json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk",
                                          "content": {"type": "text", "text": t}}}}).encode() + b"\n")
    w.put(A2C, b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}\n')
    w.close()
    ingest_spool(f"{db}.t4.spool", follow=False)
    with open_store(db, read_only=True) as store:
        frames = [f for f in store.frames("t4") if f.direction == "a2c"][:len(said)]
    texts = [json.loads(f.raw)["params"]["update"]["content"]["text"] for f in frames]
    stored = b"".join(f.raw for f in frames)
    assert not [key[i:i + 6] for i in range(len(key) - 5) if key[i:i + 6].encode() in stored]
    assert all(texts) and texts[0] == said[0] and texts[-1] == said[-1]
    assert PLACEHOLDER_RE.fullmatch("".join(texts[1:3]).encode())
