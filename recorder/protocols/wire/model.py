"""Pydantic models of the Kimi CLI Wire protocol as kimi-cli 1.51.0 speaks it (protocol "1.10").

Field names, order, defaults and value sets mirror `kimi_cli/wire/{types,jsonrpc}.py` and kosong,
so that `dump_message` of a parsed agent frame reproduces the agent's bytes exactly.
Every model allows extra fields: a newer agent may add some, and a recorder must never reject a
frame. Values kimi itself would refuse (an unknown approval kind, a numeric client id, an unknown
event type) make `parse_message` return an `UnknownFrame` with the reason, never an exception.
The same names, without pydantic, are in `names.py` beside it (the loader's fast path); this module is
imported only by the conformance check (`conformance.py` beside it, which `wire-check` runs).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from ..base import errors_line


class WireModel(BaseModel):
    # defer_build keeps importing this module cheap: schemas are built on first use.
    model_config = ConfigDict(extra="allow", defer_build=True)


class _Tagged(WireModel):
    """A model whose tag fields (`type`, `jsonrpc`, `method`) count as set even when defaulted.

    `dump_message` uses exclude_unset so a parsed frame re-serialises to exactly the keys it had;
    without this, a model built in code would lose the tags kimi needs to dispatch on.
    """

    tag_fields: ClassVar[tuple[str, ...]] = ("type",)

    def model_post_init(self, context: Any) -> None:
        self.__pydantic_fields_set__.update(self.tag_fields)


# --- content parts (kosong.message) -------------------------------------------------------


class TextPart(_Tagged):
    type: Literal["text"] = "text"
    text: str


class ThinkPart(_Tagged):
    type: Literal["think"] = "think"
    think: str
    encrypted: str | None = None


class MediaURL(WireModel):
    url: str
    id: str | None = None


class ImageURLPart(_Tagged):
    type: Literal["image_url"] = "image_url"
    image_url: MediaURL


class AudioURLPart(_Tagged):
    type: Literal["audio_url"] = "audio_url"
    audio_url: MediaURL


class VideoURLPart(_Tagged):
    type: Literal["video_url"] = "video_url"
    video_url: MediaURL


def _type_tag(value: Any) -> str | None:
    tag = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return tag if isinstance(tag, str) else None


# kosong dispatches on `type` and fails on an unknown one; so do we (the frame is then flagged).
ContentPart = Annotated[
    Annotated[TextPart, Tag("text")] | Annotated[ThinkPart, Tag("think")] | Annotated[ImageURLPart, Tag("image_url")] | Annotated[AudioURLPart, Tag("audio_url")] | Annotated[VideoURLPart, Tag("video_url")],
    Discriminator(_type_tag),
]
UserInput = str | list[ContentPart]


# --- display blocks (kosong.tooling, kimi_cli.tools.display) ------------------------------


class BriefDisplayBlock(_Tagged):
    type: Literal["brief"] = "brief"
    text: str


class ShellDisplayBlock(_Tagged):
    type: Literal["shell"] = "shell"
    language: str
    command: str


class DiffDisplayBlock(_Tagged):
    type: Literal["diff"] = "diff"
    path: str
    old_text: str
    new_text: str
    old_start: int = 1
    new_start: int = 1
    is_summary: bool = False


class TodoDisplayItem(WireModel):
    title: str
    status: Literal["pending", "in_progress", "done"]


class TodoDisplayBlock(_Tagged):
    type: Literal["todo"] = "todo"
    items: list[TodoDisplayItem]


class BackgroundTaskDisplayBlock(_Tagged):
    type: Literal["background_task"] = "background_task"
    task_id: str
    kind: str
    status: str
    description: str


class UnknownDisplayBlock(_Tagged):
    """kimi sends blocks it has no class for as `{type, data}`.

    kosong requires `data` but first folds a client's `{type, **fields}` into it; keeping the
    client's shape (fields as extras) records the frame as sent and accepts what kimi accepts.
    """

    type: str = "unknown"
    data: Any = None


_DISPLAY_TAGS = frozenset({"brief", "shell", "diff", "todo", "background_task"})


def _display_tag(value: Any) -> str:
    # Unlike content parts, kosong accepts display blocks of any type (custom UI extensions).
    tag = _type_tag(value)
    return tag if tag in _DISPLAY_TAGS else "unknown"


DisplayBlock = Annotated[
    Annotated[BriefDisplayBlock, Tag("brief")] | Annotated[ShellDisplayBlock, Tag("shell")] | Annotated[DiffDisplayBlock, Tag("diff")] | Annotated[TodoDisplayBlock, Tag("todo")] | Annotated[BackgroundTaskDisplayBlock, Tag("background_task")] | Annotated[UnknownDisplayBlock, Tag("unknown")],
    Discriminator(_display_tag),
]


# --- tool calls and results --------------------------------------------------------------


class FunctionBody(WireModel):
    name: str
    arguments: str | None


class ToolCall(_Tagged):
    type: Literal["function"] = "function"
    id: str
    function: FunctionBody
    extras: dict[str, Any] | None = None


class ToolCallPart(WireModel):
    arguments_part: str | None = None


class ToolReturnValue(WireModel):
    is_error: bool
    output: str | list[ContentPart]
    message: str
    display: list[DisplayBlock]
    extras: dict[str, Any] | None = None


class ToolResult(WireModel):
    """Both the `ToolResult` event and the client's answer to a `ToolCallRequest`."""

    tool_call_id: str
    return_value: ToolReturnValue


# --- events (kimi_cli.wire.types) --------------------------------------------------------


class TurnBegin(WireModel):
    user_input: UserInput


class SteerInput(WireModel):
    user_input: UserInput


class TurnEnd(WireModel):
    pass


class StepBegin(WireModel):
    n: int


class StepInterrupted(WireModel):
    pass


class StepRetry(WireModel):
    n: int
    next_attempt: int
    max_attempts: int
    wait_s: float
    error_type: str
    status_code: int | None = None


class CompactionBegin(WireModel):
    pass


class CompactionEnd(WireModel):
    pass


class HookTriggered(WireModel):
    event: str
    target: str = ""
    hook_count: int = 1


class HookResolved(WireModel):
    event: str
    target: str = ""
    action: Literal["allow", "block"] = "allow"
    reason: str = ""
    duration_ms: int = 0


class MCPLoadingBegin(WireModel):
    pass


class MCPLoadingEnd(WireModel):
    pass


class MCPServerSnapshot(WireModel):
    name: str
    status: Literal["pending", "connecting", "connected", "failed", "unauthorized"]
    tools: list[str] = []


class MCPStatusSnapshot(WireModel):
    loading: bool
    connected: int
    total: int
    tools: int
    servers: list[MCPServerSnapshot] = []


class TokenUsage(WireModel):
    input_other: int
    output: int
    input_cache_read: int = 0
    input_cache_creation: int = 0


class StatusUpdate(WireModel):
    """None means "no change" (e.g. `set_plan_mode` sends only `plan_mode`)."""

    context_usage: float | None = None
    context_tokens: int | None = None
    max_context_tokens: int | None = None
    token_usage: TokenUsage | None = None
    message_id: str | None = None
    plan_mode: bool | None = None
    mcp_status: MCPStatusSnapshot | None = None


class Notification(WireModel):
    id: str
    category: str
    type: str
    source_kind: str
    source_id: str
    title: str
    body: str
    severity: str
    created_at: float
    payload: dict[str, Any] = {}


class PlanDisplay(WireModel):
    content: str
    file_path: str


class BtwBegin(WireModel):
    id: str
    question: str


class BtwEnd(WireModel):
    id: str
    response: str | None = None
    error: str | None = None


ApprovalKind = Literal["approve", "approve_for_session", "reject"]


class ApprovalResponse(WireModel):
    """Both the `ApprovalResponse` event and the client's answer to an `ApprovalRequest`."""

    request_id: str
    response: ApprovalKind
    feedback: str = ""


class SubagentEvent(WireModel):
    # Old wire.jsonl files name the parent call `task_tool_call_id`; kimi still reads them.
    parent_tool_call_id: str | None = Field(
        default=None, validation_alias=AliasChoices("parent_tool_call_id", "task_tool_call_id")
    )
    agent_id: str | None = None
    subagent_type: str | None = None
    event: EventEnvelope


# --- requests and their answers ----------------------------------------------------------


class ApprovalRequest(WireModel):
    id: str
    tool_call_id: str
    sender: str
    action: str
    description: str
    source_kind: Literal["foreground_turn", "background_agent"] | None = None
    source_id: str | None = None
    agent_id: str | None = None
    subagent_type: str | None = None
    source_description: str | None = None
    display: list[DisplayBlock] = []


class ToolCallRequest(WireModel):
    id: str
    name: str
    arguments: str | None


class QuestionOption(WireModel):
    label: str
    description: str = ""


class QuestionItem(WireModel):
    question: str
    header: str = ""
    options: list[QuestionOption]
    multi_select: bool = False
    body: str = ""
    other_label: str = ""
    other_description: str = ""


