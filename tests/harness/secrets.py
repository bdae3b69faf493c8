"""Seeded fake secrets, the Wire/ACP/MCP sessions that carry them, and a scanner that says where
any of their bytes ended up (tests/test_redaction_e2e.py).

Every secret has a realistic shape (an OpenAI, Anthropic, AWS, GitHub, GitLab or Slack token, a
JWT, a bearer token, a PEM private key, a URL password, values under `api_key`, `password`,
`authorization`, the env maps and headers of MCP servers, `*_TOKEN`/`*_SECRET` variables of the
proxy's environment) and a random-looking body derived from its name, so the values are fixed
across runs and no literal token sits in this file for a secret scanner to trip over.

Where each one travels (`PLACES`):

* Wire (`kimi --wire`, the scripted client): prompts, a multi-line prompt with a PEM block and a
  database URL, a prompt of ~300 KiB (stored in the `.blobs` sidecar), Shell tool arguments, Shell
  output (assembled by the command, so it is not in the arguments), the agent's text, a `*_TOKEN`
  of the proxy's environment that the Shell prints, the agent's argv (`env NAME=VALUE kimi ...`)
  and the agent's stderr (`sh -c 'echo ... >&2; exec kimi ...'`).
* ACP (`kimi acp`, the ACP SDK client): a prompt, a Shell command and its terminal output,
  `session/new` mcpServers `env` (stdio) and `headers` (http), the agent's argv.
* MCP (the MCP 1.x SDK client and demo server, `initialize` era): clientInfo values under
  `api_key`, `password` and `authorization`, tool arguments that the server echoes in its result
  and its elicitation, a question the server forwards in sampling/createMessage, a `*_SECRET` of
  the proxy's environment, and the server's stderr.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import json
import os
import socket
import string
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.harness.acp import AcpScenario
from tests.harness.kimi_peer import msg_id, script, shell, text, tool_call, tool_call_part, usage
from tests.harness.mcp import DEMO_SERVER, HANDSHAKE, INPUT_METHODS, Call, McpScenario, demo_server
from tests.harness.peers import peer_python
from tests.harness.scripted_client import Approval, ClientPlan, Prompt
from tests.harness.wire import Scenario

ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


def _body(seed: str, n: int, alphabet: str = ALNUM) -> str:
    """n characters of `alphabet` that look random and are the same on every run."""
    out: list[str] = []
    i = 0
    while len(out) < n:
        out += [alphabet[b % len(alphabet)] for b in hashlib.sha256(f"{seed}/{i}".encode()).digest()]
        i += 1
    return "".join(out[:n])


def _b64url(seed: str, n: int) -> str:
    return _body(seed, n, URLSAFE)


def _jwt(seed: str) -> str:
    # header {"alg":"HS256","typ":"JWT"} as every JWT starts; payload and signature look random
    return "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJ" + _b64url(seed + "p", 80) + "." + \
        _b64url(seed + "s", 43)


def _pem(seed: str) -> str:
    lines = [_body(f"{seed}{i}", 64, B64) for i in range(4)] + [_body(f"{seed}z", 24, B64) + "=="]
    return "-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----"


# name -> value. A URL, a header or a PEM block is the carrier: the entry is the part that is secret.
SECRETS: dict[str, str] = {
    # Wire
    "openai_prompt": "sk-proj-" + _body("openai_prompt", 48, URLSAFE),
    "openai_argv": "sk-" + _body("openai_argv", 48),
    "anthropic_tool_args": "sk-ant-api03-" + _body("anthropic_tool_args", 93, URLSAFE) + "AA",
    "anthropic_big_frame": "sk-ant-api03-" + _body("anthropic_big_frame", 93, URLSAFE) + "AA",
    "aws_tool_output": "AKIA" + _body("aws_tool_output", 16, UPPER),
    "github_stderr": "ghp_" + _body("github_stderr", 36),
    "env_token": _body("env_token", 40),  # WR_DEPLOY_TOKEN of the proxy's env: no known shape
    "db_url_password": _body("db_url_password", 22),
    "pem_private_key": _pem("pem_private_key"),
    "jwt_agent_text": _jwt("jwt_agent_text"),
    # ACP
    "gitlab_prompt": "glpat-" + _body("gitlab_prompt", 20, URLSAFE),
    "slack_shell": "xoxb-" + _body("slack1", 12, string.digits) + "-" + _body("slack2", 13, string.digits)
    + "-" + _body("slack3", 24),
    "bearer_header": _body("bearer_header", 40, URLSAFE),  # `Authorization: Bearer <this>`
    "header_api_key": _body("header_api_key", 32),  # an `X-Api-Key` header: no known shape
    "mcp_env_password": _body("mcp_env_password", 24),  # a stdio server's env: no known shape
    "mcp_env_github": "ghp_" + _body("mcp_env_github", 36),
    "anthropic_acp_argv": "sk-ant-api03-" + _body("anthropic_acp_argv", 93, URLSAFE) + "AA",
    # MCP
    "jwt_sampling": _jwt("jwt_sampling"),
    "client_api_key": _body("client_api_key", 32),  # clientInfo.api_key
    "client_password": _body("client_password", 20),  # clientInfo.password
    "client_authorization": _body("client_authorization", 44, B64),  # `Basic <this>`
    "env_secret": _body("env_secret", 36),  # WR_SIGNING_SECRET of the proxy's env
    "aws_stderr": "AKIA" + _body("aws_stderr", 16, UPPER),
    # Wire, the shapes of the major secret scanners in a `.env` and credentials a tool prints
    # (from variables whose names say nothing), and secrets streamed across pieces
    "aws_secret_env": _body("aws_secret_env", 40, B64),  # AWS_SECRET_ACCESS_KEY=...
    "aws_secret_ini": _body("aws_secret_ini", 40, B64),  # aws_secret_access_key = ...
    "stripe_live": "sk_live_" + _body("stripe_live", 24),
    "stripe_restricted": "rk_live_" + _body("stripe_restricted", 24),
    "npm_token": "npm_" + _body("npm_token", 36),
    "pypi_token": "pypi-AgEIcHlwaS5vcmc" + _body("pypi_token", 70, URLSAFE),
    "docker_pat": "dckr_pat_" + _body("docker_pat", 27, URLSAFE),
    "sendgrid_key": "SG." + _body("sendgrid1", 22, URLSAFE) + "." + _body("sendgrid2", 43, URLSAFE),
    "hf_token": "hf_" + _body("hf_token", 34, string.ascii_letters),
    "twilio_key": "SK" + _body("twilio_key", 32, "0123456789abcdef"),
    "azure_storage_key": _body("azure_storage_key", 86, B64) + "==",  # AccountKey=...
    "gcp_private_key_id": _body("gcp_private_key_id", 40, "0123456789abcdef"),
    "base64_secret": base64.b64encode(_body("base64_secret", 32).encode()).decode(),
    "moonshot_split_text": "sk-" + _body("moonshot_split_text", 48),  # across ContentParts
}

PLACES: dict[str, str] = {
    "openai_prompt": "wire prompt",
    "openai_argv": "wire agent argv (env FAKE_API_KEY=...), printed by the Shell",
    "anthropic_tool_args": "wire Shell arguments",
    "anthropic_big_frame": "wire prompt of ~300 KiB (blob sidecar)",
    "aws_tool_output": "wire Shell output",
    "github_stderr": "wire agent stderr",
    "env_token": "wire proxy env WR_DEPLOY_TOKEN, printed by the Shell",
    "db_url_password": "wire prompt: password of a postgres:// URL",
    "pem_private_key": "wire prompt: PEM private key block",
    "jwt_agent_text": "wire agent text",
    "gitlab_prompt": "acp prompt",
    "slack_shell": "acp Shell command and terminal output",
    "bearer_header": "acp session/new http server headers: Authorization: Bearer",
    "header_api_key": "acp session/new http server headers: X-Api-Key",
    "mcp_env_password": "acp session/new stdio server env",
    "mcp_env_github": "acp session/new stdio server env",
    "anthropic_acp_argv": "acp agent argv (env ANTHROPIC_API_KEY=...)",
    "jwt_sampling": "mcp tool argument, forwarded in sampling/createMessage",
    "client_api_key": "mcp initialize clientInfo.api_key",
    "client_password": "mcp initialize clientInfo.password",
    "client_authorization": "mcp initialize clientInfo.authorization (Basic)",
    "env_secret": "mcp proxy env WR_SIGNING_SECRET, in tool arguments, elicitation and result",
    "aws_stderr": "mcp server stderr",
    "aws_secret_env": "wire Shell output: AWS_SECRET_ACCESS_KEY= in a .env",
    "aws_secret_ini": "wire Shell output: aws_secret_access_key = in a credentials file",
    "stripe_live": "wire Shell output: Stripe live secret key",
    "stripe_restricted": "wire Shell output: Stripe live restricted key",
    "npm_token": "wire Shell output: .npmrc _authToken",
    "pypi_token": "wire Shell output: PyPI API token",
    "docker_pat": "wire Shell output: Docker Hub personal access token",
    "sendgrid_key": "wire Shell output: SendGrid API key",
    "hf_token": "wire Shell output: Hugging Face token",
    "twilio_key": "wire Shell output: Twilio API key SID",
    "azure_storage_key": "wire Shell output: Azure storage connection string AccountKey",
    "gcp_private_key_id": "wire Shell output: GCP service-account JSON private_key_id",
    "base64_secret": "wire Shell output: a base64-encoded token",
    "moonshot_split_text": "wire agent text, streamed across two ContentParts",
}
assert PLACES.keys() == SECRETS.keys()

SCANNER_SHAPES = ("aws_secret_env", "aws_secret_ini", "stripe_live", "stripe_restricted", "npm_token",
                  "pypi_token", "docker_pat", "sendgrid_key", "hf_token", "twilio_key",
                  "azure_storage_key", "gcp_private_key_id", "base64_secret")
# only ever in pieces on the wire (no frame holds the whole value): found by their pieces
SPLIT_ONLY = ("moonshot_split_text",)
WIRE = ("openai_prompt", "openai_argv", "anthropic_tool_args", "anthropic_big_frame", "aws_tool_output",
        "github_stderr", "env_token", "db_url_password", "pem_private_key", "jwt_agent_text",
        *SCANNER_SHAPES, *SPLIT_ONLY)
ACP = ("gitlab_prompt", "slack_shell", "bearer_header", "header_api_key", "mcp_env_password",
       "mcp_env_github", "anthropic_acp_argv")
MCP = ("jwt_sampling", "client_api_key", "client_password", "client_authorization", "env_secret",
       "aws_stderr")
assert set(WIRE) | set(ACP) | set(MCP) == set(SECRETS) and len(SECRETS) >= 20

S = SECRETS

# ---------------------------------------------------------------------------------------------
# finding them


def needles(value: str) -> list[bytes]:
    """The byte strings whose presence means the secret leaked: the value as is, JSON-escaped
    (a PEM block's newlines are `\\n` inside a frame), HTML-escaped, and each line of a
    multi-line value."""
    forms = {value, json.dumps(value)[1:-1], html.escape(value)}
    if "\n" in value:
        forms |= {line for line in value.splitlines() if len(line) >= 20 and "-----" not in line}
    return sorted(f.encode() for f in forms)


def found_in(data: bytes, names: Iterable[str] = SECRETS) -> list[str]:
    return [n for n in names if any(x in data for x in needles(SECRETS[n]))]


def _values_of(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    return repr(value).encode("utf-8", "backslashreplace")


def duckdb_text(path: Path) -> bytes:
    """Every value of every table of a DuckDB file, or of a Parquet file, as bytes: DuckDB may
    store strings compressed, so a byte scan of the file alone could miss a secret."""
    import duckdb

    chunks: list[bytes] = []
    if path.suffix == ".parquet":
        con = duckdb.connect()
        try:
            rows = con.execute("SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
        finally:
            con.close()
        chunks += [_values_of(v) for r in rows for v in r]
        return b"\n".join(chunks)
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE'").fetchall()
        for schema, table in tables:
            rows = con.execute(f'SELECT * FROM "{schema}"."{table}"').fetchall()
            chunks += [_values_of(v) for r in rows for v in r]
    finally:
        con.close()
    return b"\n".join(chunks)


def scan(folder: Path, names: Iterable[str] = SECRETS) -> dict[str, list[str]]:
    """{file (relative to folder) [+ " (values)"]: secrets found in it} over every file under
    folder: the raw bytes of each file, and for .db and .parquet files their decoded values."""
    names = list(names)
    hits: dict[str, list[str]] = {}
    for p in sorted(folder.rglob("*")):
        if not p.is_file():
            continue
        rel = str(p.relative_to(folder))
        if found := found_in(p.read_bytes(), names):
            hits[rel] = found
        if p.suffix in (".db", ".parquet"):
            try:
                values = duckdb_text(p)
            except Exception as e:  # noqa: BLE001 - an unreadable file is a finding of its own
                hits[rel + " (unreadable)"] = [f"{type(e).__name__}: {e}"]
                continue
            if found := found_in(values, names):
                hits[rel + " (values)"] = found
    return hits


# ---------------------------------------------------------------------------------------------
# Wire: `kimi --wire` behind `sh -c 'echo ... >&2; exec env FAKE_API_KEY=... kimi ...'`

# the scanner shapes reach the Shell in variables whose names say nothing (so no env rule masks
# them: their shapes must), and it prints them as a .env, a credentials file, ... would be
FIXTURE_VARS = {f"WR_FIXTURE_{i}": S[n] for i, n in enumerate(SCANNER_SHAPES)}
WIRE_ENV = {"WR_DEPLOY_TOKEN": S["env_token"], **FIXTURE_VARS}
_PRINTED = (
    "AWS_SECRET_ACCESS_KEY={aws_secret_env}\nAWS_REGION=eu-west-1\nSHELL=/bin/bash\n"
    "[default]\naws_secret_access_key = {aws_secret_ini}\n"
    "stripe {stripe_live} {stripe_restricted}\n//registry.npmjs.org/:_authToken={npm_token}\n"
    "pypi {pypi_token}\ndocker {docker_pat}\nsendgrid {sendgrid_key}\nhf {hf_token}\n"
    "twilio {twilio_key}\nDefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
    "{azure_storage_key};EndpointSuffix=core.windows.net\n"
    '{{"type": "service_account", "private_key_id": "{gcp_private_key_id}"}}\n'
    "backup blob {base64_secret}\n")
PRINT_FIXTURES = ("printf '" + _PRINTED.format(**{n: "%s" for n in SCANNER_SHAPES}) + "' "
                  + " ".join(f'"${v}"' for v in FIXTURE_VARS))
DB_URL = f"postgres://deploy:{S['db_url_password']}@db.example.invalid:5432/app"
AWS_HALF = len(S["aws_tool_output"]) // 2
WIRE_SHELL = (f"true '{S['anthropic_tool_args']}'; echo \"deploy=$WR_DEPLOY_TOKEN key=$FAKE_API_KEY\"; "
              f"printf '%s%s\\n' {S['aws_tool_output'][:AWS_HALF]} {S['aws_tool_output'][AWS_HALF:]}; "
              + PRINT_FIXTURES)
WIRE_PROMPT_1 = (f"Deploy with OPENAI_API_KEY={S['openai_prompt']} to {DB_URL}\n"
                 f"and sign with this key:\n{S['pem_private_key']}\n")
BIG_PROMPT_BYTES = 300 * 1024


def _big_prompt() -> str:
    filler = ("The quick brown fox jumps over the lazy dog while the build runs. " * 4 + "\n")
    half = filler * (BIG_PROMPT_BYTES // 2 // len(filler))
    return f"Review this log:\n{half}api key in the log: {S['anthropic_big_frame']}\n{half}Done."


WIRE_PROMPT_2 = _big_prompt()
WIRE_AGENT_TEXT = f"Deployed; the session token is {S['jwt_agent_text']}"
WIRE_SHELL_ARGS = json.dumps({"command": WIRE_SHELL})
_AT = WIRE_SHELL_ARGS.index(S["anthropic_tool_args"])
WIRE_SHELL_CUTS = [_AT + 40, _AT + 80]  # the key (108 characters) cut after 40 and 80
_MS = S["moonshot_split_text"]
SPLIT_TEXT = [text("The model key was:"), text(_MS[:30]), text(_MS[30:] + " (rotated).")]

WIRE_SCENARIO = Scenario(
    name="secrets_wire",
    description="Seeded secrets in prompts (one of ~300 KiB), Shell arguments and output, the "
                "agent's text, env, argv and stderr.",
    session_id="wr-secrets-wire",
    scripts=[
        # the Shell's arguments are streamed: a ToolCall and ToolCallParts that cut the
        # Anthropic key in three; the text cuts a Moonshot key in two
        script(msg_id("msg-1"), usage(120, 15), text("Deploying."),
               tool_call("call-1", "Shell", WIRE_SHELL_ARGS[:WIRE_SHELL_CUTS[0]]),
               *(tool_call_part(WIRE_SHELL_ARGS[a:b]) for a, b in
                 zip(WIRE_SHELL_CUTS, [*WIRE_SHELL_CUTS[1:], len(WIRE_SHELL_ARGS)], strict=True))),
        script(msg_id("msg-2"), usage(160, 9), text(WIRE_AGENT_TEXT), *SPLIT_TEXT),
        # the ~300 KiB prompt makes kimi compact its context first: one LLM call for the summary
        script(msg_id("msg-3"), usage(200, 4), text("Summary: a deploy, then a long log.")),
        script(msg_id("msg-4"), usage(200, 4), text("The log looks fine.")),
    ],
    plan=ClientPlan(prompts=[Prompt(WIRE_PROMPT_1), Prompt(WIRE_PROMPT_2)], approvals=[Approval.approve()],
                    init_timeout=120.0),
    timeout=240.0,  # a shared, loaded machine: kimi may take a minute to start
)
WIRE_STDERR_LINE = f"token {S['github_stderr']}"


def wrap_agent(argv: Sequence[str], stderr_line: str, env: dict[str, str]) -> list[str]:
    """argv run by `sh`, which first writes stderr_line to stderr, then execs `env K=V... argv`
    (so the secrets of `env` are in the agent's argv)."""
    return ["sh", "-c", f"echo '{stderr_line}' >&2; exec \"$@\"", "sh",
            "env", *(f"{k}={v}" for k, v in env.items()), *argv]


def wire_agent(kimi_argv: Sequence[str]) -> list[str]:
    return wrap_agent(kimi_argv, WIRE_STDERR_LINE, {"FAKE_API_KEY": S["openai_argv"]})


# ---------------------------------------------------------------------------------------------
# ACP: `kimi acp` with two MCP servers in session/new. kimi connects to both before it answers
# session/new (a server it cannot reach fails the session), so both are real: the demo server over
# stdio, and a small streamable-HTTP server (mcp 1.x FastMCP) that ignores the headers.

ACP_SHELL = f"echo 'posting as {S['slack_shell']}'"
ACP_PROMPT = f"Use the GitLab token {S['gitlab_prompt']} to post a note."
HTTP_SERVER = """
import sys
from mcp.server.fastmcp import FastMCP
server = FastMCP("tracker", host="127.0.0.1", port=int(sys.argv[1]), log_level="WARNING")
@server.tool(description="Post a note.")
def post(note: str) -> str:
    return "posted"
server.run("streamable-http")
"""


@contextlib.contextmanager
def http_mcp_server(timeout: float = 20.0) -> Iterator[str]:
    """A streamable-HTTP MCP server on a free local port for the duration; yields its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([str(peer_python("mcp1")), "-c", HTTP_SERVER, str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"the HTTP MCP server did not listen on {port}") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def acp_mcp_servers(http_url: str) -> list[dict[str, Any]]:
    return [
        {"name": "vault", "command": str(peer_python("mcp1")), "args": [str(DEMO_SERVER)],
         "env": [{"name": "SERVICE_PASSWORD", "value": S["mcp_env_password"]},
                 {"name": "GITHUB_PERSONAL_ACCESS_TOKEN", "value": S["mcp_env_github"]}]},
        {"type": "http", "name": "tracker", "url": http_url,
         "headers": [{"name": "Authorization", "value": f"Bearer {S['bearer_header']}"},
                     {"name": "X-Api-Key", "value": S["header_api_key"]}]},
    ]


def acp_scenario(http_url: str) -> AcpScenario:
    return AcpScenario(
        name="secrets_acp",
        description="Seeded secrets in an ACP prompt, a terminal command and its output, and the "
                    "env and headers of session/new mcpServers.",
        scripts=[
            script(msg_id("msg-1"), usage(120, 15), text("Posting."), shell("call-shell-1", ACP_SHELL)),
            script(msg_id("msg-2"), usage(160, 9), text("Posted.")),
        ],
        prompts=[ACP_PROMPT],
        permissions=["approve"],
        mcp_servers=acp_mcp_servers(http_url),
        sample=False,
        timeout=90.0,
    )


def acp_agent(kimi_argv: Sequence[str]) -> list[str]:
    return wrap_agent(kimi_argv, "starting", {"ANTHROPIC_API_KEY": S["anthropic_acp_argv"]})


# ---------------------------------------------------------------------------------------------
# MCP: the mcp 1.x client and demo server (initialize era)

MCP_ENV = {"WR_SIGNING_SECRET": S["env_secret"]}
MCP_CLIENT_INFO = {"api_key": S["client_api_key"], "password": S["client_password"],
                   "authorization": f"Basic {S['client_authorization']}"}
MCP_QUESTION = f"Is {S['jwt_sampling']} still valid?"
MCP_ACTION = f"rotate {S['env_secret']}"
MCP_SCENARIO = McpScenario(
    "secrets_mcp",
    "mcp 1.30 client <-> mcp 1.30 demo server with seeded secrets in clientInfo, tool arguments, "
    "sampling, elicitation, results, the proxy's env and the server's stderr",
    "mcp1", "2025",
    lambda run: wrap_agent(demo_server("mcp1")(run), f"warning: key {S['aws_stderr']}", {}),
    [Call("ask_llm", {"question": MCP_QUESTION}, ["llm said: 42 (model test-model)"]),
     Call("confirm", {"action": MCP_ACTION}, [f"confirmed {MCP_ACTION}: True (ok)"])],
    "2025", HANDSHAKE,
    expect_tools=("add", "ask_llm", "client_roots", "confirm"),
    expect_callbacks={"sampling": 1, "elicitation": 1},
    expect_input_methods=tuple(m for m in INPUT_METHODS if m != "roots/list"),
    client_args=("--client-info", json.dumps(MCP_CLIENT_INFO)),
)


def env_with(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env
