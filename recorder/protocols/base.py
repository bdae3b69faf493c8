"""What a protocol adapter says about its protocol. One subclass per protocol, one file each.

Everything here works on plain dicts from orjson (the loader classifies 100k+ frames/s), and
nothing imports replay or analysis: those read the adapter's declarations (ignore rules as text,
matcher names, method sets) and apply them with their own machinery.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .render import Renderer, TimelineContext


SHARED_METHODS = frozenset({"initialize"})


@dataclass(frozen=True)
class Request:
    """An agent request as replay's matchers see it: its method, the adapter's finer type and
    its normalised payload."""

    method: str | None
    msg_type: str | None
    payload: Any  # normalised

    def get(self, key: str) -> Any:
        return self.payload.get(key) if isinstance(self.payload, dict) else None


# A matcher maps a request to a JSON value; two requests match when every selected matcher gives
# equal values (replay/matchers.py). One that does not concern a request gives None.
Matcher = Callable[[Request], Any]


class Adapter:
    name = ""
    title = ""
    # what reports call the side that is not the client
    agent_role = "agent"
    # Methods (requests and notifications) each side sends. `known` and foreign-frame detection
    # are judged against these.
    client_methods: frozenset[str] = frozenset()
    agent_methods: frozenset[str] = frozenset()
    # Methods of the agent's (or MCP server's) requests that the client answers: what replay
    # re-serves and analysis lists in `requests`.
    agent_request_methods: frozenset[str] = frozenset()
    # Client requests whose response comes after everything they caused: replay cuts the agent's
    # stream at these responses and compares order-insensitively between them.
    anchor_methods: frozenset[str] = frozenset()
    # Client requests that make a turn (a user prompt): `turns` in analysis, "turn N" in reports.
    turn_methods: frozenset[str] = frozenset()
    # Whether the agent reports token usage (Wire's StatusUpdate): summaries leave the token
    # line out when no session's protocol could have any.
    reports_tokens = False
    # Agent frame types only sent inside a turn: where a protocol has no turn-begin event (ACP),
    # the first of these (or an agent request) after a turn's end starts the next turn.
    turn_types: frozenset[str] = frozenset()
    # Agent frame types that begin a new segment for comparison (Wire: TurnBegin, StepBegin).
    anchor_types: frozenset[str] = frozenset()
    # Streamed content types whose order counts inside a segment.
    ordered_types: frozenset[str] = frozenset()
    # Client frames whose effect depends on timing (cancel): replay keeps their recorded delay.
    racy_methods: frozenset[str] = frozenset()
    # Client notifications after which the agent may stop its turn at any point (ACP
    # session/cancel): its notifications from there to the turn's response may or may not come
    # (a tool call's final update races the cancel inside the agent), so replay does not count
    # one missing or extra there as a divergence.
    cut_short_by: frozenset[str] = frozenset()
    # Ignore rules `[SELECTOR:]PATH` with the reason, applied by replay before comparing.
    ignore: tuple[tuple[str, str], ...] = ()
    # Fields of an agent request's payload that its answer echoes (Wire: the request id as
    # `request_id`): replay puts the live request's values there when it re-serves an answer.
    # The JSON-RPC id itself is always the live one.
    answer_id_fields: tuple[str, ...] = ()
    # Matchers (replay.matchers names) used when the user does not choose.
    default_match_on: tuple[str, ...] = ("method", "payload")
    # Named matchers this protocol adds to replay's generic ones (`method`, `payload`):
    # name -> (function, one line of doc for `--match-on`).
    matchers: Mapping[str, tuple[Matcher, str]] = {}
    # Values that differ on every run, found in a frame's raw JSON text: (name, regex on the
    # bytes, placeholder). Replay masks them on top of its generic ones (UUIDs, clocks).
    value_patterns: tuple[tuple[str, bytes, bytes], ...] = ()
    # Options of the agent command that name a session id or a path (`--flag value` or
    # `--flag=value`): replay masks their values in both runs' frames.
    session_flags: tuple[str, ...] = ()
    path_flags: tuple[str, ...] = ()
    # Agent frame types that begin a turn (Wire TurnBegin) or a step (Wire StepBegin): replay's
    # reports say "turn 2, step 1" from them (protocols without them count turns by
    # turn_methods); with turn_methods, where the HTML report's time axis starts.
    turn_begin_types: frozenset[str] = frozenset()
    # An agent notification type the agent sends from another task than the frames around it,
    # so it lands at any point up to the next of `floating_until` (agent types) or the next
    # agent response or lifecycle row: transcripts write it just before that, so its race is no
    # diff (Wire: kimi's StatusUpdate, measured on kimi-cli 1.51.0, lands on either side of the
    # client's answer to an approval and of the ToolResult).
    floating_type: str | None = None
    floating_until: frozenset[str] = frozenset()
    step_begin_types: frozenset[str] = frozenset()
    # Agent request types (the `requests` view's `type`) the HTML report draws as approval waits.
    approval_types: frozenset[str] = frozenset()
    # JSON-RPC error codes of an agent's error response that mean its model failed (Wire: kimi's
    # -32003, the chat provider's error), with what each means: replay leads its report with
    # such a failure of the agent's own model, since everything after it differs only because of
    # it.
    model_errors: Mapping[int, str] = {}

    # -- detection -----------------------------------------------------------------------------
    def detect(self, method: str, params: Any, direction: str) -> tuple[str, str | None] | None:
        """(protocol name, version or None) when this frame shows the session speaks this
        protocol; None when it does not tell."""
        return None

    def answered_version(self, method: str, offered: str | None, result: Any) -> str | None:
        """The version the agent's answer (`result`) to the client's `method` request (which
        offered `offered`) settles: what the session negotiated, stored over the offer. None:
        this answer does not tell."""
        return None

    def session_workdir(self, method: str, params: Any) -> str | None:
        """The work dir a client's `method` request names for the session (ACP: the cwd of
        `session/new`), which replay maps to the live one; None: this request names none."""
        return None

    # -- classification ------------------------------------------------------------------------
    def msg_type(self, method: str, params: Any) -> str | None:
        """A finer type within a method (Wire: the event or request type)."""
        return None

    def payload(self, method: str, params: Any) -> Any:
        """The part of a request or notification that matching and comparison look at."""
        return params

    def known(self, direction: str, method: str, msg_type: str | None) -> bool:
        names = self.client_methods if direction == "c2a" else self.agent_methods
        return method in names

    def claims(self, method: str) -> bool:
        """True when a method belongs to this protocol (used to flag foreign frames); methods
        every protocol has (initialize) belong to none."""
        if method in SHARED_METHODS:
            return False
        return method in self.client_methods or method in self.agent_methods

    def step_number(self, payload: Any) -> int | None:
        """The number a step-begin frame gives its step; None: steps are counted."""
        return None

    # -- replay --------------------------------------------------------------------------------
    def minted(self, method: str | None, result: Any) -> list[str]:
        """Values in the agent's response to a client request (method) that the client later
        sends back (ACP sessionId, MCP requestState). Replay maps recorded to live values and
        rewrites them in the client's later frames."""
        return []

    def refers(self, method: str | None, params: Any) -> list[str]:
        """Values in a client request that an agent minted in an earlier session (ACP: the
        sessionId of session/load). Replay first re-runs the recorded session that minted them,
        against the same agent set-up, so the live agent has what the request refers to."""
        return []

    def client_effects(self, method: str | None, params: Any) -> list[tuple[str, str, str]]:
        """What the recorded client did on the machine when it answered this request, beyond the
        answer itself, and the agent may check: [("write_file", path, content)]. Replay repeats
        it (inside the replay's work dir only) before re-serving the recorded answer."""
        return []

    def reject_answer(self, method: str | None, msg_type: str | None, payload: Any,
                      rpc_id: Any) -> Any | None:
        """A `result` that declines an agent request nobody recorded (--on-unmatched reject);
        None: answer with a JSON-RPC error instead."""
        return None

    def describe(self, kind: str, method: str | None, msg_type: str | None,
                 payload: Any) -> str | None:
        """A short label for reports (replay's, and what wire-show's history lines say);
        None: the generic JSON-RPC one. By default the package's `labels.describe`."""
        labels = self.part("labels")
        return labels.describe(kind, method, msg_type, payload) if labels is not None else None

    # -- the package's parts ---------------------------------------------------------------------
    def package(self) -> str | None:
        """The package that defines the adapter's class: where its parts live."""
        import sys

        module = sys.modules[type(self).__module__]
        return module.__name__ if hasattr(module, "__path__") else module.__package__

    def part(self, name: str) -> ModuleType | None:
        """The adapter package's module `name`, imported on first use, None when the package has
        none. Parts found by name: `labels` (describe; ask and answer for wire-show), `timeline`
        (class `Timeline`), `conformance` (`checker(version)`); SQL parts are files
        (`sql_fragment`). Recording only classifies, so it loads none of them (they may import
        rich, pydantic or a peer's SDK)."""
        cache = self.__dict__.setdefault("_parts", {})
        if name not in cache:
            package = self.package()
            module = None
            if package:
                try:
                    module = importlib.import_module(f"{package}.{name}")
                except ModuleNotFoundError as e:
                    if e.name != f"{package}.{name}":
                        raise  # the part exists but something it imports does not
            cache[name] = module
        return cache[name]

    # -- analysis ------------------------------------------------------------------------------
    def timeline(self, ctx: TimelineContext) -> Renderer | None:
        """A renderer of this protocol's frames for `wire-show`'s timeline (render.py says what
        it gets and gives). The default shows plain JSON-RPC: requests, answers with their
        times, notifications. By default the package's `timeline.Timeline`, else that."""
        own = self.part("timeline")
        if own is not None:
            return own.Timeline(ctx, self)
        from .render import RpcRenderer

        return RpcRenderer(ctx, self)

    def sql_fragment(self, view: str) -> str | None:
        """This protocol's part of an analysis view (`macros`: its SQL macros): the file
        `<view>.sql` in the package that defines the adapter's class, shipped as package data;
        None when it has none. analysis/views.py says how parts make a view."""
        import importlib.resources

        package = self.package()
        if not package:
            return None
        res = importlib.resources.files(package).joinpath(f"{view}.sql")
        return res.read_text(encoding="utf-8") if res.is_file() else None

    # -- conformance ---------------------------------------------------------------------------
    def conformance(self, version: str | None) -> Conformance | None:
        """A checker of one session's frames against this protocol's model (`wire-check`), or
        None when the protocol has none. Models need pydantic or the peer's SDK, so they are
        imported with the part, never when the adapter is; a missing SDK raises a UserError
        naming the extra to install. By default the package's `conformance.checker`."""
        own = self.part("conformance")
        return own.checker(version) if own is not None else None


# What a conformance checker says about one frame: None when it conforms, else (severity,
# message) with severity "violation" (the frame breaks the model) or "unknown" (the model does
# not cover it: such frames are stored and replayed as they are, never dropped).
Verdict = tuple[str, str] | None


class Conformance(Protocol):
    def __call__(self, direction: str, obj: dict[str, Any],
                 answers: tuple[str, str | None] | None) -> Verdict:
        """Judge one JSON-RPC 2.0 message (a dict with `method`, `result` or `error`), in the
        session's order. `answers` is (method, msg_type) of the request a response or error
        answers, None when it answers none the recording holds."""
        ...


def errors_line(errors: list[Any], limit: int = 3) -> str:
    """A pydantic `ValidationError.errors()` list as one line: `loc: message; ...`."""
    parts = [f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in errors]
    more = f" (+{len(parts) - limit} more)" if len(parts) > limit else ""
    return "; ".join(parts[:limit]) + more


def get_path(obj: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj
