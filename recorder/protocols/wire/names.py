"""Names the Wire protocol (kimi-cli 1.51.0, protocol 1.10) knows, as plain sets.

Kept free of pydantic so the loader can classify frames at 100k+/s; `model.py` beside it
holds the pydantic models (wire-check's) and a test checks both agree.
"""

PROTOCOL_VERSION = "1.10"

CLIENT_METHODS = frozenset(
    {"initialize", "prompt", "steer", "cancel", "replay", "set_plan_mode"}
)
AGENT_METHODS = frozenset({"event", "request"})

EVENT_TYPES = frozenset(
    {
        "TurnBegin", "SteerInput", "TurnEnd", "StepBegin", "StepInterrupted", "StepRetry",
        "CompactionBegin", "CompactionEnd", "HookTriggered", "HookResolved",
        "MCPLoadingBegin", "MCPLoadingEnd", "StatusUpdate", "Notification", "ContentPart",
        "ToolCall", "ToolCallPart", "ToolResult", "ApprovalResponse", "SubagentEvent",
        "PlanDisplay", "BtwBegin", "BtwEnd",
        # legacy name of ApprovalResponse, still understood when reading
        "ApprovalRequestResolved",
    }
)
REQUEST_TYPES = frozenset(
    {"ApprovalRequest", "ToolCallRequest", "QuestionRequest", "HookRequest"}
)

# JSON-RPC error codes of kimi's answer to `prompt` that say its model failed, not the agent
# (wire spec: -32001 no LLM set, -32002 LLM not supported, -32003 the chat provider's error, its
# message the provider's; -32004 the provider's login expired), with what each means.
CHAT_PROVIDER_ERROR = -32003
MODEL_ERRORS = {
    -32001: "LLM not set",
    -32002: "LLM not supported",
    CHAT_PROVIDER_ERROR: "chat provider error",
    -32004: "auth expired",
}
