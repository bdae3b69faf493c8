"""A scripted ACP client built on the official ACP Python SDK (agent-client-protocol 0.12.1).

Run it with the SDK's own interpreter (the project venv does not have the SDK):

    .peers/acp/bin/python tests/harness/sdk/acp_client.py PLAN.json \
        [--summary OUT.json] [--raw-in A2C.bin] [--raw-out C2A.bin] [--agent-stderr ERR.log] \
        -- wire-proxy --db s.db -q -- kimi acp

It spawns the agent command, sends `initialize` (advertising fs read/write and terminal),
`session/new` (cwd = the plan's work dir), then each prompt of the plan in turn, and answers the
agent's requests:

* `session/request_permission`: the next answer of the plan's ordered `permissions` list
  (`approve`, `reject`, `approve_for_session` -> that optionId; `cancelled` -> the cancelled
  outcome). A request beyond the list is answered `cancelled` and reported as a problem.
* `fs/read_text_file`, `fs/write_text_file`: on the real files.
* `terminal/*`: runs the shell line in `command` (plus `args`, if any) with /bin/sh in the
  requested cwd (default: the work dir), stdout and stderr merged; terminal ids are `term-1`,
  `term-2`, ... in creation order.

The agent is started the way the SDK's `spawn_agent_process` does it (the SDK's trimmed
`default_environment()` plus the plan's `env`; the SDK's `ClientSideConnection` over the pipes),
except that stderr goes to --agent-stderr instead of an unread pipe, the raw stdio bytes are
tapped under the SDK, and stdin is closed (EOF) at the end with a generous wait for the agent
(a recording proxy in front of it needs a moment to save). Only the SDK and the standard
library are used. Everything the client does is deterministic for
a given agent behaviour (no clocks, no random ids). The summary (JSON, to --summary or stdout)
has per prompt: stopReason, the session/update kinds seen (in order), the agent's requests with
the answers given, the agent text and thought, tool call statuses. --raw-in/--raw-out get the
exact bytes read from / written to the agent's stdio. Exit status: 0 = the exchange completed
(the plan's expectations are checked by the caller), 1 = protocol failure (message on stderr and
in the summary's "problems"), 2 = usage error.

Plan (JSON object):

    {"cwd": "/abs/work/dir",              # session/new cwd, default for terminals
     "prompts": ["text", ...],            # one session/prompt each
     "permissions": ["approve", "reject"],  # or cancelled; cancel_turn = session/cancel first
     "load_session": "id",                # session/load this id instead of session/new
     "env": {"HOME": "...", ...},         # added to the SDK's trimmed default environment
     "timeout": 60,                       # seconds for the whole exchange
     "await_commands": 5,                 # wait up to N s for available_commands_update
                                          # before the first prompt (stable frame order); 0 = no
     "client_info": {"name": "...", "version": "..."},
     "mcp_servers": [{"name": "...", "command": "...", "args": [], "env": [{"name": "K", "value": "V"}]},
                     {"type": "http", "name": "...", "url": "...", "headers": [{"name": "H", "value": "V"}]}]}
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Any, cast

try:
    import acp
    from acp import schema
    from acp.transports import default_environment
except ImportError as e:  # pragma: no cover - depends on the interpreter
    print(f"acp_client.py: the ACP SDK is not importable ({e}); run this script with "
          f".peers/acp/bin/python (bash scripts/setup-peers installs it)", file=sys.stderr)
    sys.exit(2)

PERMISSION_ANSWERS = ("approve", "reject", "approve_for_session", "cancelled", "cancel_turn",
                      "approve_once", "approve_always")  # the last two: Kimi Code 2.x option ids
READ_CHUNK = 65536


class ProtocolFailure(Exception):
    pass


def _dump(model: Any) -> Any:
    if model is None:
        return None
    if hasattr(model, "model_dump"):
        return model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return model


def _short_tool_call_id(tool_call_id: str | None) -> str | None:
    """kimi's ACP toolCallId is `<turn uuid>/<LLM tool call id>`; keep the stable part."""
    if not tool_call_id:
        return tool_call_id
    return tool_call_id.rsplit("/", 1)[-1]


