"""A scripted MCP stdio client with deterministic sampling, roots and elicitation answers.

    .peers/mcp2/bin/python tests/harness/sdk/mcp_client.py --era 2026 \\
        --call add='{"a": 2, "b": 3}' --call ask_llm='{"question": "6 x 7?"}' \\
        -- .peers/mcp2/bin/python tests/harness/sdk/mcp_demo_server.py

Runs under either peer venv: mcp 2.x (`.peers/mcp2`) or mcp 1.x (`.peers/mcp1`).

* `--era 2026`: the mcp 2.x `Client` in its default `mode="auto"`: `server/discover` first, falling
  back to `initialize` when the server answers it with an error (an mcp 1.x server). mcp 2.x only.
* `--era 2025`: the `initialize` handshake: mcp 1.x `ClientSession` + `stdio_client`, or the mcp 2.x
  `Client(mode="legacy")`.

The client lists the tools, then calls each `--call TOOL=JSON-ARGS` in order (with a progress
callback, so each `tools/call` carries a progressToken). It answers the server's requests the same
way every time: sampling -> text "42" from model "test-model"; roots -> one `file://` root for
`--roots-dir` (name "demo-root"); elicitation (form) -> accept with {"confirm": true, "note": "ok"}.
`--cancel TOOL` gives up on TOOL's call at its first progress notification, as a user pressing
stop would: mcp 2.x then sends `notifications/cancelled` (mcp 1.x sends nothing).

It prints one JSON summary on stdout (sdk, era, negotiated protocol version, server info, tool
names, per-call results, which callbacks fired) and exits 0; 1 when a call fails (an exception or
an `isError` result, unless `--allow-error TOOL`); 2 on bad usage. The server gets an explicit
environment: PATH, HOME, and each `--env NAME` (copied from ours) or `--env NAME=VALUE`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore", message=".*deprecat.*", category=Warning)
try:  # mcp 2.x only
    from mcp.shared.exceptions import MCPDeprecationWarning

    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
except ImportError:
    pass

import anyio  # noqa: E402
import mcp.types as types  # noqa: E402

MCP_VERSION = version("mcp")
MCP_MAJOR = int(MCP_VERSION.split(".")[0])

SAMPLING_RESULT = {
    "role": "assistant",
    "content": {"type": "text", "text": "42"},
    "model": "test-model",
    "stopReason": "endTurn",
}
ROOT_NAME = "demo-root"
ELICIT_CONTENT = {"confirm": True, "note": "ok"}
CLIENT_INFO: dict[str, Any] = {"name": "wire-recorder-mcp-client", "version": "1.0"}  # --client-info


def fail(msg: str, code: int = 1):
    print(f"mcp_client: {msg}", file=sys.stderr)
    sys.exit(code)


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    """First present attribute: mcp 2.x models are snake_case, 1.x camelCase."""
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    return default


def _dump(model: Any) -> Any:
    if model is None:
        return None
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Callbacks:
    """The client's answers to the server, and a log of what was asked."""

    def __init__(self, roots_dir: Path):
        self.root_uri = roots_dir.resolve().as_uri()
        self.log: list[dict[str, Any]] = []
        self.progress: list[dict[str, Any]] = []
        self.counts = {"sampling": 0, "roots": 0, "elicitation": 0, "progress": 0}
        self.progressed = anyio.Event()

    async def sampling(self, context, params):
        self.counts["sampling"] += 1
        messages = [_dump(m) for m in params.messages]
        self.log.append({"callback": "sampling", "messages": messages,
                         "max_tokens": _get(params, "max_tokens", "maxTokens")})
        return types.CreateMessageResult.model_validate(SAMPLING_RESULT)

    async def roots(self, context):
        self.counts["roots"] += 1
        self.log.append({"callback": "roots"})
        return types.ListRootsResult.model_validate({"roots": [{"uri": self.root_uri, "name": ROOT_NAME}]})

    async def elicitation(self, context, params):
        self.counts["elicitation"] += 1
        mode = _get(params, "mode", default="form")
        self.log.append({"callback": "elicitation", "mode": mode, "message": params.message})
        if mode != "form":
            return types.ElicitResult.model_validate({"action": "decline"})
        return types.ElicitResult.model_validate({"action": "accept", "content": ELICIT_CONTENT})

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.counts["progress"] += 1
        self.progress.append({"progress": progress, "total": total, "message": message})
        self.progressed.set()