class QuestionRequest(WireModel):
    id: str
    tool_call_id: str
    questions: list[QuestionItem]


class QuestionResponse(WireModel):
    """An empty or invalid answer means "dismissed" to kimi, not an error."""

    request_id: str
    answers: dict[str, str]


class HookRequest(WireModel):
    id: str
    subscription_id: str = ""
    event: str
    target: str = ""
    input_data: dict[str, Any] = {}


class HookResponse(WireModel):
    request_id: str
    action: Literal["allow", "block"] = "allow"
    reason: str = ""


# --- client methods: params and results (kimi_cli.wire.jsonrpc, server) ------------------


class ClientInfo(WireModel):
    name: str
    version: str | None = None


class ExternalTool(WireModel):
    name: str
    description: str
    parameters: dict[str, Any]


class HookSubscription(WireModel):
    id: str
    event: str
    matcher: str = ""
    timeout: int = 30


class ClientCapabilities(WireModel):
    supports_question: bool = False
    supports_plan_mode: bool = False


class InitializeParams(WireModel):
    protocol_version: str
    client: ClientInfo | None = None
    external_tools: list[ExternalTool] | None = None
    hooks: list[HookSubscription] | None = None
    capabilities: ClientCapabilities | None = None


class PromptParams(WireModel):
    user_input: UserInput


class SteerParams(WireModel):
    user_input: UserInput


class SetPlanModeParams(WireModel):
    enabled: bool


class ServerInfo(WireModel):
    name: str
    version: str


class SlashCommandInfo(WireModel):
    name: str
    description: str
    aliases: list[str]


class RejectedTool(WireModel):
    name: str
    reason: str


class ExternalToolsResult(WireModel):
    accepted: list[str]
    rejected: list[RejectedTool]


class HooksInfo(WireModel):
    supported_events: list[str]
    configured: dict[str, int]


class ServerCapabilities(WireModel):
    supports_question: bool


class InitializeResult(WireModel):
    # `external_tools` is present only when the client sent any.
    protocol_version: str
    server: ServerInfo
    slash_commands: list[SlashCommandInfo]
    external_tools: ExternalToolsResult | None = None
    hooks: HooksInfo | None = None
    capabilities: ServerCapabilities | None = None


class PromptResult(WireModel):
    status: Literal["finished", "cancelled", "max_steps_reached"]
    steps: int | None = None  # only with max_steps_reached


class SteerResult(WireModel):
    status: Literal["steered"]


class CancelResult(WireModel):
    pass


class ReplayResult(WireModel):
    status: Literal["finished", "cancelled"]
    events: int
    requests: int


class SetPlanModeResult(WireModel):
    status: Literal["ok"]
    plan_mode: bool


# --- registries -------------------------------------------------------------------------

_EVENT_PAYLOADS: dict[str, Any] = {
    "TurnBegin": TurnBegin,
    "SteerInput": SteerInput,
    "TurnEnd": TurnEnd,
    "StepBegin": StepBegin,
    "StepInterrupted": StepInterrupted,
    "StepRetry": StepRetry,
    "HookTriggered": HookTriggered,
    "HookResolved": HookResolved,
    "CompactionBegin": CompactionBegin,
    "CompactionEnd": CompactionEnd,
    "MCPLoadingBegin": MCPLoadingBegin,
    "MCPLoadingEnd": MCPLoadingEnd,
    "StatusUpdate": StatusUpdate,
    "Notification": Notification,
    "ContentPart": ContentPart,  # the envelope names the base class; payload.type picks the part
    "ToolCall": ToolCall,
    "ToolCallPart": ToolCallPart,
    "ToolResult": ToolResult,
    "ApprovalResponse": ApprovalResponse,
    "SubagentEvent": SubagentEvent,
    "PlanDisplay": PlanDisplay,
    "BtwBegin": BtwBegin,
    "BtwEnd": BtwEnd,
}
# Wire 1.1 name, still accepted by kimi when reading; never sent by 1.51.0.
LEGACY_EVENT_NAMES: dict[str, str] = {"ApprovalRequestResolved": "ApprovalResponse"}

_REQUEST_PAYLOADS: dict[str, type[WireModel]] = {
    "ApprovalRequest": ApprovalRequest,
    "ToolCallRequest": ToolCallRequest,
    "QuestionRequest": QuestionRequest,
    "HookRequest": HookRequest,
}
_ANSWERS: dict[str, type[WireModel]] = {
    "ApprovalRequest": ApprovalResponse,
    "ToolCallRequest": ToolResult,
    "QuestionRequest": QuestionResponse,
    "HookRequest": HookResponse,
}
# cancel and replay ignore their params, so any JSON is accepted there.
_CLIENT_METHODS: dict[str, tuple[Any, type[WireModel]]] = {
    "initialize": (InitializeParams, InitializeResult),
    "prompt": (PromptParams, PromptResult),
    "steer": (SteerParams, SteerResult),
    "cancel": (Any, CancelResult),
    "replay": (Any, ReplayResult),
    "set_plan_mode": (SetPlanModeParams, SetPlanModeResult),
}