class Terminal:
    def __init__(self, tid: str, proc: asyncio.subprocess.Process, limit: int | None) -> None:
        self.id = tid
        self.proc = proc
        self.limit = limit
        self.buf = bytearray()
        self.truncated = False
        self.reader = asyncio.ensure_future(self._read())
        self.released = False

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            chunk = await self.proc.stdout.read(READ_CHUNK)
            if not chunk:
                return
            self.buf += chunk
            if self.limit is not None and len(self.buf) > self.limit:
                # keep the tail, cut at a UTF-8 character boundary
                cut = len(self.buf) - self.limit
                while cut < len(self.buf) and (self.buf[cut] & 0xC0) == 0x80:
                    cut += 1
                del self.buf[:cut]
                self.truncated = True

    async def wait(self) -> int:
        rc = await self.proc.wait()
        await self.reader
        return rc

    @property
    def exited(self) -> bool:
        return self.proc.returncode is not None and self.reader.done()

    def exit_status(self) -> dict[str, Any]:
        rc = self.proc.returncode
        assert rc is not None
        if rc < 0:
            try:
                return {"signal": signal.Signals(-rc).name}
            except ValueError:
                return {"signal": f"SIG{-rc}"}
        return {"exitCode": rc}

    def output(self) -> str:
        return bytes(self.buf).decode("utf-8", errors="replace")

    async def kill(self) -> None:
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await self.proc.wait()
        await self.reader


