"""MCP frames against the MCP Python SDK's own wire types (`mcp-types`, the `mcp.types` of mcp
2.x without the SDK's transport stack).

Nothing is modelled again here. The SDK keys its models by (method, protocol version): the
shape of a frame depends on the era (2025-11-25 for every handshake version, 2026-07-28 for the
per-request envelope), and a method outside its version (`ping` or `initialize` in 2026-07-28,
`server/discover` before) is not part of it. So each frame is checked against the version in
force for it: the one a request carries in `_meta` (2026-07-28), else the one `initialize`
offered and its answer settled, else the session's. A response is checked with the version of
the request it answers. A version the SDK does not know is checked against its version-free
models, and said once. A method the SDK models in no version (`tasks/*`) is unknown, not a
violation.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from ...errors import UserError
from ..base import Verdict, errors_line
from ..envelope import check_envelope

try:
    from mcp_types import jsonrpc
    from mcp_types import methods as mm
    from mcp_types.version import KNOWN_PROTOCOL_VERSIONS
    from pydantic import TypeAdapter, ValidationError
except ImportError:
    raise UserError("checking MCP frames needs the MCP SDK's wire types (mcp-types)",
                    "pip install 'wire-recorder[check]'") from None

SDK = f"mcp-types {metadata.version('mcp-types')}"
PV_META = "io.modelcontextprotocol/protocolVersion"

_ENVELOPES: dict[str, Any] = {"request": jsonrpc.JSONRPCRequest,
                              "notification": jsonrpc.JSONRPCNotification,
                              "result": jsonrpc.JSONRPCResponse, "error": jsonrpc.JSONRPCError}
# (kind, sender) -> the SDK's validator and the surface map it gates on; a result is keyed by the
# method of the request it answers
_CHECKS: dict[tuple[str, str], tuple[Any, Any]] = {
    ("request", "c2a"): (mm.validate_client_request, mm.CLIENT_REQUESTS),
    ("request", "a2c"): (mm.parse_server_request, mm.SERVER_REQUESTS),
    ("notification", "c2a"): (mm.validate_client_notification, mm.CLIENT_NOTIFICATIONS),
    ("notification", "a2c"): (mm.parse_server_notification, mm.SERVER_NOTIFICATIONS),
    ("result", "a2c"): (mm.validate_server_result, mm.SERVER_RESULTS),
    ("result", "c2a"): (mm.validate_client_result, mm.CLIENT_RESULTS),
}
_MONOLITH = {"request": mm.MONOLITH_REQUESTS, "notification": mm.MONOLITH_NOTIFICATIONS,
             "result": mm.MONOLITH_RESULTS}


def _key(direction: str, rpc_id: Any) -> tuple[str, str, Any]:
    return (direction, type(rpc_id).__name__, rpc_id)


class McpCheck:
    def __init__(self, version: str | None) -> None:
        self.version = version  # in force for frames that carry none
        self.asked: dict[tuple[str, str, Any], str | None] = {}  # request -> its version
        self.unknown_versions: set[str | None] = set()

    def __call__(self, direction: str, obj: dict[str, Any],
                 answers: tuple[str, str | None] | None) -> Verdict:
        what, verdict = check_envelope(_ENVELOPES, obj)
        if verdict is not None:
            return verdict
        method = obj.get("method")
        params = obj.get("params")
        if isinstance(method, str):  # a request or a notification
            version = self._version_of(method, params)
            if what == "request":
                self.asked[_key(direction, obj["id"])] = version
            return self._check(what, direction, method, version, params)
        version = self.asked.pop(_key("a2c" if direction == "c2a" else "c2a", obj.get("id")),
                                  self.version)
        if what == "error" or answers is None:
            return None
        result = obj["result"]
        verdict = self._check("result", direction, answers[0], version, result)
        if answers[0] == "initialize" and direction == "a2c" and verdict is None:
            self.version = result.get("protocolVersion")  # what the server settled on
        return verdict

    def _version_of(self, method: str, params: Any) -> str | None:
        if isinstance(params, dict):
            meta = params.get("_meta")
            if isinstance(meta, dict) and isinstance(meta.get(PV_META), str):
                return meta[PV_META]
            if method == "initialize" and isinstance(params.get("protocolVersion"), str):
                return params["protocolVersion"]
        return self.version

    def _check(self, what: str, direction: str, method: str, version: str | None,
               body: Any) -> Verdict:
        if version not in KNOWN_PROTOCOL_VERSIONS:
            return self._monolith(what, method, version, body)
        validate, surface = _CHECKS[(what, direction)]
        try:
            validate(method, version, body)
        except ValidationError as e:
            return ("violation", f"{errors_line(e.errors())} (MCP {version})")
        except KeyError:
            if any(m == method for m, _ in surface):
                return ("violation", f"{method} is not part of MCP {version} ({what} from the "
                                     f"{'client' if direction == 'c2a' else 'server'})")
            return ("unknown", f"{SDK} models {method} in no protocol version")
        except RuntimeError as e:  # the SDK's maps disagree with each other
            return ("unknown", f"{SDK}: {e}")
        return None

    def _monolith(self, what: str, method: str, version: str | None, body: Any) -> Verdict:
        model: Any = _MONOLITH[what].get(method)
        if model is None:
            return ("unknown", f"{SDK} models {method} in no protocol version")
        try:
            if what == "result":
                TypeAdapter(model).validate_python(body, by_name=False)
            else:
                model.model_validate({"method": method, "params": body} if body is not None
                                     else {"method": method}, by_name=False)
        except ValidationError as e:
            return ("violation", errors_line(e.errors()))
        if version in self.unknown_versions:
            return None
        self.unknown_versions.add(version)
        return ("unknown", f"MCP {version!r} is not a version {SDK} knows: checked against its "
                           "version-free models")


def checker(version: str | None) -> McpCheck:
    return McpCheck(version)