def _tool_result(name: str, arguments: dict, result: Any) -> dict[str, Any]:
    content = []
    for c in result.content:
        content.append(getattr(c, "text", None) if getattr(c, "type", None) == "text" else _dump(c))
    return {
        "tool": name,
        "arguments": arguments,
        "is_error": bool(_get(result, "is_error", "isError", default=False)),
        "content": content,
        "structured": _get(result, "structured_content", "structuredContent"),
    }


async def _drive(session_like, calls, cb: Callbacks, summary: dict, cancel: set[str]) -> None:
    tools = await session_like.list_tools()
    summary["tools"] = sorted(t.name for t in tools.tools)
    for name, arguments in calls:
        if name in cancel:
            summary["results"].append(await _cancelled_call(session_like, name, arguments, cb))
            continue
        result = await session_like.call_tool(name, arguments, progress_callback=cb.on_progress)
        summary["results"].append(_tool_result(name, arguments, result))


async def _cancelled_call(session_like, name: str, arguments: dict, cb: Callbacks) -> dict:
    """Call the tool and give up on it at its first progress notification (a user pressing
    stop): the SDK abandons the request, which sends notifications/cancelled."""
    cb.progressed = anyio.Event()
    outcome: dict[str, Any] = {"tool": name, "arguments": arguments, "cancelled": False,
                               "is_error": False}
    async with anyio.create_task_group() as tg:
        async def call() -> None:
            result = await session_like.call_tool(name, arguments, progress_callback=cb.on_progress)
            outcome.update(_tool_result(name, arguments, result))
            tg.cancel_scope.cancel()

        tg.start_soon(call)
        await cb.progressed.wait()
        outcome["cancelled"] = True
        tg.cancel_scope.cancel()
    await anyio.sleep(0.2)  # the server's reaction to the cancel, if any, gets recorded
    return outcome


async def run_v2(params_kw: dict, era: str, calls, cb: Callbacks, summary: dict, cancel) -> None:
    from mcp import Client, StdioServerParameters

    async with Client(  # a StdioServerParameters server is spawned by stdio_client (errlog: our stderr)
        StdioServerParameters(**params_kw),
        mode="auto" if era == "2026" else "legacy",
        sampling_callback=cb.sampling,
        list_roots_callback=cb.roots,
        elicitation_callback=cb.elicitation,
        client_info=types.Implementation.model_validate(CLIENT_INFO),
    ) as client:
        summary["protocol_version"] = client.protocol_version
        info = client.server_info
        summary["server_info"] = {"name": info.name, "version": info.version} if info else None
        await _drive(client, calls, cb, summary, cancel)


async def run_v1(params_kw: dict, calls, cb: Callbacks, summary: dict, errlog, cancel) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async with stdio_client(StdioServerParameters(**params_kw), errlog=errlog) as (read, write):
        async with ClientSession(
            read,
            write,
            sampling_callback=cb.sampling,
            list_roots_callback=cb.roots,
            elicitation_callback=cb.elicitation,
            client_info=types.Implementation.model_validate(CLIENT_INFO),
        ) as session:
            init = await session.initialize()
            summary["protocol_version"] = init.protocolVersion
            summary["server_info"] = {"name": init.serverInfo.name, "version": init.serverInfo.version}
            await _drive(session, calls, cb, summary, cancel)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        fail("usage: mcp_client.py [OPTIONS] -- SERVER-COMMAND [ARGS...]", 2)
    i = argv.index("--")
    own, server = argv[:i], argv[i + 1:]
    if not server:
        fail("no server command after --", 2)
    ap = argparse.ArgumentParser(prog="mcp_client.py", description=__doc__.splitlines()[0])
    ap.add_argument("--era", choices=["2026", "2025"], default="2026",
                    help="2026: discover (auto mode, mcp 2.x); 2025: initialize handshake")
    ap.add_argument("--call", action="append", default=[], metavar="TOOL=JSON",
                    help="call TOOL with JSON object arguments (repeatable, in order)")
    ap.add_argument("--cancel", action="append", default=[], metavar="TOOL",
                    help="give up on TOOL's call at its first progress notification")
    ap.add_argument("--allow-error", action="append", default=[], metavar="TOOL",
                    help="an isError result of TOOL does not fail the run")
    ap.add_argument("--roots-dir", default=".", help="the directory offered as the one root")
    ap.add_argument("--env", action="append", default=[], metavar="NAME[=VALUE]",
                    help="pass NAME (from our environment, or =VALUE) to the server")
    ap.add_argument("--cwd", help="the server's working directory")
    ap.add_argument("--client-info", metavar="JSON",
                    help="fields merged into the initialize clientInfo (mcp 1.x keeps unknown ones)")
    ap.add_argument("--timeout", type=float, default=30.0, help="give up after this many seconds")
    ap.add_argument("--discover-timeout", type=float, metavar="SECONDS",
                    help="mcp 2.x auto mode: wait this long for server/discover before falling "
                         "back to initialize (the SDK's own is 10 s, less than a server may take "
                         "to start on a busy machine)")
    return ap.parse_args(own), server