class PlanClient:
    """The `acp.Client` implementation: answers from the plan, real files, real commands."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.cwd = str(plan["cwd"])
        self.permissions = list(plan.get("permissions", []))
        for a in self.permissions:
            if a not in PERMISSION_ANSWERS:
                raise ProtocolFailure(f"plan: unknown permission answer {a!r} (use {PERMISSION_ANSWERS})")
        self.perm_index = 0
        self.terminals: dict[str, Terminal] = {}
        self.n_terminals = 0
        self.problems: list[str] = []
        self.phase: dict[str, Any] = {"updates": [], "requests": []}  # before the first prompt
        self.session_phase = self.phase
        self.commands_seen = asyncio.Event()
        self.shell_env = dict(os.environ)
        self.conn: Any = None  # the ClientSideConnection, for session/cancel

    # -- bookkeeping ------------------------------------------------------------------------------

    def _request(self, method: str, params: dict[str, Any], answer: Any) -> None:
        self.phase["requests"].append({"method": method, "params": params, "answer": answer})

    def _terminal(self, terminal_id: str) -> Terminal:
        t = self.terminals.get(terminal_id)
        if t is None:
            raise acp.RequestError.invalid_params({"terminalId": f"unknown terminal {terminal_id}"})
        return t

    # -- session/update ---------------------------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = getattr(update, "session_update", None) or type(update).__name__
        ph = self.phase
        ph["updates"].append(kind)
        if kind == "agent_message_chunk":
            ph["text"] = ph.get("text", "") + getattr(update.content, "text", "")
        elif kind == "agent_thought_chunk":
            ph["thought"] = ph.get("thought", "") + getattr(update.content, "text", "")
        elif kind in ("tool_call", "tool_call_update"):
            cid = _short_tool_call_id(update.tool_call_id)
            calls = ph.setdefault("tool_calls", {})
            entry = calls.setdefault(cid, {"statuses": []})
            if getattr(update, "title", None):
                entry["title"] = update.title
            if update.status:
                entry["statuses"].append(update.status)
        elif kind == "available_commands_update":
            self.commands_seen.set()

    # -- permission -------------------------------------------------------------------------------

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        offered = [o.option_id for o in options]
        if self.perm_index < len(self.permissions):
            answer = self.permissions[self.perm_index]
        else:
            answer = "cancelled"
            self.problems.append(
                f"permission request #{self.perm_index + 1} beyond the plan's {len(self.permissions)} answers"
            )
        self.perm_index += 1
        if answer not in ("cancelled", "cancel_turn") and answer not in offered:
            self.problems.append(f"permission answer {answer!r} not among the options {offered}")
        self._request(
            "session/request_permission",
            {"toolCallId": _short_tool_call_id(tool_call.tool_call_id), "title": tool_call.title,
             "options": offered},
            answer,
        )
        if answer == "cancel_turn":
            # what an editor does when the user stops the turn while a permission is pending:
            # session/cancel, then the pending request answered `cancelled` (ACP's prompt-turn
            # cancellation)
            await self.conn.cancel(session_id=session_id)
            answer = "cancelled"
        if answer == "cancelled":
            return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=answer)
        )

    # -- fs ---------------------------------------------------------------------------------------

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> Any:
        p = Path(path)
        if not p.is_absolute():
            raise acp.RequestError.invalid_params({"path": "must be absolute"})
        try:
            content = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise acp.RequestError.resource_not_found(path) from None
        if line is not None or limit is not None:
            lines = content.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            end = start + limit if limit is not None else None
            content = "".join(lines[start:end])
        self._request("fs/read_text_file", {"path": path, "line": line, "limit": limit}, {"content": content})
        return schema.ReadTextFileResponse(content=content)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        p = Path(path)
        if not p.is_absolute():
            raise acp.RequestError.invalid_params({"path": "must be absolute"})
        p.write_text(content, encoding="utf-8")
        self._request("fs/write_text_file", {"path": path, "content": content}, {})
        return schema.WriteTextFileResponse()

    # -- terminal ---------------------------------------------------------------------------------

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[Any] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> Any:
        self.n_terminals += 1
        tid = f"term-{self.n_terminals}"
        line = command if not args else " ".join([command, *(_sh_quote(a) for a in args)])
        run_env = dict(self.shell_env)
        for v in env or []:
            run_env[v.name] = v.value
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", line,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=cwd or self.cwd,
            env=run_env,
            start_new_session=True,
        )
        self.terminals[tid] = Terminal(tid, proc, output_byte_limit)
        self._request(
            "terminal/create",
            {"command": command, "args": args, "cwd": cwd, "outputByteLimit": output_byte_limit},
            {"terminalId": tid},
        )
        return schema.CreateTerminalResponse(terminal_id=tid)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        t = self._terminal(terminal_id)
        await t.wait()
        st = t.exit_status()
        self._request("terminal/wait_for_exit", {"terminalId": terminal_id}, st)
        return schema.WaitForTerminalExitResponse(exit_code=st.get("exitCode"), signal=st.get("signal"))

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        t = self._terminal(terminal_id)
        if t.proc.returncode is not None:
            await t.reader  # the pipe is drained once the process has exited
        answer: dict[str, Any] = {"output": t.output(), "truncated": t.truncated}
        if t.exited:
            answer["exitStatus"] = t.exit_status()
            self._request("terminal/output", {"terminalId": terminal_id}, answer)
            st = answer["exitStatus"]
            return schema.TerminalOutputResponse(
                output=answer["output"], truncated=t.truncated,
                exit_status=schema.TerminalExitStatus(exit_code=st.get("exitCode"), signal=st.get("signal")),
            )
        self._request("terminal/output", {"terminalId": terminal_id}, answer)
        return schema.TerminalOutputResponse(output=answer["output"], truncated=t.truncated)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        t = self._terminal(terminal_id)
        await t.kill()
        self._request("terminal/kill", {"terminalId": terminal_id}, {})
        return schema.KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        t = self._terminal(terminal_id)
        await t.kill()
        t.released = True
        del self.terminals[terminal_id]
        self._request("terminal/release", {"terminalId": terminal_id}, {})
        return schema.ReleaseTerminalResponse()

    # -- anything else ----------------------------------------------------------------------------

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.problems.append(f"unexpected extension request {method}")
        raise acp.RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self.problems.append(f"unexpected extension notification {method}")

    async def close_all(self) -> None:
        for t in list(self.terminals.values()):
            await t.kill()
            self.problems.append(f"terminal {t.id} never released")
        self.terminals.clear()


def _sh_quote(s: str) -> str:
    return shlex.quote(s)


# -------------------------------------------------------------------------------------------------


async def _tee(src: asyncio.StreamReader, dst: asyncio.StreamReader, log: bytearray) -> None:
    """Copy the agent's stdout into the reader the SDK reads from, keeping the exact bytes."""
    try:
        while True:
            chunk = await src.read(READ_CHUNK)
            if not chunk:
                break
            log += chunk
            dst.feed_data(chunk)
    finally:
        dst.feed_eof()


