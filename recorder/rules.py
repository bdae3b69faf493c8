"""The classification rule table: what a JSON-RPC frame is, as data, compiled twice.

One table says, per in-tree protocol, which methods each side sends, which methods carry a finer
type (and where), which carry a payload below their params (and where), and which types are
known (each protocol's entry is data in its own package, `protocols/<proto>/rules.py`, in
the shape of `protocols/table.py`; the streamed pieces' paths too). It is compiled

* to Python (`python_rules`): what `classify` applies to every frame, live (replay) or stored,
* to SQL (`sql_columns`): what the loader's bulk path (`recorder/bulk.py`) applies to a batch of
  frames inside DuckDB, without a Python object per frame.

tests/test_rules.py checks that both give the same answer on every sample session and on a
generated set covering every frame kind, and that the Python compile equals each adapter's own
`msg_type` / `payload` / `known` (third-party adapters, which have no table here, keep their
methods; their sessions load frame by frame).

The JSON-RPC 2.0 shape rules (SHAPES) are the same for every protocol: the first rule whose
member is present decides the kind and where the payload comes from.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import protocols
from .protocols.table import ProtocolRules

# (member, kind, payload member): a message with a (string) `method` is a request when it has
# an `id` member (even null), else a notification; then `error`, then `result`; anything else is
# invalid ("neither a request ... nor a response").
SHAPES: tuple[tuple[str, str, str], ...] = (
    ("method", "request|notification", "params"),
    ("error", "error", "error"),
    ("result", "response", "result"),
)


def _in_tree() -> dict[str, ProtocolRules]:
    """Each in-tree protocol's entry, from its package's `rules` module."""
    out = {}
    for name in protocols.IN_TREE:
        out[name] = importlib.import_module(f"{protocols.__name__}.{name}.rules").RULES
    return out


RULES: dict[str, ProtocolRules] = {
    **_in_tree(),
    "unknown": ProtocolRules("unknown"),  # the generic adapter: nothing is known
}
# the streamed pieces' paths of every protocol, and the markers of deeper nesting
PIECE_PATHS: tuple[str, ...] = tuple(p for r in RULES.values() for p in r.pieces)
NESTED_MARKERS: tuple[bytes, ...] = tuple(r.nested_marker for r in RULES.values()
                                          if r.nested_marker)


def rules_for(adapter: Any) -> ProtocolRules | None:
    """The table of an in-tree adapter (None for another one: it classifies with its methods)."""
    r = RULES.get(getattr(adapter, "name", ""))
    if r is None:
        return None
    module = type(adapter).__module__
    return r if module.startswith(__package__ + ".protocols") else None


# -- Python ------------------------------------------------------------------------------------

def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for k in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj


@dataclass(frozen=True)
class PythonRules:
    msg_type: Callable[[str, Any], str | None]
    payload: Callable[[str, Any], Any]
    known: Callable[[str, str, str | None], bool]


def python_rules(r: ProtocolRules) -> PythonRules:
    typed, payload_at, known_types = dict(r.typed), dict(r.payload_at), dict(r.known_types)
    client, agent = r.client_methods, r.agent_methods

    def msg_type(method: str, params: Any) -> str | None:
        path = typed.get(method)
        if path is None:
            return None
        t = _at(params, path)
        return t if isinstance(t, str) else None

    def payload(method: str, params: Any) -> Any:
        path = payload_at.get(method)
        if path is None or not isinstance(params, dict):
            return params
        return _at(params, path)

    def known(direction: str, method: str, mtype: str | None) -> bool:
        if direction == "c2a":
            return method in client
        types = known_types.get(method)
        if types is not None:
            return mtype in types
        return method in agent

    return PythonRules(msg_type, payload, known)


_PY: dict[str, PythonRules] = {name: python_rules(r) for name, r in RULES.items()}
_BY_ADAPTER: dict[int, PythonRules | None] = {}


def compiled(adapter: Any) -> PythonRules | None:
    """The Python compile of an adapter's table (None: a third-party adapter)."""
    key = id(adapter)
    try:
        return _BY_ADAPTER[key]
    except KeyError:
        r = rules_for(adapter)
        found = _BY_ADAPTER[key] = _PY[r.name] if r is not None else None
        return found


# -- SQL ---------------------------------------------------------------------------------------
# The SQL side works on a relation with the frame's text `line` and its direction `dir`. Each
# frame is parsed three times, each time for a list of paths: their JSON types (which also says
# whether the line is JSON at all), the strings at them, and the payload, whose path is chosen
# per frame (only the payload is written out again as JSON text: params twice cost 2x).

def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _in(x: str, names: frozenset[str] | set[str]) -> str:
    return f"coalesce({x} IN ({', '.join(_lit(n) for n in sorted(names))}), false)" if names \
        else "false"


def _jpath(path: tuple[str, ...]) -> str:
    # a JSON path of object keys; DuckDB quotes a key with "..." inside the path
    return "$." + ".".join('"' + k.replace('"', '\\"') + '"' for k in path)


def typed_paths(r: ProtocolRules) -> list[tuple[str, ...]]:
    """The paths under params of the finer types, in a fixed order."""
    seen: list[tuple[str, ...]] = []
    for path in r.typed.values():
        if path not in seen:
            seen.append(path)
    return seen


_TYPES = ["$", "$.method", "$.id", "$.params", "$.error", "$.result", "$.jsonrpc"]
_STRINGS = ["$.jsonrpc", "$.method", "$.id"]


