"""A small MCP stdio server that asks its client for sampling, roots and elicitation.

    .peers/mcp2/bin/python tests/harness/sdk/mcp_demo_server.py   # mcp 2.x: both protocol eras
    .peers/mcp1/bin/python tests/harness/sdk/mcp_demo_server.py   # mcp 1.x: handshake era only

Tools (the same names, arguments and results under both SDK lines):

* `add(a, b)` -> "a + b = N"; sends one `notifications/progress` when the call carries a
  progressToken.
* `ask_llm(question)` -> "llm said: <text> (model <model>)"; asks the client `sampling/createMessage`.
* `client_roots()` -> "roots: <uri> (<name>), ..."; asks the client `roots/list`.
* `confirm(action)` -> "confirmed <action>: <bool> (<note>)" or "<action>: <decline|cancel>"; asks the
  client `elicitation/create` (form mode, schema {confirm: bool, note: str}).
* with `--with-wait` only (so that recordings of the four tools above stay valid): `wait(seconds)`
  -> "waited N s" after one progress notification and the wait, for a client to cancel.

With mcp 2.x the requests to the client are `Resolve(...)` resolvers (`Sample`, `ListRoots`,
`Elicit`): on a 2026-07-28 connection they come back as an `input_required` result the client
answers by retrying with `inputResponses` + `requestState`; on a handshake-era connection
(`initialize`) they are sent as standalone server->client requests. With mcp 1.x they are always
standalone requests (`ctx.session.create_message`, `list_roots`, `ctx.elicit`).

Nothing here depends on time, randomness or paths, so the output is deterministic (the 2026-era
`requestState` blob excepted: the SDK seals it with a per-process random key). The SDK's
MCPDeprecationWarnings (sampling, roots, progress in the handshake era) are suppressed, and the
SDK's per-request INFO log lines are turned off, so stderr stays quiet unless something fails.
"""

# No `from __future__ import annotations`: the SDKs read the tools' and resolvers' annotations at
# registration, and the mcp 2.x names they use are imported inside the version branch below.
import logging
import sys
import warnings
from importlib.metadata import version

import anyio

warnings.filterwarnings("ignore", message=".*deprecat.*", category=Warning)
try:  # the category exists in mcp 2.x only
    from mcp.shared.exceptions import MCPDeprecationWarning

    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
except ImportError:
    pass

from pydantic import BaseModel, Field  # noqa: E402

MCP_VERSION = version("mcp")
MCP_MAJOR = int(MCP_VERSION.split(".")[0])
NAME = "wire-recorder-demo"
WITH_WAIT = "--with-wait" in sys.argv[1:]

SAMPLING_PROMPT_SYSTEM = "Answer with one number."
ELICIT_MESSAGE = "Confirm the action?"


class Confirmation(BaseModel):
    confirm: bool = Field(description="go ahead")
    note: str = Field(default="", description="a remark")


def _add_text(a: int, b: int) -> str:
    return f"{a} + {b} = {a + b}"


def _llm_text(result) -> str:
    content = result.content
    text = getattr(content, "text", None)
    if text is None and isinstance(content, list) and content:  # tool-capable results carry a list
        text = getattr(content[0], "text", None)
    return f"llm said: {text} (model {result.model})"


def _roots_text(result) -> str:
    return "roots: " + ", ".join(f"{r.uri} ({r.name})" for r in result.roots)


def _confirm_text(action: str, outcome) -> str:
    if outcome.action == "accept":
        data = outcome.data
        if isinstance(data, dict):  # mcp 1.x ElicitResult.content is a dict
            data = Confirmation.model_validate(data)
        return f"confirmed {action}: {data.confirm} ({data.note})"
    return f"{action}: {outcome.action}"


def _progress_tools(server, Context) -> None:
    """`add` and (with --with-wait) `wait`, the tools that report progress, on either SDK line:
    the SDK finds the context argument by its annotation, the SDK line's own Context class."""

    @server.tool(description="Add two integers (reports progress when asked to).")
    async def add(a: int, b: int, ctx: Context) -> str:
        await ctx.report_progress(1, 1, "added")
        return _add_text(a, b)

    if WITH_WAIT:
        @server.tool(description="Wait (reporting progress first): for cancelling.")
        async def wait(seconds: float, ctx: Context) -> str:
            await ctx.report_progress(0, 1, "waiting")
            await anyio.sleep(seconds)
            return f"waited {seconds:g} s"


def _quiet_logs() -> None:
    # mcp 1.x logs "Processing request of type ..." at INFO for every request.
    for name in ("mcp", "mcp.server", "mcp.server.lowlevel.server"):
        logging.getLogger(name).setLevel(logging.WARNING)


if MCP_MAJOR >= 2:
    # Resolvers live at module level: their `module:qualname` is the key of their input request
    # on the wire (`inputRequests` / `inputResponses`), e.g. "__main__:sample_question".
    from typing import Annotated

    from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
    from mcp.server.mcpserver.resolve import ElicitationResult
    from mcp_types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent

    def sample_question(question: str) -> Sample:
        return Sample(
            [SamplingMessage(role="user", content=TextContent(type="text", text=question))],
            max_tokens=16,
            system_prompt=SAMPLING_PROMPT_SYSTEM,
        )

    def ask_roots() -> ListRoots:
        return ListRoots()

    def ask_confirmation(action: str) -> Elicit[Confirmation]:
        return Elicit(f"{ELICIT_MESSAGE} {action}", Confirmation)

    def build_v2():
        server = MCPServer(NAME, version=MCP_VERSION, log_level="WARNING")
        _progress_tools(server, Context)

        @server.tool(description="Ask the client's LLM a question (sampling/createMessage).")
        async def ask_llm(
            question: str, answer: Annotated[CreateMessageResult, Resolve(sample_question)]
        ) -> str:
            return _llm_text(answer)

        @server.tool(description="List the client's roots (roots/list).")
        async def client_roots(roots: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
            return _roots_text(roots)

        @server.tool(description="Ask the user to confirm an action (elicitation/create, form mode).")
        async def confirm(
            action: str, outcome: Annotated[ElicitationResult[Confirmation], Resolve(ask_confirmation)]
        ) -> str:
            return _confirm_text(action, outcome)

        return server


def build_v1():
    from mcp.server.fastmcp import Context, FastMCP
    from mcp.types import SamplingMessage, TextContent

    server = FastMCP(NAME, log_level="WARNING")
    _progress_tools(server, Context)

    @server.tool(description="Ask the client's LLM a question (sampling/createMessage).")
    async def ask_llm(question: str, ctx: Context) -> str:
        result = await ctx.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text=question))],
            max_tokens=16,
            system_prompt=SAMPLING_PROMPT_SYSTEM,
        )
        return _llm_text(result)

    @server.tool(description="List the client's roots (roots/list).")
    async def client_roots(ctx: Context) -> str:
        return _roots_text(await ctx.session.list_roots())

    @server.tool(description="Ask the user to confirm an action (elicitation/create, form mode).")
    async def confirm(action: str, ctx: Context) -> str:
        return _confirm_text(action, await ctx.elicit(f"{ELICIT_MESSAGE} {action}", Confirmation))

    return server


def main() -> None:
    server = build_v2() if MCP_MAJOR >= 2 else build_v1()
    _quiet_logs()
    server.run("stdio")


if __name__ == "__main__":
    main()