CANONICAL_EVENT_TYPE_NAMES = frozenset(_EVENT_PAYLOADS)
EVENT_TYPE_NAMES = CANONICAL_EVENT_TYPE_NAMES | frozenset(LEGACY_EVENT_NAMES)
REQUEST_TYPE_NAMES = frozenset(_REQUEST_PAYLOADS)
CLIENT_METHOD_NAMES = frozenset(_CLIENT_METHODS)


def event_payload_model(type_name: str) -> Any | None:
    """The payload type of an event (a model class; for `ContentPart` a tagged union)."""
    return _EVENT_PAYLOADS.get(LEGACY_EVENT_NAMES.get(type_name, type_name))


def request_payload_model(type_name: str) -> type[WireModel] | None:
    return _REQUEST_PAYLOADS.get(type_name)


def answer_model(request_type: str) -> type[WireModel] | None:
    """The `result` model of the client's answer to an agent request of this type."""
    return _ANSWERS.get(request_type)


def params_model(method: str) -> Any | None:
    entry = _CLIENT_METHODS.get(method)
    return entry[0] if entry else None


def result_model(method: str) -> type[WireModel] | None:
    entry = _CLIENT_METHODS.get(method)
    return entry[1] if entry else None


@cache
def _adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def validate_as(tp: Any, value: Any) -> Any:
    """Validate `value` against a type from the lookups above (class or union alike)."""
    return _adapter(tp).validate_python(value)


# --- JSON-RPC frames --------------------------------------------------------------------


class _Envelope(WireModel):
    type: str
    payload: Any
    payload_types: ClassVar[dict[str, Any]]
    what: ClassVar[str]

    @field_validator("payload", mode="before")
    @classmethod
    def _typed_payload(cls, value: Any, info: ValidationInfo) -> Any:
        name = str(info.data.get("type"))
        name = LEGACY_EVENT_NAMES.get(name, name) if cls.what == "event" else name
        target = cls.payload_types.get(name)
        if target is None:
            raise ValueError(f"unknown {cls.what} type {info.data.get('type')!r}")
        try:
            return validate_as(target, value)
        except ValidationError as e:
            raise ValueError(_summary(e)) from None


class EventEnvelope(_Envelope):
    """`{type, payload}`; `type` stays as sent (a legacy name is kept, the payload is typed)."""

    payload_types = _EVENT_PAYLOADS
    what = "event"

    @property
    def canonical_type(self) -> str:
        return LEGACY_EVENT_NAMES.get(self.type, self.type)


class RequestEnvelope(_Envelope):
    payload_types = _REQUEST_PAYLOADS
    what = "request"


class _Frame(_Tagged):
    known: ClassVar[bool] = True
    kind: ClassVar[str]
    tag_fields: ClassVar[tuple[str, ...]] = ("jsonrpc", "method")
    jsonrpc: Literal["2.0"] = "2.0"


class EventFrame(_Frame):
    kind = "notification"
    method: Literal["event"] = "event"
    params: EventEnvelope


class AgentRequestFrame(_Frame):
    """An agent→client request; kimi always sets `id == params.payload.id`."""

    kind = "request"
    method: Literal["request"] = "request"
    id: str
    params: RequestEnvelope


class ClientRequest(_Frame):
    # kimi answers a numeric id with -32600 and id null, so only strings are valid here.
    kind = "request"
    method: str
    id: str
    params: Any = None


class InitializeRequest(ClientRequest):
    method: Literal["initialize"] = "initialize"
    params: InitializeParams


class PromptRequest(ClientRequest):
    method: Literal["prompt"] = "prompt"
    params: PromptParams


class SteerRequest(ClientRequest):
    method: Literal["steer"] = "steer"
    params: SteerParams


class CancelRequest(ClientRequest):
    method: Literal["cancel"] = "cancel"


class ReplayRequest(ClientRequest):
    method: Literal["replay"] = "replay"


class SetPlanModeRequest(ClientRequest):
    method: Literal["set_plan_mode"] = "set_plan_mode"
    params: SetPlanModeParams