def sql_extract(r: ProtocolRules, line: str = "line", more: tuple[str, ...] = ()) -> str:
    """Select items `t` (the JSON types at the paths the rules read; NULL when the line is not
    JSON) and `s` (the strings there, then at the paths `more`, from `string_at(len(more))`)."""
    extra = [_jpath(("params",) + p) for p in typed_paths(r)]
    tlist = "[" + ", ".join(_lit(p) for p in _TYPES + extra) + "]"
    slist = "[" + ", ".join(_lit(p) for p in _STRINGS + extra + list(more)) + "]"
    return (f"try(json_type({line}, {tlist})) AS t, "
            f"json_extract_string(CASE WHEN t IS NOT NULL THEN {line} END, {slist}) AS s")


def more_strings_at(r: ProtocolRules) -> int:
    """The index in `s` (1-based) of the first of sql_extract's `more` paths."""
    return len(_STRINGS) + len(typed_paths(r)) + 1


def sql_members(r: ProtocolRules) -> str:
    """Select items naming, once, what `sql_columns` reads from `sql_extract`'s t and s:
    m_rpc (the jsonrpc string), m_method (the method as a string, NULL when absent or null),
    m_id (the id's text), t_top, t_method, t_id, t_params, t_error, t_result, t_rpc, and x_1.. /
    tx_1.. (the finer types' values and JSON types)."""
    items = ["s[1] AS m_rpc",
             "CASE WHEN t[2] = 'VARCHAR' THEN s[2] END AS m_method", "s[3] AS m_id",
             "t[1] AS t_top", "t[2] AS t_method", "t[3] AS t_id", "t[4] AS t_params",
             "t[5] AS t_error", "t[6] AS t_result", "t[7] AS t_rpc"]
    for i in range(len(typed_paths(r))):
        items += [f"s[{4 + i}] AS x_{i + 1}", f"t[{8 + i}] AS tx_{i + 1}"]
    return ", ".join(items)


def sql_columns(r: ProtocolRules, line: str = "line") -> dict[str, str]:
    """SQL expressions over `sql_members`' columns, `line` and `dir` for: ok (the frame is a
    well-formed JSON-RPC 2.0 object the bulk path may classify; others go through the Python
    classifier), kind, method, rpc_id, id_is_str, msg_type, payload, known."""
    typed = typed_paths(r)
    has_method = "(m_method IS NOT NULL)"
    method_s = "m_method"

    mt_cases = " ".join(
        f"WHEN {method_s} = {_lit(m)} AND tx_{typed.index(p) + 1} = 'VARCHAR' "
        f"THEN x_{typed.index(p) + 1}"
        for m, p in sorted(r.typed.items()))
    msg_type = f"CASE {mt_cases} ELSE NULL END" if mt_cases else "NULL::VARCHAR"
    # each branch a constant path: a path chosen per row costs DuckDB more than the parse
    pl_cases = " ".join(
        f"WHEN {method_s} = {_lit(m)} AND t_params = 'OBJECT' "
        f"THEN json_extract({line}, {_lit(_jpath(('params',) + p))})"
        for m, p in sorted(r.payload_at.items()))
    payload = (f"CASE WHEN t_top IS DISTINCT FROM 'OBJECT' THEN NULL {pl_cases} WHEN {has_method} THEN json_extract({line}, '$.params') "
               f"WHEN t_error IS NOT NULL THEN json_extract({line}, '$.error') "
               f"ELSE json_extract({line}, '$.result') END")
    # (msg_type: the column of that name, made in the same select list)
    known_cases = " ".join(
        f"WHEN {method_s} = {_lit(m)} THEN {_in('msg_type', ts)}"
        for m, ts in sorted(r.known_types.items()))
    known_agent = (f"CASE {known_cases} ELSE {_in(method_s, r.agent_methods)} END"
                   if known_cases else _in(method_s, r.agent_methods))
    known_method = (f"CASE WHEN dir = 'c2a' THEN {_in(method_s, r.client_methods)} "
                    f"ELSE {known_agent} END")
    if r.name == "unknown":
        known_method = "false"
    kind = (f"CASE WHEN {has_method} THEN (CASE WHEN t_id IS NOT NULL THEN 'request' "
            f"ELSE 'notification' END) WHEN t_error IS NOT NULL THEN 'error' "
            f"WHEN t_result IS NOT NULL THEN 'response' END")
    ok = ("(t_top = 'OBJECT' AND t_rpc = 'VARCHAR' AND m_rpc = '2.0' "
          "AND (t_method IS NULL OR t_method IN ('VARCHAR', 'NULL')) "
          "AND (t_id IS NULL OR t_id IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'NULL')) "
          f"AND ({has_method} OR t_error IS NOT NULL OR t_result IS NOT NULL))")
    return {
        "ok": ok,
        "kind": kind,
        "method": f"CASE WHEN {has_method} THEN {method_s} END",
        "rpc_id": "CASE WHEN t_id <> 'NULL' THEN m_id END",
        "id_is_str": "coalesce(t_id = 'VARCHAR', false)",
        "msg_type": f"CASE WHEN {has_method} THEN {msg_type} END",
        # JSON null is no payload (Python's dump(None))
        "payload": f"nullif({payload}, 'null')",
        "known": f"CASE WHEN {has_method} THEN {known_method} ELSE true END",
    }