async def run(plan: dict[str, Any], agent_argv: list[str], *, agent_stderr: Any,
              raw_in: bytearray, raw_out: bytearray) -> dict[str, Any]:
    client = PlanClient(plan)
    summary: dict[str, Any] = {"ok": False, "problems": client.problems, "prompts": []}
    env = dict(default_environment())
    env.update({str(k): str(v) for k, v in (plan.get("env") or {}).items()})
    try:
        proc = await asyncio.create_subprocess_exec(
            *agent_argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=agent_stderr,
            env=env,
            cwd=client.cwd,
        )
    except OSError as e:  # the agent runs in the work dir: relative commands are resolved there
        client.problems.append(f"cannot start the agent {agent_argv[0]!r} (cwd {client.cwd}): {e.strerror}")
        return summary
    assert proc.stdin is not None and proc.stdout is not None
    writer = proc.stdin
    orig_write = writer.write

    def logged_write(data: bytes | bytearray | memoryview) -> None:  # one whole frame per call
        raw_out.extend(data)
        orig_write(data)

    writer.write = logged_write  # type: ignore[method-assign]
    reader = asyncio.StreamReader(limit=1 << 26)
    tee = asyncio.ensure_future(_tee(proc.stdout, reader, raw_in))
    # PlanClient implements the SDK's Client protocol by its methods, not by inheritance
    conn = acp.connect_to_agent(cast(Any, client), writer, reader)
    client.conn = conn
    timeout = float(plan.get("timeout", 60))
    exit_timeout = float(plan.get("exit_timeout", 60))
    try:
        async with asyncio.timeout(timeout):
            await _exchange(plan, client, conn, summary)
    except TimeoutError:
        client.problems.append(f"timed out after {timeout:g} s")
        exit_timeout = 5.0
    except acp.RequestError as e:
        client.problems.append(f"agent answered an error: {e.code} {e}: {getattr(e, 'data', None)}")
    except (ConnectionError, asyncio.IncompleteReadError) as e:
        client.problems.append(f"connection lost: {type(e).__name__}: {e}")
    finally:
        await client.close_all()
        await conn.close()  # stops the SDK's tasks; the stdin pipe stays open
        try:  # EOF on the agent's stdin: kimi (and a proxy in front of it) then exits
            writer.close()
            await writer.wait_closed()
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            rc = await asyncio.wait_for(proc.wait(), exit_timeout)
        except TimeoutError:
            client.problems.append(f"agent did not exit {exit_timeout:g} s after stdin EOF; terminated")
            proc.terminate()
            rc = await proc.wait()
        await tee
        summary["agent_exit_code"] = rc
    summary["ok"] = not client.problems
    return summary