def main(argv: list[str] | None = None) -> int:
    args, server = parse_args(sys.argv[1:] if argv is None else argv)
    if args.era == "2026" and MCP_MAJOR < 2:
        fail(f"--era 2026 needs mcp >= 2 (this is mcp {MCP_VERSION})", 2)
    if args.client_info:
        CLIENT_INFO.update(json.loads(args.client_info))
    calls = []
    for spec in args.call:
        name, eq, raw = spec.partition("=")
        try:
            arguments = json.loads(raw) if eq else {}
        except json.JSONDecodeError as e:
            fail(f"--call {spec!r}: arguments are not JSON: {e}", 2)
        if not name or not isinstance(arguments, dict):
            fail(f"--call {spec!r}: expected TOOL=JSON-OBJECT", 2)
        calls.append((name, arguments))
    env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    for spec in args.env:
        name, eq, value = spec.partition("=")
        if eq:
            env[name] = value
        elif name in os.environ:
            env[name] = os.environ[name]
    params_kw = {"command": server[0], "args": server[1:], "env": env}
    if args.cwd:
        params_kw["cwd"] = args.cwd

    if args.discover_timeout and MCP_MAJOR >= 2:
        import mcp.client.session as mcp_session  # the SDK reads it at each probe

        mcp_session.DISCOVER_TIMEOUT_SECONDS = args.discover_timeout
    cb = Callbacks(Path(args.roots_dir))
    summary: dict[str, Any] = {"sdk": f"mcp {MCP_VERSION}", "era": args.era, "protocol_version": None,
                               "server_info": None, "tools": [], "results": []}

    async def go():
        with anyio.fail_after(args.timeout):
            if MCP_MAJOR >= 2:
                await run_v2(params_kw, args.era, calls, cb, summary, set(args.cancel))
            else:
                await run_v1(params_kw, calls, cb, summary, sys.stderr, set(args.cancel))

    error = None
    try:
        anyio.run(go)
    except TimeoutError:
        error = f"timed out after {args.timeout:g} s"
    except Exception as e:  # noqa: BLE001 - report any failure as one line, details on stderr
        # anyio wraps task-group failures: show the innermost one
        inner: BaseException = e
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        traceback.print_exception(inner, file=sys.stderr)
        error = f"{type(inner).__name__}: {inner}"
    summary["callbacks"] = cb.counts
    summary["callback_log"] = cb.log
    summary["progress"] = cb.progress
    failed_tools = [r["tool"] for r in summary["results"] if r["is_error"] and r["tool"] not in args.allow_error]
    if error is None and len(summary["results"]) != len(calls):
        error = f"only {len(summary['results'])} of {len(calls)} calls completed"
    if error is None and failed_tools:
        error = f"tool call failed: {', '.join(failed_tools)}"
    summary["error"] = error
    print(json.dumps(summary, indent=1, ensure_ascii=False))
    if error:
        print(f"mcp_client: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