class SuccessResponse(_Frame):
    """`result` is typed only when `parse_message` is told what the response answers."""

    kind = "response"
    tag_fields = ("jsonrpc",)
    id: str | None
    result: Any = None


class ErrorObject(WireModel):
    code: int
    message: str
    data: Any = None


class ErrorResponse(_Frame):
    kind = "error"
    tag_fields = ("jsonrpc",)
    id: str | None
    error: ErrorObject


FrameKind = Literal["request", "notification", "response", "error", "invalid"]


class UnknownFrame(BaseModel):
    """A frame the model does not know or that kimi 1.51.0 would not accept; kept verbatim."""

    known: ClassVar[bool] = False
    kind: FrameKind
    method: str | None = None
    id: Any = None
    type: str | None = None
    reason: str
    raw: Any


ParsedMessage = (
    EventFrame | AgentRequestFrame | ClientRequest
    | SuccessResponse | ErrorResponse | UnknownFrame
)

_CLIENT_REQUESTS: dict[str, type[ClientRequest]] = {
    cls.model_fields["method"].default: cls
    for cls in (
        InitializeRequest,
        PromptRequest,
        SteerRequest,
        CancelRequest,
        ReplayRequest,
        SetPlanModeRequest,
    )
}


def _summary(e: ValidationError) -> str:
    return errors_line(e.errors(include_url=False, include_input=False))


def dump_message(msg: BaseModel) -> str:
    """Compact JSON, raw UTF-8, as kimi writes it.

    A parsed agent frame comes out byte-identical to the line it was parsed from (the models
    mirror kimi's field order); fields that were absent stay absent.
    """
    return msg.model_dump_json(exclude_unset=True)


def frame_kind(obj: Any) -> FrameKind:
    """request | notification | response | error | invalid, by JSON-RPC shape alone."""
    if not isinstance(obj, dict) or obj.get("jsonrpc") != "2.0":
        return "invalid"
    if "method" in obj:
        return "request" if obj.get("id") is not None else "notification"
    if "error" in obj:
        return "error"
    if "id" in obj or "result" in obj:
        return "response"
    return "invalid"


def parse_message(obj: Any, *, reply_to: str | None = None) -> ParsedMessage:
    """Type one decoded frame; never raises.

    `reply_to` names what a response answers — a client method (`"prompt"`) or an agent request
    type (`"ApprovalRequest"`) — so its `result` can be typed; without it `result` stays raw.
    """
    kind = frame_kind(obj)
    params = obj.get("params") if isinstance(obj, dict) else None
    # Non-string names would break the set lookups below; they are unknown by definition.
    wire_type = params.get("type") if isinstance(params, dict) else None
    wire_type = wire_type if isinstance(wire_type, str) else None
    method = obj.get("method") if isinstance(obj, dict) else None

    def unknown(reason: str) -> UnknownFrame:
        return UnknownFrame(
            kind=kind,
            method=method if isinstance(method, str) else None,
            id=obj.get("id") if isinstance(obj, dict) else None,
            type=wire_type,
            reason=reason,
            raw=obj,
        )

    if kind == "invalid":
        return unknown("not a JSON-RPC 2.0 message")
    if kind in ("request", "notification") and not isinstance(method, str):
        return unknown("method is not a string")

    model: type[_Frame] | None
    result_type: Any = None
    if kind == "notification":
        if method == "event":
            if wire_type not in EVENT_TYPE_NAMES:
                return unknown(f"unknown event type {wire_type!r}")
            model = EventFrame
        elif method in CLIENT_METHOD_NAMES:
            return unknown(f"{method!r} without id: kimi ignores it")
        else:
            return unknown(f"unknown notification method {method!r}")
    elif kind == "request":
        if method == "request":
            if wire_type not in REQUEST_TYPE_NAMES:
                return unknown(f"unknown request type {wire_type!r}")
            model = AgentRequestFrame
        else:
            model = _CLIENT_REQUESTS.get(method)  # type: ignore[arg-type]
            if model is None:
                return unknown(f"unknown method {method!r}")
    elif kind == "response":
        model = SuccessResponse
        if reply_to is not None:
            result_type = result_model(reply_to) or answer_model(reply_to)
            if result_type is None:
                return unknown(f"reply_to {reply_to!r} is neither a client method nor a request")
    else:
        model = ErrorResponse

    try:
        msg = model.model_validate(obj)
        if result_type is not None:
            msg.result = validate_as(result_type, msg.result)  # type: ignore[union-attr]
    except ValidationError as e:
        what = wire_type if kind != "response" or reply_to is None else f"answer to {reply_to}"
        return unknown(f"invalid {what or method or kind}: {_summary(e)}")
    return msg