def _mcp_servers(plan: dict[str, Any]) -> list[Any]:
    """The plan's `mcp_servers` (ACP wire shape: stdio with `env`, or `"type": "http"` with
    `headers`) as the SDK's models, so session/new carries them as an editor would send them."""
    out: list[Any] = []
    for s in plan.get("mcp_servers") or []:
        model = schema.HttpMcpServer if s.get("type") == "http" else schema.McpServerStdio
        out.append(model.model_validate(s))
    return out


async def _exchange(plan: dict[str, Any], client: PlanClient, conn: Any, summary: dict[str, Any]) -> None:
    init = await conn.initialize(
        protocol_version=acp.PROTOCOL_VERSION,
        client_capabilities=schema.ClientCapabilities(
            fs=schema.FileSystemCapabilities(read_text_file=True, write_text_file=True),
            terminal=True,
        ),
        client_info=schema.Implementation(**(plan.get("client_info")
                                             or {"name": "wire-recorder-acp-client", "version": "1"})),
    )
    summary["initialize"] = {
        "protocolVersion": init.protocol_version,
        "agentInfo": _dump(init.agent_info),
        "authMethods": [m.id for m in (init.auth_methods or [])],
    }
    load = plan.get("load_session")
    if load:  # a session an earlier agent process created: its history comes as session/update
        await conn.load_session(cwd=client.cwd, session_id=load, mcp_servers=_mcp_servers(plan))
        session_id = load
    else:
        new = await conn.new_session(cwd=client.cwd, mcp_servers=_mcp_servers(plan))
        session_id = new.session_id
    summary["sessionId"] = session_id
    wait_s = float(plan.get("await_commands", 5))
    if wait_s > 0:
        try:
            await asyncio.wait_for(client.commands_seen.wait(), wait_s)
        except TimeoutError:
            summary["available_commands_update"] = "not seen before the first prompt"
    summary["session"] = client.phase
    for text in plan.get("prompts", []):
        ph: dict[str, Any] = {"prompt": text, "updates": [], "requests": []}
        client.phase = ph
        summary["prompts"].append(ph)
        resp = await conn.prompt(session_id=session_id, prompt=[acp.text_block(text)])
        ph["stopReason"] = resp.stop_reason
    summary["permissions_used"] = client.perm_index
    if client.perm_index < len(client.permissions):
        client.problems.append(
            f"only {client.perm_index} of the plan's {len(client.permissions)} permission answers used"
        )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: acp_client.py PLAN.json [options] -- AGENT_CMD [ARGS...]", file=sys.stderr)
        return 2
    cut = argv.index("--")
    own, agent_argv = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser(prog="acp_client.py", description=__doc__.splitlines()[0])
    ap.add_argument("plan")
    ap.add_argument("--summary", help="write the JSON summary here (default: stdout)")
    ap.add_argument("--raw-in", help="write the exact bytes received from the agent here")
    ap.add_argument("--raw-out", help="write the exact bytes sent to the agent here")
    ap.add_argument("--agent-stderr", help="the agent's stderr goes to this file (default: inherited)")
    args = ap.parse_args(own)
    if not agent_argv:
        ap.error("no agent command after --")
    plan = json.loads(Path(args.plan).read_text(encoding="utf-8"))
    raw_in, raw_out = bytearray(), bytearray()
    with contextlib.ExitStack() as stack:
        err_file = stack.enter_context(open(args.agent_stderr, "wb")) if args.agent_stderr else None
        try:
            summary = asyncio.run(run(plan, agent_argv, agent_stderr=err_file, raw_in=raw_in, raw_out=raw_out))
        except ProtocolFailure as e:
            summary = {"ok": False, "problems": [str(e)]}
    if args.raw_in:
        Path(args.raw_in).write_bytes(bytes(raw_in))
    if args.raw_out:
        Path(args.raw_out).write_bytes(bytes(raw_out))
    text = json.dumps(summary, indent=1, ensure_ascii=False)
    if args.summary:
        Path(args.summary).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    if summary["problems"]:
        for p in summary["problems"]:
            print(f"acp_client.py: {p}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
