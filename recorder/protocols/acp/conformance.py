"""ACP frames against the ACP Python SDK's own models (`agent-client-protocol`, `acp.schema`).

Nothing is modelled again here. Each request or notification goes through the SDK's own
dispatch (`build_agent_router` for what the client sends, `build_client_router` for what the
agent sends) in front of a stand-in that accepts everything, so the SDK picks the model for each
method and validates the params exactly as an SDK agent or client would; the stand-in learns
which interface method was called, and that method's return annotation in `acp.interfaces` is
the model of the answer. The JSON-RPC envelope is checked with the schema's
`ClientRequest`/`AgentRequest`/... messages.

What the SDK accepts is the measure: the schema lets some optional fields fall back to their
default when malformed (`x-deserialize-default-on-error`), and so does this check. A method the
SDK routes nowhere (the schema's unstable `providers/*`, `nes/*`, `document/*`, ... in SDK
0.12.1) and a `session/update` kind it does not know are reported as unknown, not as violations.
"""

from __future__ import annotations

import functools
from importlib import metadata
from typing import Any, get_type_hints

from ...errors import UserError
from ..base import Verdict, errors_line
from ..envelope import check_envelope

try:
    from acp import interfaces, schema
    from acp.agent.router import build_agent_router
    from acp.client.router import build_client_router
    from acp.exceptions import RequestError
    from pydantic import TypeAdapter, ValidationError
except ImportError:
    raise UserError("checking ACP frames needs the ACP Python SDK (agent-client-protocol)",
                    "pip install 'wire-recorder[check]'") from None

SDK = f"agent-client-protocol {metadata.version('agent-client-protocol')}"

# (envelope model, interface whose methods the sender calls) per direction; c2a frames are the
# client's messages, which the SDK's agent side receives
_SIDES: dict[str, tuple[dict[str, Any], type]] = {
    "c2a": ({"request": schema.ClientRequest, "notification": schema.ClientNotification,
             "result": schema.ClientResponseMessage, "error": schema.ClientErrorMessage},
            interfaces.Agent),
    "a2c": ({"request": schema.AgentRequest, "notification": schema.AgentNotification,
             "result": schema.AgentResponseMessage, "error": schema.AgentErrorMessage},
            interfaces.Client),
}


class _StandIn:
    """Whatever the router asks for is an async handler that takes anything and notes its name."""

    def __init__(self) -> None:
        self.called: str | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        async def handler(**_kwargs: Any) -> None:
            self.called = name

        return handler


def _run(coro: Any) -> Any:
    # the handlers never wait on anything: one step runs a dispatch to its end
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the ACP SDK's dispatch waited on something")


@functools.cache
def _answer_adapter(interface: type, name: str) -> TypeAdapter[Any] | None:
    hint = get_type_hints(getattr(interface, name, None) or (lambda: None)).get("return")
    return None if hint is None else TypeAdapter(hint)


def _unknown_kind(errors: list[Any]) -> bool:
    """Only the discriminator of a top-level field was not one the SDK knows (a newer
    session/update kind): a type the model does not cover, not a broken frame."""
    return bool(errors) and all(e["type"] == "union_tag_invalid" and len(e["loc"]) == 1
                                for e in errors)


class AcpCheck:
    def __init__(self) -> None:
        self.stand_in = _StandIn()
        self.routers = {"c2a": build_agent_router(self.stand_in, use_unstable_protocol=True),
                        "a2c": build_client_router(self.stand_in, use_unstable_protocol=True)}
        self.handler_of: dict[tuple[str, str], str] = {}  # (direction, method) -> interface name

    def __call__(self, direction: str, obj: dict[str, Any],
                 answers: tuple[str, str | None] | None) -> Verdict:
        what, verdict = check_envelope(_SIDES[direction][0], obj)
        if verdict is not None:
            return verdict
        method = obj.get("method")
        if isinstance(method, str):
            return self._call(direction, method, obj.get("params"), what == "notification")
        if what == "result" and answers is not None:
            return self._answer(direction, answers[0], obj.get("result"))
        return None

    def _call(self, direction: str, method: str, params: Any, notification: bool) -> Verdict:
        self.stand_in.called = None
        try:
            _run(self.routers[direction](method, params, notification))
        except ValidationError as e:
            errors = e.errors()
            if _unknown_kind(errors):
                return ("unknown", f"{SDK} does not know this kind: {errors_line(errors)}")
            return ("violation", errors_line(errors))
        except RequestError as e:
            if e.code == -32601:
                return ("unknown", f"{SDK} has no model for {method} from the "
                                   f"{'client' if direction == 'c2a' else 'agent'}")
            return ("violation", f"{e}: {e.data}" if e.data else str(e))
        if self.stand_in.called is not None:
            self.handler_of[(direction, method)] = self.stand_in.called
        return None

    def _answer(self, direction: str, method: str, result: Any) -> Verdict:
        asked_by = "a2c" if direction == "c2a" else "c2a"
        name = self.handler_of.get((asked_by, method))
        adapter = _answer_adapter(_SIDES[asked_by][1], name) if name else None
        if adapter is None:
            return None
        try:
            adapter.validate_python(result)
        except ValidationError as e:
            return ("violation", errors_line(e.errors()))
        return None


def checker(version: str | None) -> AcpCheck:
    # one protocol version so far (1); the SDK's schema is the one to measure against
    return AcpCheck()
