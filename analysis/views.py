"""The analysis views over `frames` and `sessions`, for every protocol the recorder speaks.

They read the extracted columns (`msg_type`, `rpc_id`, `kind`, `method`) to pick rows and parse
`payload` JSON only on the few rows that need it: at a million frames, filtering on extracted
columns costs milliseconds where parsing every payload costs a third of a second.

The same SQL is installed persistently into every DB the proxy writes (`install_views(con)`,
called by `recorder.store.open_store`) and as TEMP views over the union of many read-only files
(`analysis.sources`). Names inside resolve against whatever `frames` / `sessions` are visible.

One view name per meaning, whatever the protocol (column `protocol`: 'wire', 'acp', 'mcp'):
`turns` are Wire prompts and ACP `session/prompt`s (MCP has none), `tool_calls` are Wire
ToolCalls, ACP `tool_call` updates and MCP `tools/call`s, `requests` are whatever the agent (MCP:
the server) asked the client, `errors` and `anomalies` are what went wrong.

Attribution rule used everywhere: a frame belongs to the turn of the last main-agent `TurnBegin`
(ACP: `session/prompt` request) before it and to the step of the last `StepBegin` after that
`TurnBegin`. A `SubagentEvent` is unpacked (its nested type and payload) and keeps the turn and
step of its parent's frame. Durations come from `mono_ns` (monotonic clock), never from
wall-clock `ts`.

A recording's file is attached under its file stem as catalog name (`p.db` is catalog `p`), and
DuckDB reads a dotted name of three parts or more (`x.y.z`) as catalog.table.column when `x` is
a catalog. So struct fields are read with brackets (`status['token_usage']['output']`), never as
`alias.column.field`; two-part names (`alias.column`) are safe. `tests/test_analysis_protocols.py`
installs the views into files named after every qualifier used here.
"""

from __future__ import annotations

import re

import duckdb

# Bump when a view changes shape; stored in meta so a file says which view set it carries.
VIEWS_VERSION = "2"

# ACP session/update kinds that carry streamed text: left out of wr_events like Wire ContentParts.
ACP_CHUNKS = "'agent_message_chunk', 'agent_thought_chunk', 'user_message_chunk'"

# One row per JSON-RPC frame of either direction except streamed text (the bulk of a session).
# Internal, but documented: handy for ad-hoc questions ("which events happened in step 3?").
WR_EVENTS = """
CREATE OR REPLACE {temp} VIEW wr_events AS
WITH protos AS (
    SELECT session_id, any_value(protocol) AS protocol FROM sessions GROUP BY session_id
), anchor_rows AS (
    -- only TurnBegin/StepBegin rows (ACP: session/prompt requests) are windowed (a few percent
    -- of a session); every other frame finds its anchor by an ASOF join, which is much cheaper
    -- than windowing wide rows
    SELECT session_id, seq, msg_type = 'TurnBegin' AS is_turn,
        CASE WHEN msg_type = 'StepBegin' THEN seq END AS step_seq,
        CASE WHEN msg_type = 'StepBegin' THEN TRY_CAST(payload->>'n' AS INTEGER) END AS step
    FROM frames
    WHERE direction = 'a2c' AND method = 'event' AND msg_type IN ('TurnBegin', 'StepBegin')
    --<acp>
    UNION ALL
    SELECT session_id, seq, true, NULL, NULL
    FROM frames
    WHERE direction = 'c2a' AND kind = 'request' AND method = 'session/prompt'
      AND session_id IN (SELECT session_id FROM protos WHERE protocol = 'acp')
    --</acp>
), anchors AS (
    SELECT session_id, seq, step_seq, step,
        sum(CASE WHEN is_turn THEN 1 ELSE 0 END) OVER w AS turn0,
        max(CASE WHEN is_turn THEN seq END) OVER w AS turn_seq
    FROM anchor_rows
    WINDOW w AS (PARTITION BY session_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), main AS (
    SELECT frames.session_id, {protocol} AS protocol, frames.seq, frames.ts, frames.mono_ns,
        frames.direction, frames.kind, frames.method, frames.rpc_id, frames.msg_type,
        frames.payload, anchors.turn0, anchors.turn_seq, anchors.step_seq, anchors.step
    FROM frames
    ASOF LEFT JOIN anchors ON frames.session_id = anchors.session_id AND frames.seq >= anchors.seq
    --<join>
    LEFT JOIN protos ON protos.session_id = frames.session_id
    --</join>
    WHERE frames.direction IN ('a2c', 'c2a')
      AND frames.kind IN ('request', 'notification', 'response', 'error')
      AND (frames.msg_type IS NULL OR frames.msg_type NOT IN ('ContentPart', """ + ACP_CHUNKS + """))
), unpacked AS (
    SELECT session_id, protocol, seq, ts, mono_ns, direction, kind, method, rpc_id,
        nullif(turn0, 0)::INTEGER AS turn, turn_seq, step, step_seq,
        msg_type = 'SubagentEvent' AS sub,
        CASE WHEN msg_type = 'SubagentEvent' THEN payload->>'agent_id' END AS agent_id,
        CASE WHEN msg_type = 'SubagentEvent' THEN payload->>'subagent_type' END AS subagent_type,
        CASE WHEN msg_type = 'SubagentEvent' THEN payload->>'parent_tool_call_id' END
            AS parent_tool_call_id,
        CASE WHEN msg_type = 'SubagentEvent' THEN payload->'event'->>'type'
             WHEN msg_type = 'ApprovalRequestResolved' THEN 'ApprovalResponse'
             ELSE msg_type END AS type,
        CASE WHEN msg_type = 'SubagentEvent' THEN payload->'event'->'payload' ELSE payload END
            AS payload
    FROM main
)
SELECT session_id, protocol, seq, ts, mono_ns, direction, kind, method, turn, turn_seq, step,
    step_seq, agent_id, subagent_type, parent_tool_call_id, type,
    (direction = 'a2c' AND method = 'request' AND NOT coalesce(sub, false)) AS is_request,
    CASE WHEN NOT coalesce(sub, false) THEN rpc_id END AS rpc_id, payload,
    CASE WHEN type = 'StatusUpdate' THEN from_json(payload, '{
        "message_id": "VARCHAR", "context_usage": "DOUBLE", "context_tokens": "BIGINT",
        "max_context_tokens": "BIGINT",
        "token_usage": {"input_other": "BIGINT", "output": "BIGINT",
                        "input_cache_read": "BIGINT", "input_cache_creation": "BIGINT"}}') END
        AS status
FROM unpacked
"""

# ACP and MCP requests of either direction with their answers (internal). Ids count separately
# per direction there, so an answer goes with a request of the *other* direction: the latest
# one with its id before it (an id may be reused once answered), else the first one after it (a
# client answering within microseconds can be recorded before the request, because the relay
# writes to the peer first and records after). An id reused while pending (an anomaly) leaves
# a second answer that nobody took: it goes to the latest request before it still unanswered.
WR_RPC = """
CREATE OR REPLACE {temp} VIEW wr_rpc AS
WITH rpc_requests AS (
    SELECT session_id, protocol, seq, ts, mono_ns, direction, method, rpc_id, turn, payload
    FROM wr_events
    WHERE protocol IN ('acp', 'mcp') AND kind = 'request' AND rpc_id IS NOT NULL
), rpc_answers AS (
    SELECT session_id, seq, ts, mono_ns, direction, rpc_id, kind, payload
    FROM wr_events
    WHERE protocol IN ('acp', 'mcp') AND kind IN ('response', 'error') AND rpc_id IS NOT NULL
), rpc_pairs AS (
    SELECT rpc_answers.session_id, rpc_answers.seq, rpc_requests.seq AS req_seq,
        row_number() OVER (
            PARTITION BY rpc_answers.session_id, rpc_answers.seq
            ORDER BY rpc_requests.seq < rpc_answers.seq DESC,
                     CASE WHEN rpc_requests.seq < rpc_answers.seq THEN -rpc_requests.seq
                          ELSE rpc_requests.seq END) AS pick
    FROM rpc_answers JOIN rpc_requests ON rpc_answers.session_id = rpc_requests.session_id
        AND rpc_answers.rpc_id = rpc_requests.rpc_id
        AND rpc_answers.direction <> rpc_requests.direction
), rpc_first AS (
    SELECT session_id, seq, req_seq FROM rpc_pairs WHERE pick = 1
    QUALIFY row_number() OVER (PARTITION BY session_id, req_seq ORDER BY seq) = 1
), rpc_second AS (
    SELECT rpc_pairs.session_id, rpc_pairs.seq, rpc_pairs.req_seq
    FROM rpc_pairs
    ANTI JOIN rpc_first answered ON answered.session_id = rpc_pairs.session_id
        AND answered.seq = rpc_pairs.seq
    ANTI JOIN rpc_first asked ON asked.session_id = rpc_pairs.session_id
        AND asked.req_seq = rpc_pairs.req_seq
    WHERE rpc_pairs.req_seq < rpc_pairs.seq
    QUALIFY row_number() OVER (PARTITION BY rpc_pairs.session_id, rpc_pairs.seq
                               ORDER BY rpc_pairs.req_seq DESC) = 1
), rpc_matched AS (
    SELECT * FROM rpc_first
    UNION ALL
    SELECT * FROM rpc_second
    QUALIFY row_number() OVER (PARTITION BY session_id, req_seq ORDER BY seq) = 1
)
SELECT rpc_requests.session_id, rpc_requests.protocol, rpc_requests.seq, rpc_requests.ts,
    rpc_requests.mono_ns, rpc_requests.direction, rpc_requests.method, rpc_requests.rpc_id,
    rpc_requests.turn, rpc_requests.payload,
    rpc_answers.seq AS answer_seq, rpc_answers.ts AS answered_at,
    rpc_answers.mono_ns AS answer_mono, rpc_answers.kind AS answer_kind,
    rpc_answers.payload AS answer
FROM rpc_requests
LEFT JOIN rpc_matched ON rpc_matched.session_id = rpc_requests.session_id
    AND rpc_matched.req_seq = rpc_requests.seq
LEFT JOIN rpc_answers ON rpc_answers.session_id = rpc_matched.session_id
    AND rpc_answers.seq = rpc_matched.seq
"""

# MCP 2026-07-28 rounds (internal): a tools/call (prompts/get, resources/read) answered with
# resultType "input_required" is retried by the client with a new id, the server's
# requestState and its inputResponses. One row per request, with the first request of its
# logical call (root), its round (0 = first request) and the retry that answered it (next).
WR_ROUNDS = """
CREATE OR REPLACE {temp} VIEW wr_rounds AS
WITH RECURSIVE mcp_calls AS MATERIALIZED (
    SELECT session_id, seq, ts, mono_ns, method, rpc_id, turn, payload,
        answer_seq, answered_at, answer_mono, answer_kind, answer,
        coalesce(payload->>'name', payload->>'uri') AS target,
        payload->>'requestState' AS state_in,
        (payload->'inputResponses') IS NOT NULL AS has_responses,
        CASE WHEN answer_kind = 'response' THEN coalesce(answer->>'resultType', 'complete') END
            AS result_type,
        answer->>'requestState' AS state_out
    FROM wr_rpc
    WHERE protocol = 'mcp' AND direction = 'c2a'
      AND method IN ('tools/call', 'prompts/get', 'resources/read')
), mcp_linked AS MATERIALIZED (
    -- a retry carries the requestState of the input_required result it answers (or, when the
    -- server sent none, answers the latest one for the same tool)
    SELECT mcp_calls.*, earlier.seq AS parent_seq
    FROM mcp_calls LEFT JOIN mcp_calls earlier ON earlier.session_id = mcp_calls.session_id
        AND earlier.method = mcp_calls.method AND earlier.seq < mcp_calls.seq
        AND earlier.result_type = 'input_required'
        AND (earlier.state_out = mcp_calls.state_in
             OR (earlier.state_out IS NULL AND mcp_calls.state_in IS NULL
                 AND mcp_calls.has_responses
                 AND earlier.target IS NOT DISTINCT FROM mcp_calls.target))
    QUALIFY row_number() OVER (PARTITION BY mcp_calls.session_id, mcp_calls.seq
                               ORDER BY earlier.seq DESC NULLS LAST) = 1
), mcp_chain AS (
    SELECT session_id, seq, seq AS root_seq, 0 AS round FROM mcp_linked WHERE parent_seq IS NULL
    UNION ALL
    SELECT mcp_linked.session_id, mcp_linked.seq, mcp_chain.root_seq, mcp_chain.round + 1
    FROM mcp_linked JOIN mcp_chain ON mcp_linked.session_id = mcp_chain.session_id
        AND mcp_linked.parent_seq = mcp_chain.seq
), mcp_next AS (
    SELECT session_id, parent_seq, min(seq) AS next_seq
    FROM mcp_linked WHERE parent_seq IS NOT NULL GROUP BY ALL
)
SELECT mcp_linked.*, mcp_chain.root_seq, mcp_chain.round, mcp_root.rpc_id AS root_id,
    retry.seq AS next_seq, retry.ts AS next_ts, retry.mono_ns AS next_mono,
    retry.payload AS next_payload
FROM mcp_linked
JOIN mcp_chain ON mcp_chain.session_id = mcp_linked.session_id AND mcp_chain.seq = mcp_linked.seq
JOIN mcp_linked mcp_root ON mcp_root.session_id = mcp_chain.session_id
    AND mcp_root.seq = mcp_chain.root_seq
LEFT JOIN mcp_next ON mcp_next.session_id = mcp_linked.session_id
    AND mcp_next.parent_seq = mcp_linked.seq
LEFT JOIN mcp_linked retry ON retry.session_id = mcp_next.session_id
    AND retry.seq = mcp_next.next_seq
"""

TOKEN_USAGE = """
CREATE OR REPLACE {temp} VIEW token_usage AS
SELECT session_id, 'wire' AS protocol, seq, ts, turn, step, agent_id, subagent_type,
    parent_tool_call_id,
    status['message_id'] AS message_id,
    coalesce(status['token_usage']['input_other'], 0) AS input_other,
    coalesce(status['token_usage']['output'], 0) AS output,
    coalesce(status['token_usage']['input_cache_read'], 0) AS input_cache_read,
    coalesce(status['token_usage']['input_cache_creation'], 0) AS input_cache_creation,
    coalesce(status['token_usage']['input_other'], 0) + coalesce(status['token_usage']['output'], 0)
        + coalesce(status['token_usage']['input_cache_read'], 0)
        + coalesce(status['token_usage']['input_cache_creation'], 0) AS total,
    status['context_tokens'] AS context_tokens,
    status['max_context_tokens'] AS max_context_tokens,
    status['context_usage'] AS context_usage
FROM wr_events
WHERE type = 'StatusUpdate' AND direction = 'a2c' AND status['token_usage'] IS NOT NULL
"""

# Per-step and per-turn sums need the token columns of every StatusUpdate (main and subagent)
# next to the other events, so both views aggregate one materialised pass over wr_events.
STEPS = """
CREATE OR REPLACE {temp} VIEW steps AS
WITH step_events AS {materialized} (
    SELECT session_id, seq, ts, mono_ns, turn, turn_seq, step, step_seq, agent_id, type,
        coalesce(status['token_usage']['input_other'], 0) AS i_other,
        coalesce(status['token_usage']['output'], 0) AS o,
        coalesce(status['token_usage']['input_cache_read'], 0) AS i_read,
        coalesce(status['token_usage']['input_cache_creation'], 0) AS i_create,
        status['token_usage'] IS NOT NULL AS has_usage,
        status['message_id'] AS message_id, status['context_tokens'] AS context_tokens,
        status['context_usage'] AS context_usage
    FROM wr_events WHERE step_seq IS NOT NULL
), step_agg AS (
    SELECT session_id, step_seq,
        any_value(turn) AS turn, any_value(turn_seq) AS turn_seq, any_value(step) AS step,
        min(ts) FILTER (WHERE seq = step_seq) AS started_at,
        min(mono_ns) FILTER (WHERE seq = step_seq) AS start_mono,
        min(ts) FILTER (WHERE type = 'TurnEnd' AND agent_id IS NULL) AS turn_end_ts,
        min(mono_ns) FILTER (WHERE type = 'TurnEnd' AND agent_id IS NULL) AS turn_end_mono,
        max(ts) AS last_ts, max(mono_ns) AS last_mono,
        sum(i_other) FILTER (WHERE agent_id IS NULL)::BIGINT AS input_other,
        sum(o) FILTER (WHERE agent_id IS NULL)::BIGINT AS output,
        sum(i_read) FILTER (WHERE agent_id IS NULL)::BIGINT AS input_cache_read,
        sum(i_create) FILTER (WHERE agent_id IS NULL)::BIGINT AS input_cache_creation,
        sum(i_other + o + i_read + i_create) FILTER (WHERE agent_id IS NOT NULL)::BIGINT AS subagent_tokens,
        arg_min(message_id, seq) FILTER (WHERE has_usage AND agent_id IS NULL) AS message_id,
        arg_max(context_tokens, seq) FILTER (WHERE has_usage AND agent_id IS NULL) AS context_tokens,
        arg_max(context_usage, seq) FILTER (WHERE has_usage AND agent_id IS NULL) AS context_usage,
        count(*) FILTER (WHERE has_usage AND agent_id IS NULL) AS status_updates,
        count(*) FILTER (WHERE type = 'ToolCall' AND agent_id IS NULL) AS tool_calls,
        count(*) FILTER (WHERE type = 'ToolCall' AND agent_id IS NOT NULL) AS subagent_tool_calls,
        count(*) FILTER (WHERE type = 'StepInterrupted' AND agent_id IS NULL) AS interruptions,
        count(*) FILTER (WHERE type = 'StepRetry' AND agent_id IS NULL) AS retries
    FROM step_events GROUP BY session_id, step_seq
), step_bounds AS (
    SELECT *,
        lead(start_mono) OVER (PARTITION BY session_id, turn_seq ORDER BY step_seq) AS next_mono,
        lead(started_at) OVER (PARTITION BY session_id, turn_seq ORDER BY step_seq) AS next_ts
    FROM step_agg
)
SELECT session_id, 'wire' AS protocol, turn, step, started_at,
    coalesce(turn_end_ts, next_ts, last_ts) AS ended_at,
    (coalesce(turn_end_mono, next_mono, last_mono) - start_mono) / 1e6 AS duration_ms,
    coalesce(input_other, 0) AS input_other, coalesce(output, 0) AS output,
    coalesce(input_cache_read, 0) AS input_cache_read,
    coalesce(input_cache_creation, 0) AS input_cache_creation,
    coalesce(input_other, 0) + coalesce(output, 0) + coalesce(input_cache_read, 0)
        + coalesce(input_cache_creation, 0) AS total_tokens,
    coalesce(subagent_tokens, 0) AS subagent_tokens,
    context_tokens, context_usage, message_id, status_updates, tool_calls, subagent_tool_calls,
    interruptions > 0 AS interrupted, retries, retries > 0 AS retried,
    step_seq AS seq
FROM step_bounds
"""

TURN_COLUMNS = """session_id, protocol, turn, prompt_id, user_input, started_at, ended_at,
    duration_ms, prompt_at, responded_at, response_ms, status, status_source, stop_reason,
    error_code, error_message, steps, tool_calls, subagent_tool_calls, approvals, retries,
    steers, input_other, output, input_cache_read, input_cache_creation, total_tokens,
    subagent_tokens, seq"""

TURNS = """
CREATE OR REPLACE {temp} VIEW turns AS
WITH turn_events AS {materialized} (
    SELECT session_id, seq, ts, mono_ns, turn, turn_seq, step_seq, agent_id, type,
        CASE WHEN type = 'TurnBegin' AND agent_id IS NULL THEN payload->'user_input' END AS ui,
        coalesce(status['token_usage']['input_other'], 0) AS i_other,
        coalesce(status['token_usage']['output'], 0) AS o,
        coalesce(status['token_usage']['input_cache_read'], 0) AS i_read,
        coalesce(status['token_usage']['input_cache_creation'], 0) AS i_create
    FROM wr_events
    WHERE turn_seq IS NOT NULL AND direction = 'a2c' AND protocol IS DISTINCT FROM 'acp'
), turn_agg AS (
    SELECT session_id, turn_seq, any_value(turn) AS turn,
        min(ts) FILTER (WHERE seq = turn_seq) AS started_at,
        min(mono_ns) FILTER (WHERE seq = turn_seq) AS start_mono,
        any_value(ui) FILTER (WHERE seq = turn_seq) AS ui,
        min(seq) FILTER (WHERE type = 'TurnEnd' AND agent_id IS NULL) AS end_seq,
        min(ts) FILTER (WHERE type = 'TurnEnd' AND agent_id IS NULL) AS end_ts,
        min(mono_ns) FILTER (WHERE type = 'TurnEnd' AND agent_id IS NULL) AS end_mono,
        count(*) FILTER (WHERE type = 'StepBegin' AND agent_id IS NULL) AS steps,
        max(seq) FILTER (WHERE type = 'StepBegin' AND agent_id IS NULL) AS last_step_seq,
        max(seq) FILTER (WHERE type = 'StepInterrupted' AND agent_id IS NULL) AS last_interrupt_seq,
        count(*) FILTER (WHERE type = 'ToolCall' AND agent_id IS NULL) AS tool_calls,
        count(*) FILTER (WHERE type = 'ToolResult' AND agent_id IS NULL) AS tool_results,
        count(*) FILTER (WHERE type = 'ToolCall' AND agent_id IS NOT NULL) AS subagent_tool_calls,
        count(*) FILTER (WHERE type = 'ApprovalRequest') AS approvals,
        count(*) FILTER (WHERE type = 'StepRetry' AND agent_id IS NULL) AS retries,
        count(*) FILTER (WHERE type = 'SteerInput' AND agent_id IS NULL) AS steers,
        sum(i_other)::BIGINT AS input_other, sum(o)::BIGINT AS output, sum(i_read)::BIGINT AS input_cache_read,
        sum(i_create)::BIGINT AS input_cache_creation,
        sum(i_other + o + i_read + i_create) FILTER (WHERE agent_id IS NOT NULL)::BIGINT AS subagent_tokens
    FROM turn_events GROUP BY session_id, turn_seq
), prompts AS (
    SELECT session_id, seq, ts, mono_ns, rpc_id FROM wr_events
    WHERE direction = 'c2a' AND kind = 'request' AND method = 'prompt'
), prompt_answers AS (
    SELECT session_id, seq, ts, mono_ns, rpc_id, kind, payload FROM wr_events
    WHERE direction = 'a2c' AND kind IN ('response', 'error') AND rpc_id IS NOT NULL
), turn_prompt AS (
    -- the prompt that started a turn: the last one sent before its TurnBegin (unless an
    -- earlier turn already claimed it, e.g. turns re-emitted by `replay`)
    SELECT turn_agg.session_id, turn_agg.turn_seq, prompts.rpc_id AS prompt_id,
        prompts.seq AS prompt_seq, prompts.ts AS prompt_ts, prompts.mono_ns AS prompt_mono
    FROM turn_agg ASOF LEFT JOIN prompts ON turn_agg.session_id = prompts.session_id
        AND turn_agg.turn_seq > prompts.seq
    QUALIFY prompts.seq IS NULL
        OR row_number() OVER (PARTITION BY turn_agg.session_id, prompts.seq ORDER BY turn_agg.turn_seq) = 1
), turn_response AS (
    SELECT turn_prompt.session_id, turn_prompt.turn_seq, prompt_answers.seq AS resp_seq,
        prompt_answers.ts AS resp_ts, prompt_answers.mono_ns AS resp_mono,
        prompt_answers.kind AS resp_kind, prompt_answers.payload AS resp
    FROM turn_prompt JOIN prompt_answers ON prompt_answers.session_id = turn_prompt.session_id
        AND prompt_answers.rpc_id = turn_prompt.prompt_id
        AND prompt_answers.seq > turn_prompt.prompt_seq
    QUALIFY row_number() OVER (PARTITION BY turn_prompt.session_id, turn_prompt.turn_seq
                               ORDER BY prompt_answers.seq) = 1
), wire_turns AS (
    SELECT turn_agg.session_id, 'wire' AS protocol, turn_agg.turn, turn_prompt.prompt_id,
        CASE WHEN json_type(turn_agg.ui) = 'VARCHAR' THEN turn_agg.ui->>'$'
             ELSE turn_agg.ui::VARCHAR END AS user_input,
        turn_agg.started_at, turn_agg.end_ts AS ended_at,
        (turn_agg.end_mono - turn_agg.start_mono) / 1e6 AS duration_ms,
        turn_prompt.prompt_ts AS prompt_at, turn_response.resp_ts AS responded_at,
        (turn_response.resp_mono - turn_prompt.prompt_mono) / 1e6 AS response_ms,
        CASE WHEN turn_response.resp_kind = 'response' THEN coalesce(turn_response.resp->>'status', 'finished')
             WHEN turn_response.resp_kind = 'error' THEN 'error'
             WHEN turn_agg.end_seq IS NULL THEN 'incomplete'
             WHEN turn_agg.last_interrupt_seq > turn_agg.last_step_seq THEN 'error'
             WHEN turn_agg.tool_calls > turn_agg.tool_results THEN 'cancelled'
             ELSE 'finished' END AS status,
        CASE WHEN turn_response.resp_kind IS NOT NULL THEN 'response'
             WHEN turn_agg.end_seq IS NULL THEN 'no TurnEnd' ELSE 'inferred' END AS status_source,
        NULL::VARCHAR AS stop_reason,
        TRY_CAST(CASE WHEN turn_response.resp_kind = 'error' THEN turn_response.resp->>'code' END AS INTEGER)
            AS error_code,
        CASE WHEN turn_response.resp_kind = 'error' THEN turn_response.resp->>'message' END
            AS error_message,
        turn_agg.steps, turn_agg.tool_calls, turn_agg.subagent_tool_calls, turn_agg.approvals,
        turn_agg.retries, turn_agg.steers,
        turn_agg.input_other, turn_agg.output, turn_agg.input_cache_read,
        turn_agg.input_cache_creation,
        turn_agg.input_other + turn_agg.output + turn_agg.input_cache_read
            + turn_agg.input_cache_creation AS total_tokens,
        coalesce(turn_agg.subagent_tokens, 0) AS subagent_tokens,
        turn_agg.turn_seq AS seq
    FROM turn_agg
    LEFT JOIN turn_prompt ON turn_prompt.session_id = turn_agg.session_id
        AND turn_prompt.turn_seq = turn_agg.turn_seq
    LEFT JOIN turn_response ON turn_response.session_id = turn_agg.session_id
        AND turn_response.turn_seq = turn_agg.turn_seq
)--<acp>
, acp_prompts AS (
    SELECT *, json_extract_string(payload, '$.prompt[*].type') AS block_types
    FROM wr_rpc WHERE protocol = 'acp' AND direction = 'c2a' AND method = 'session/prompt'
), acp_counts AS (
    SELECT session_id, turn_seq,
        count(*) FILTER (WHERE method = 'session/update' AND type = 'tool_call') AS tool_calls,
        count(*) FILTER (WHERE method = 'session/request_permission' AND kind = 'request')
            AS approvals
    FROM wr_events
    WHERE protocol = 'acp' AND direction = 'a2c' AND turn_seq IS NOT NULL
    GROUP BY ALL
), acp_turns AS (
    -- ACP: a turn is a session/prompt request, until its response (stopReason)
    SELECT acp_prompts.session_id, 'acp' AS protocol, acp_prompts.turn,
        acp_prompts.rpc_id AS prompt_id,
        CASE WHEN len(list_filter(block_types, lambda t: t = 'text')) = len(block_types)
             THEN array_to_string(json_extract_string(acp_prompts.payload, '$.prompt[*].text'), chr(10))
             ELSE (acp_prompts.payload->'prompt')::VARCHAR END AS user_input,
        acp_prompts.ts AS started_at, acp_prompts.answered_at AS ended_at,
        greatest(acp_prompts.answer_mono - acp_prompts.mono_ns, 0) / 1e6 AS duration_ms,
        acp_prompts.ts AS prompt_at, acp_prompts.answered_at AS responded_at,
        greatest(acp_prompts.answer_mono - acp_prompts.mono_ns, 0) / 1e6 AS response_ms,
        CASE WHEN acp_prompts.answer_kind = 'error' THEN 'error'
             WHEN acp_prompts.answer_kind IS NULL THEN 'incomplete'
             ELSE CASE coalesce(acp_prompts.answer->>'stopReason', 'end_turn')
                  WHEN 'end_turn' THEN 'finished'
                  WHEN 'max_turn_requests' THEN 'max_steps_reached'
                  ELSE acp_prompts.answer->>'stopReason' END
        END AS status,
        CASE WHEN acp_prompts.answer_kind IS NULL THEN 'no response' ELSE 'response' END
            AS status_source,
        CASE WHEN acp_prompts.answer_kind = 'response' THEN acp_prompts.answer->>'stopReason' END
            AS stop_reason,
        TRY_CAST(CASE WHEN acp_prompts.answer_kind = 'error' THEN acp_prompts.answer->>'code' END
                 AS INTEGER) AS error_code,
        CASE WHEN acp_prompts.answer_kind = 'error' THEN acp_prompts.answer->>'message' END
            AS error_message,
        coalesce(acp_counts.tool_calls, 0) AS tool_calls,
        coalesce(acp_counts.approvals, 0) AS approvals,
        acp_prompts.seq
    FROM acp_prompts
    LEFT JOIN acp_counts ON acp_counts.session_id = acp_prompts.session_id
        AND acp_counts.turn_seq = acp_prompts.seq
)--</acp>
SELECT """ + TURN_COLUMNS + """
FROM (SELECT * FROM wire_turns
      --<acp>
      UNION ALL BY NAME SELECT * FROM acp_turns
      --</acp>
)
"""


def _subject(method: str, params: str) -> str:
    """What an ACP/MCP request to the client is about, as SQL."""
    return f"""CASE
            WHEN {method} = 'session/request_permission' THEN {params}->'toolCall'->>'title'
            WHEN {method} IN ('fs/read_text_file', 'fs/write_text_file') THEN {params}->>'path'
            WHEN {method} = 'terminal/create' THEN concat_ws(' ', {params}->>'command',
                nullif(array_to_string(json_extract_string({params}, '$.args[*]'), ' '), ''))
            WHEN {method} LIKE 'terminal/%' THEN {params}->>'terminalId'
            WHEN {method} = 'sampling/createMessage'
                THEN json_extract_string({params}, '$.messages[#-1].content.text')
            WHEN {method} = 'elicitation/create' THEN {params}->>'message'
        END"""


def _outcome(method: str, kind: str, answer: str) -> str:
    """The client's answer in one word, as SQL: the chosen option of a permission, the action
    of an elicitation, 'answered', 'error' or 'unanswered'."""
    return f"""CASE
            WHEN {kind} = 'error' THEN 'error'
            WHEN {kind} IS NULL THEN 'unanswered'
            WHEN {method} = 'session/request_permission' THEN
                CASE WHEN ({answer}->'outcome'->>'outcome') = 'selected'
                     THEN coalesce({answer}->'outcome'->>'optionId', 'selected')
                     ELSE coalesce({answer}->'outcome'->>'outcome', 'invalid') END
            WHEN {method} = 'elicitation/create' THEN coalesce({answer}->>'action', 'invalid')
            ELSE 'answered'
        END"""


# ACP has no tool names: kimi's titles are "Shell: echo hi", other agents' often "`ls`" with a
# kind ("execute"). The leading "Name:" of the title, else the kind, else the title.
def _acp_tool_name(title: str, kind: str) -> str:
    return (f"coalesce(nullif(regexp_extract({title}, '^([^:\\s]+): ', 1), ''), {kind}, {title})")


REQUEST_COLUMNS = """session_id, protocol, turn, step, request_id, type, via, tool_call_id,
    agent_id, subject, tool_name, requested_at, answered_at, wait_ms, answer_kind, answer,
    outcome, resolved_by, agent_response, agent_resolved_at, agent_resolved_ms, seq"""

REQUESTS = """
CREATE OR REPLACE {temp} VIEW requests AS
WITH wire_rq AS (
    SELECT session_id, seq, ts, mono_ns, turn, step, rpc_id AS request_id, type, payload
    FROM wr_events WHERE is_request
), wire_ans AS (
    SELECT session_id, seq, ts, mono_ns, rpc_id, kind, payload FROM wr_events
    WHERE direction = 'c2a' AND kind IN ('response', 'error') AND rpc_id IS NOT NULL
), wire_pairs AS (
    -- An answer belongs to the latest request with its id before it (`replay` re-sends requests
    -- with their original ids). A client that answers within microseconds can have its answer
    -- recorded before the request (the relay writes to the client first, then records), so
    -- an answer with no earlier request takes the first one after it.
    SELECT wire_ans.*, wire_rq.seq AS req_seq,
        row_number() OVER (PARTITION BY wire_ans.session_id, wire_ans.seq
                           ORDER BY wire_rq.seq < wire_ans.seq DESC,
                                    CASE WHEN wire_rq.seq < wire_ans.seq THEN -wire_rq.seq
                                         ELSE wire_rq.seq END) AS pick
    FROM wire_ans JOIN wire_rq ON wire_ans.session_id = wire_rq.session_id
        AND wire_ans.rpc_id = wire_rq.request_id
), wire_matched AS (
    SELECT * FROM wire_pairs WHERE pick = 1
    QUALIFY row_number() OVER (PARTITION BY session_id, req_seq ORDER BY seq) = 1
), wire_resolved AS (
    SELECT session_id, payload->>'request_id' AS request_id, min(seq) AS seq,
        arg_min(ts, seq) AS ts, arg_min(mono_ns, seq) AS mono_ns,
        arg_min(payload->>'response', seq) AS response
    FROM wr_events
    WHERE direction = 'a2c' AND type = 'ApprovalResponse' AND agent_id IS NULL
    GROUP BY ALL
), session_source AS (
    SELECT session_id, source FROM sessions
), wire_requests AS (
    SELECT wire_rq.session_id, 'wire' AS protocol, wire_rq.turn, wire_rq.step,
        wire_rq.request_id, wire_rq.type, 'request' AS via,
        CASE wire_rq.type WHEN 'ToolCallRequest' THEN wire_rq.request_id
            ELSE coalesce(wire_rq.payload->>'tool_call_id',
                          wire_rq.payload->'input_data'->>'tool_call_id')
        END AS tool_call_id,
        wire_rq.payload->>'agent_id' AS agent_id,
        CASE wire_rq.type
            WHEN 'ApprovalRequest' THEN wire_rq.payload->>'description'
            WHEN 'ToolCallRequest' THEN wire_rq.payload->>'name'
            WHEN 'QuestionRequest' THEN wire_rq.payload->'questions'->0->>'question'
            WHEN 'HookRequest' THEN concat_ws(' ', wire_rq.payload->>'event', wire_rq.payload->>'target')
        END AS subject,
        CASE wire_rq.type WHEN 'ApprovalRequest' THEN wire_rq.payload->>'sender'
            WHEN 'ToolCallRequest' THEN wire_rq.payload->>'name' END AS tool_name,
        wire_rq.ts AS requested_at, wire_matched.ts AS answered_at,
        CASE WHEN wire_matched.mono_ns IS NOT NULL
             THEN greatest(wire_matched.mono_ns - wire_rq.mono_ns, 0) / 1e6 END AS wait_ms,
        wire_matched.kind AS answer_kind, wire_matched.payload AS answer,
        CASE
            WHEN wire_matched.kind = 'error' THEN 'error'
            WHEN wire_matched.kind IS NULL AND wire_resolved.response IS NOT NULL THEN wire_resolved.response
            WHEN wire_matched.kind IS NULL AND session_source.source = 'kimi-wire-jsonl' THEN 'unknown'
            WHEN wire_matched.kind IS NULL THEN 'unanswered'
            WHEN wire_rq.type = 'ApprovalRequest' THEN coalesce(wire_matched.payload->>'response', 'invalid')
            WHEN wire_rq.type = 'QuestionRequest' THEN
                CASE WHEN coalesce(json_array_length(json_keys(wire_matched.payload->'answers')), 0) = 0
                     THEN 'dismissed' ELSE 'answered' END
            WHEN wire_rq.type = 'ToolCallRequest' THEN
                CASE WHEN (wire_matched.payload->'return_value'->>'is_error')::BOOLEAN THEN 'tool_error'
                     WHEN (wire_matched.payload->'return_value') IS NULL THEN 'invalid' ELSE 'ok' END
            WHEN wire_rq.type = 'HookRequest' THEN coalesce(wire_matched.payload->>'action', 'allow')
            ELSE 'answered'
        END AS outcome,
        CASE WHEN wire_matched.kind IS NOT NULL THEN 'client'
             WHEN wire_resolved.response IS NOT NULL THEN 'agent' END AS resolved_by,
        wire_resolved.response AS agent_response, wire_resolved.ts AS agent_resolved_at,
        (wire_resolved.mono_ns - wire_rq.mono_ns) / 1e6 AS agent_resolved_ms,
        wire_rq.seq
    FROM wire_rq
    LEFT JOIN wire_matched ON wire_matched.session_id = wire_rq.session_id
        AND wire_matched.req_seq = wire_rq.seq
    LEFT JOIN wire_resolved ON wire_rq.type = 'ApprovalRequest'
        AND wire_resolved.session_id = wire_rq.session_id
        AND wire_resolved.request_id = wire_rq.request_id AND wire_resolved.seq > wire_rq.seq
    LEFT JOIN session_source ON session_source.session_id = wire_rq.session_id
)--<rpc>
, rpc_requests AS (
    -- ACP: session/request_permission, fs/*, terminal/*, ...; MCP: sampling/createMessage,
    -- roots/list, elicitation/create, ping: every request of the agent (server) to the client
    SELECT session_id, protocol, turn, rpc_id AS request_id, method AS type, 'request' AS via,
        CASE WHEN method = 'session/request_permission'
             THEN payload->'toolCall'->>'toolCallId' END AS tool_call_id,
        """ + _subject("method", "payload") + """ AS subject,
        CASE WHEN method = 'session/request_permission' THEN """ + _acp_tool_name(
            "(payload->'toolCall'->>'title')", "(payload->'toolCall'->>'kind')") + """ END
            AS tool_name,
        ts AS requested_at, answered_at,
        CASE WHEN answer_mono IS NOT NULL THEN greatest(answer_mono - mono_ns, 0) / 1e6 END
            AS wait_ms,
        answer_kind, answer,
        """ + _outcome("method", "answer_kind", "answer") + """ AS outcome,
        CASE WHEN answer_kind IS NOT NULL THEN 'client' END AS resolved_by,
        seq
    FROM wr_rpc WHERE direction = 'a2c'
)--</rpc>
--<mcp>
, input_entries AS (
    SELECT session_id, turn, answer_seq, answered_at, answer_mono, root_id, method, target,
        next_ts, next_mono, next_payload,
        unnest(map_entries(CAST(answer->'inputRequests' AS MAP(VARCHAR, JSON)))) AS entry
    FROM wr_rounds WHERE result_type = 'input_required'
), input_requests AS (
    -- MCP 2026-07-28: the inputRequests of an input_required result are the server's requests,
    -- answered by the inputResponses of the client's retry
    SELECT session_id, 'mcp' AS protocol, turn, entry['key'] AS request_id,
        entry['value']->>'method' AS type, 'input_required' AS via,
        CASE WHEN method = 'tools/call' THEN root_id END AS tool_call_id,
        """ + _subject("(entry['value']->>'method')", "(entry['value']->'params')") + """ AS subject,
        CASE WHEN method = 'tools/call' THEN target END AS tool_name,
        answered_at AS requested_at, next_ts AS answered_at,
        CASE WHEN next_mono IS NOT NULL THEN greatest(next_mono - answer_mono, 0) / 1e6 END
            AS wait_ms,
        answer_kind, answer,
        """ + _outcome("type", "answer_kind", "answer") + """ AS outcome,
        CASE WHEN answer_kind IS NOT NULL THEN 'client' END AS resolved_by,
        answer_seq AS seq
    FROM (SELECT *,
            CAST(next_payload->'inputResponses' AS MAP(VARCHAR, JSON))[entry['key']] AS answer,
            CASE WHEN CAST(next_payload->'inputResponses' AS MAP(VARCHAR, JSON))[entry['key']]
                      IS NOT NULL THEN 'response' END AS answer_kind,
            entry['value']->>'method' AS type
          FROM input_entries)
)--</mcp>
SELECT """ + REQUEST_COLUMNS + """
FROM (SELECT * FROM wire_requests
      --<rpc>
      UNION ALL BY NAME SELECT * FROM rpc_requests
      --</rpc>
      --<mcp>
      UNION ALL BY NAME SELECT * FROM input_requests
      --</mcp>
)
"""

TOOL_CALL_COLUMNS = """session_id, protocol, turn, step, tool_call_id, tool_name, arguments,
    started_at, finished_at, duration_ms, status, is_error, output_chars, message, title, kind,
    updates, approval_requested, approval, approval_resolved_by, approval_feedback,
    approval_wait_ms, external, external_outcome, external_wait_ms, input_rounds, input_wait_ms,
    agent_id, subagent_type, parent_tool_call_id, subagent_events, subagent_tool_calls,
    subagent_tokens, history, seq"""

TOOL_CALLS = """
CREATE OR REPLACE {temp} VIEW tool_calls AS
WITH tool_events AS {materialized} (
    SELECT session_id, seq, ts, mono_ns, turn, step, agent_id, subagent_type, parent_tool_call_id,
        type, payload, status, coalesce(agent_id, '') AS scope
    FROM wr_events
    WHERE direction = 'a2c' AND (type IN ('ToolCall', 'ToolResult', 'ToolCallPart')
                                 OR agent_id IS NOT NULL)
), wire_calls AS (
    SELECT session_id, seq, ts, mono_ns, turn, step, agent_id, subagent_type, parent_tool_call_id,
        call['id'] AS tool_call_id, call['function']['name'] AS tool_name,
        call['function']['arguments'] AS args0, scope
    FROM (SELECT *, from_json(payload, '{"id": "VARCHAR",
                    "function": {"name": "VARCHAR", "arguments": "VARCHAR"}}') AS call
          FROM tool_events WHERE type = 'ToolCall')
), wire_parts AS (
    -- streamed arguments: each ToolCallPart continues the ToolCall before it (same agent)
    SELECT part_rows.session_id, part_rows.scope, owner.seq AS owner_seq,
        string_agg(part_rows.part, '' ORDER BY part_rows.seq) AS more
    FROM (SELECT session_id, scope, seq, payload->>'arguments_part' AS part
          FROM tool_events WHERE type = 'ToolCallPart') part_rows
    ASOF JOIN (SELECT session_id, scope, seq FROM tool_events WHERE type = 'ToolCall') owner
        ON part_rows.session_id = owner.session_id AND part_rows.scope = owner.scope
        AND part_rows.seq > owner.seq
    GROUP BY ALL
), wire_results AS (
    -- one parse per result: outputs can be large. A non-string output (content parts) is
    -- measured as its JSON text.
    SELECT session_id, seq, ts, mono_ns, scope, result['tool_call_id'] AS tool_call_id,
        result['return_value']['is_error'] AS is_error,
        length(result['return_value']['output']) AS output_chars,
        result['return_value']['message'] AS message
    FROM (SELECT *, from_json(payload, '{"tool_call_id": "VARCHAR", "return_value":
                    {"is_error": "BOOLEAN", "output": "VARCHAR", "message": "VARCHAR"}}') AS result
          FROM tool_events WHERE type = 'ToolResult')
), wire_res AS (
    -- the first ToolResult with the call's id after the ToolCall, in the same agent
    SELECT wire_calls.session_id, wire_calls.seq, wire_results.ts, wire_results.mono_ns,
        wire_results.is_error, wire_results.output_chars, wire_results.message
    FROM wire_calls ASOF JOIN wire_results ON wire_calls.session_id = wire_results.session_id
        AND wire_calls.scope = wire_results.scope
        AND wire_calls.tool_call_id = wire_results.tool_call_id
        AND wire_calls.seq < wire_results.seq
), asked AS MATERIALIZED (
    SELECT session_id, turn, coalesce(agent_id, '') AS scope, type, tool_call_id, request_id,
        wait_ms, outcome, resolved_by, answer->>'feedback' AS feedback
    FROM requests
    WHERE type IN ('ApprovalRequest', 'ToolCallRequest', 'session/request_permission')
    QUALIFY row_number() OVER (PARTITION BY session_id, turn, scope, type, tool_call_id
                               ORDER BY seq) = 1
), appr AS (
    SELECT * FROM asked WHERE type IN ('ApprovalRequest', 'session/request_permission')
), ext AS (
    SELECT * FROM asked WHERE type = 'ToolCallRequest'
), sub AS (
    SELECT session_id, parent_tool_call_id,
        count(*) AS subagent_events,
        count(*) FILTER (WHERE type = 'ToolCall') AS subagent_tool_calls,
        sum(coalesce(status['token_usage']['input_other'], 0)
            + coalesce(status['token_usage']['output'], 0)
            + coalesce(status['token_usage']['input_cache_read'], 0)
            + coalesce(status['token_usage']['input_cache_creation'], 0))::BIGINT AS subagent_tokens
    FROM tool_events WHERE agent_id IS NOT NULL GROUP BY ALL
), wire_tool_calls AS (
    SELECT wire_calls.session_id, 'wire' AS protocol, wire_calls.turn, wire_calls.step,
        wire_calls.tool_call_id, wire_calls.tool_name,
        CASE WHEN wire_calls.args0 IS NULL AND wire_parts.more IS NULL THEN NULL
             ELSE coalesce(wire_calls.args0, '') || coalesce(wire_parts.more, '') END AS arguments,
        wire_calls.ts AS started_at, wire_res.ts AS finished_at,
        (wire_res.mono_ns - wire_calls.mono_ns) / 1e6 AS duration_ms,
        CASE WHEN wire_res.seq IS NULL THEN NULL WHEN wire_res.is_error THEN 'failed'
             ELSE 'completed' END AS status,
        wire_res.is_error, wire_res.output_chars, wire_res.message,
        NULL::VARCHAR AS title, NULL::VARCHAR AS kind, NULL::BIGINT AS updates,
        appr.request_id IS NOT NULL AS approval_requested,
        appr.outcome AS approval, appr.resolved_by AS approval_resolved_by,
        appr.feedback AS approval_feedback, appr.wait_ms AS approval_wait_ms,
        ext.request_id IS NOT NULL AS external, ext.outcome AS external_outcome,
        ext.wait_ms AS external_wait_ms,
        NULL::BIGINT AS input_rounds, NULL::DOUBLE AS input_wait_ms,
        wire_calls.agent_id, wire_calls.subagent_type, wire_calls.parent_tool_call_id,
        coalesce(sub.subagent_events, 0) AS subagent_events,
        coalesce(sub.subagent_tool_calls, 0) AS subagent_tool_calls,
        coalesce(sub.subagent_tokens, 0) AS subagent_tokens,
        false AS history,
        wire_calls.seq
    FROM wire_calls
    LEFT JOIN wire_parts ON wire_parts.session_id = wire_calls.session_id
        AND wire_parts.scope = wire_calls.scope AND wire_parts.owner_seq = wire_calls.seq
    LEFT JOIN wire_res ON wire_res.session_id = wire_calls.session_id
        AND wire_res.seq = wire_calls.seq
    LEFT JOIN appr ON appr.type = 'ApprovalRequest' AND appr.session_id = wire_calls.session_id
        AND appr.turn IS NOT DISTINCT FROM wire_calls.turn
        AND appr.scope = wire_calls.scope AND appr.tool_call_id = wire_calls.tool_call_id
    LEFT JOIN ext ON ext.session_id = wire_calls.session_id
        AND ext.turn IS NOT DISTINCT FROM wire_calls.turn
        AND ext.scope = wire_calls.scope AND ext.tool_call_id = wire_calls.tool_call_id
    LEFT JOIN sub ON wire_calls.agent_id IS NULL AND sub.session_id = wire_calls.session_id
        AND sub.parent_tool_call_id = wire_calls.tool_call_id
)--<acp>
, acp_updates AS {materialized} (
    SELECT session_id, seq, ts, mono_ns, turn, type,
        payload->'update' AS upd,
        payload->'update'->>'toolCallId' AS tcid,
        payload->'update'->>'title' AS title,
        payload->'update'->>'kind' AS tool_kind,
        payload->'update'->>'status' AS tool_status
    FROM wr_events
    WHERE protocol = 'acp' AND direction = 'a2c' AND method = 'session/update'
      AND type IN ('tool_call', 'tool_call_update')
), acp_starts AS (
    SELECT * FROM acp_updates WHERE type = 'tool_call'
), acp_history AS (
    -- calls a reopened session's history replays (between session/load and its answer): they
    -- ran in an earlier session, not now
    SELECT acp_starts.session_id, acp_starts.seq
    FROM acp_starts JOIN wr_rpc loads ON loads.session_id = acp_starts.session_id
        AND loads.protocol = 'acp' AND loads.direction = 'c2a' AND loads.method = 'session/load'
        AND acp_starts.seq > loads.seq
        AND acp_starts.seq < coalesce(loads.answer_seq, 9223372036854775807)
), acp_later AS (
    -- each update belongs to the latest tool_call with its id before it
    SELECT later.*, acp_starts.seq AS start_seq
    FROM (SELECT * FROM acp_updates WHERE type = 'tool_call_update') later
    ASOF JOIN acp_starts ON later.session_id = acp_starts.session_id
        AND later.tcid = acp_starts.tcid AND later.seq > acp_starts.seq
), acp_agg AS (
    SELECT session_id, start_seq, count(*) AS updates,
        min(seq) FILTER (WHERE tool_status IN ('completed', 'failed')) AS end_seq,
        arg_max(tool_status, seq) FILTER (WHERE tool_status IS NOT NULL) AS last_status,
        arg_max(title, seq) FILTER (WHERE title IS NOT NULL) AS last_title,
        arg_max(tool_kind, seq) FILTER (WHERE tool_kind IS NOT NULL) AS last_kind
    FROM acp_later GROUP BY ALL
), acp_tool_calls AS (
    -- ACP: a tool_call update starts a call, its tool_call_updates change its status; it ends
    -- with the first update whose status is completed or failed
    SELECT acp_starts.session_id, 'acp' AS protocol, acp_starts.turn,
        acp_starts.tcid AS tool_call_id,
        """ + _acp_tool_name("coalesce(acp_agg.last_title, acp_starts.title)",
                             "coalesce(acp_agg.last_kind, acp_starts.tool_kind)") + """ AS tool_name,
        coalesce((acp_starts.upd->'rawInput')::VARCHAR,
                 nullif(array_to_string(json_extract_string(acp_starts.upd, '$.content[*].content.text'), ''), ''))
            AS arguments,
        acp_starts.ts AS started_at, acp_end.ts AS finished_at,
        (acp_end.mono_ns - acp_starts.mono_ns) / 1e6 AS duration_ms,
        -- a call that never finished in a turn the client cancelled was cancelled with it
        CASE WHEN coalesce(acp_agg.last_status, acp_starts.tool_status) IN ('pending', 'in_progress')
                  AND acp_prompt.answer->>'stopReason' = 'cancelled' THEN 'cancelled'
             ELSE coalesce(acp_agg.last_status, acp_starts.tool_status) END AS status,
        CASE coalesce(acp_agg.last_status, acp_starts.tool_status)
            WHEN 'failed' THEN true WHEN 'completed' THEN false END AS is_error,
        length(coalesce((acp_end.upd->'rawOutput')::VARCHAR,
                        array_to_string(json_extract_string(acp_end.upd, '$.content[*].content.text'), '')))
            AS output_chars,
        CASE WHEN acp_end.tool_status = 'failed' THEN
            nullif(array_to_string(json_extract_string(acp_end.upd, '$.content[*].content.text'), ''), '')
        END AS message,
        coalesce(acp_agg.last_title, acp_starts.title) AS title,
        coalesce(acp_agg.last_kind, acp_starts.tool_kind) AS kind,
        coalesce(acp_agg.updates, 0) AS updates,
        appr.request_id IS NOT NULL AS approval_requested,
        appr.outcome AS approval, appr.resolved_by AS approval_resolved_by,
        appr.wait_ms AS approval_wait_ms,
        acp_starts.seq IN (SELECT seq FROM acp_history
                           WHERE acp_history.session_id = acp_starts.session_id) AS history,
        acp_starts.seq
    FROM acp_starts
    LEFT JOIN acp_agg ON acp_agg.session_id = acp_starts.session_id
        AND acp_agg.start_seq = acp_starts.seq
    LEFT JOIN acp_later acp_end ON acp_end.session_id = acp_starts.session_id
        AND acp_end.seq = acp_agg.end_seq
    LEFT JOIN wr_rpc acp_prompt ON acp_prompt.session_id = acp_starts.session_id
        AND acp_prompt.protocol = 'acp' AND acp_prompt.direction = 'c2a'
        AND acp_prompt.method = 'session/prompt' AND acp_prompt.turn = acp_starts.turn
    LEFT JOIN appr ON appr.type = 'session/request_permission'
        AND appr.session_id = acp_starts.session_id
        AND appr.turn IS NOT DISTINCT FROM acp_starts.turn
        AND appr.tool_call_id = acp_starts.tcid
)--</acp>
--<mcp>
, mcp_logical AS (
    -- MCP: a tools/call and its answer; in the 2026-07-28 era a logical call runs from the
    -- first request through its input_required rounds to the final (complete) result
    SELECT session_id, root_seq,
        any_value(root_id) AS tool_call_id,
        any_value(target) FILTER (WHERE seq = root_seq) AS tool_name,
        any_value((payload->'arguments')::VARCHAR) FILTER (WHERE seq = root_seq) AS arguments,
        any_value(turn) FILTER (WHERE seq = root_seq) AS turn,
        min(ts) AS started_at, min(mono_ns) AS start_mono,
        arg_max(answered_at, seq) AS last_answered_at,
        arg_max(answer_mono, seq) AS last_answer_mono,
        arg_max(answer_kind, seq) AS last_answer_kind,
        arg_max(result_type, seq) AS last_result_type,
        arg_max(answer, seq) AS last_answer,
        count(*) FILTER (WHERE result_type = 'input_required') AS input_rounds,
        sum(greatest(next_mono - answer_mono, 0)) FILTER (WHERE result_type = 'input_required')
            / 1e6 AS input_wait_ms,
        arg_max(rpc_id, seq) AS last_id, max(seq) AS last_seq
    FROM wr_rounds WHERE method = 'tools/call'
    GROUP BY session_id, root_seq
), mcp_cancels AS (
    -- the client giving up on a request (the server then sends no answer)
    SELECT session_id, seq, ts, mono_ns, payload->>'requestId' AS request_id,
        payload->>'reason' AS reason
    FROM wr_events
    WHERE protocol = 'mcp' AND direction = 'c2a' AND method = 'notifications/cancelled'
), mcp_given_up AS (
    -- a call still unanswered when the client cancelled its latest round
    SELECT mcp_logical.*, mcp_cancels.ts AS cancelled_at, mcp_cancels.mono_ns AS cancel_mono,
        mcp_cancels.reason AS cancel_reason
    FROM mcp_logical LEFT JOIN mcp_cancels ON mcp_cancels.session_id = mcp_logical.session_id
        AND mcp_cancels.request_id = mcp_logical.last_id AND mcp_cancels.seq > mcp_logical.last_seq
        AND mcp_logical.last_answer_kind IS NULL
    QUALIFY row_number() OVER (PARTITION BY mcp_logical.session_id, mcp_logical.root_seq
                               ORDER BY mcp_cancels.seq) = 1
), mcp_tool_calls AS (
    SELECT session_id, 'mcp' AS protocol, turn, tool_call_id, tool_name, arguments, started_at,
        CASE WHEN cancel_mono IS NOT NULL THEN cancelled_at
             WHEN last_answer_kind IS NOT NULL AND last_result_type IS DISTINCT FROM 'input_required'
             THEN last_answered_at END AS finished_at,
        CASE WHEN cancel_mono IS NOT NULL THEN greatest(cancel_mono - start_mono, 0) / 1e6
             WHEN last_answer_kind IS NOT NULL AND last_result_type IS DISTINCT FROM 'input_required'
             THEN greatest(last_answer_mono - start_mono, 0) / 1e6 END AS duration_ms,
        CASE WHEN cancel_mono IS NOT NULL THEN 'cancelled'
             WHEN last_answer_kind IS NULL THEN NULL
             WHEN last_answer_kind = 'error' THEN 'error'
             WHEN last_result_type = 'input_required' THEN 'input_required'
             WHEN TRY_CAST(last_answer->>'isError' AS BOOLEAN) THEN 'failed'
             ELSE 'completed' END AS status,
        CASE WHEN last_answer_kind = 'error' THEN true
             WHEN last_answer_kind IS NULL OR last_result_type = 'input_required' THEN NULL
             ELSE coalesce(TRY_CAST(last_answer->>'isError' AS BOOLEAN), false) END AS is_error,
        CASE WHEN last_answer_kind = 'response' THEN
            coalesce(list_sum(list_transform(json_extract_string(last_answer, '$.content[*].text'),
                                             lambda x: length(x))), 0) END AS output_chars,
        CASE WHEN cancel_mono IS NOT NULL THEN cancel_reason
             WHEN last_answer_kind = 'error' THEN last_answer->>'message'
             WHEN TRY_CAST(last_answer->>'isError' AS BOOLEAN)
             THEN json_extract_string(last_answer, '$.content[0].text') END AS message,
        input_rounds, coalesce(input_wait_ms, 0) AS input_wait_ms,
        false AS history,
        root_seq AS seq
    FROM mcp_given_up
)--</mcp>
SELECT """ + TOOL_CALL_COLUMNS + """
FROM (SELECT * FROM wire_tool_calls
      --<acp>
      UNION ALL BY NAME SELECT * FROM acp_tool_calls
      --</acp>
      --<mcp>
      UNION ALL BY NAME SELECT * FROM mcp_tool_calls
      --</mcp>
)
"""

# The frame a turn starts with, for attributing frames that are not in wr_events.
TURN_OF = """
    SELECT session_id, seq, turn FROM wr_events
    WHERE (type = 'TurnBegin' AND agent_id IS NULL)
       --<acp>
       OR (protocol = 'acp' AND direction = 'c2a' AND kind = 'request' AND method = 'session/prompt')
       --</acp>
"""

# what makes an agent's stderr line an error (case-insensitive)
STDERR_ERROR_RE = ("(?i)error|exception|traceback|fatal|panic|fail|critical|denied|refused|"
                   "cannot|could not|unable to|segmentation")

ERRORS = """
CREATE OR REPLACE {temp} VIEW errors AS
WITH reqs AS (
    SELECT session_id, seq, rpc_id,
        CASE direction WHEN 'c2a' THEN 'a2c' ELSE 'c2a' END AS answer_dir,
        coalesce(type, method) AS what
    FROM wr_events WHERE kind = 'request' AND rpc_id IS NOT NULL
), rpc_errors AS (
    SELECT session_id, seq, ts, direction, rpc_id, payload FROM wr_events WHERE kind = 'error'
), turn_of AS (""" + TURN_OF + """
), protos AS (
    SELECT session_id, any_value(protocol) AS protocol FROM sessions GROUP BY session_id
), all_errors AS (
    SELECT rpc_errors.session_id, rpc_errors.seq, rpc_errors.ts, rpc_errors.direction,
        'jsonrpc' AS source,
        TRY_CAST(rpc_errors.payload->>'code' AS INTEGER) AS code,
        rpc_errors.payload->>'message' AS message,
        reqs.what AS related, rpc_errors.rpc_id
    FROM rpc_errors ASOF LEFT JOIN reqs ON rpc_errors.session_id = reqs.session_id
        AND rpc_errors.rpc_id = reqs.rpc_id AND rpc_errors.direction = reqs.answer_dir
        AND rpc_errors.seq > reqs.seq
    UNION ALL
    SELECT session_id, seq, ts, direction, source, code, message, related, rpc_id FROM (
        SELECT session_id, seq, ts, direction, rpc_id,
            CASE kind WHEN 'invalid' THEN 'invalid_frame' WHEN 'stderr' THEN 'stderr'
                 WHEN 'lifecycle' THEN CASE WHEN method = 'exit' THEN 'exit' ELSE 'proxy' END
            END AS source,
            CASE WHEN kind = 'lifecycle' AND method = 'exit'
                 THEN TRY_CAST(payload->>'exit_status' AS INTEGER) END AS code,
            CASE kind
                WHEN 'invalid' THEN parse_error
                WHEN 'stderr' THEN coalesce(try(decode(raw)), 'non-UTF-8 bytes: ' || byte_len::VARCHAR)
                ELSE CASE
                    WHEN method <> 'exit' THEN concat_ws(': ', method,
                        coalesce(payload->>'where', payload->>'reason'), payload->>'error')
                    WHEN (payload->>'signal') IS NOT NULL THEN 'agent killed by ' || (payload->>'signal')
                    ELSE 'agent exited with status ' || (payload->>'exit_status') END
            END AS message,
            CASE kind WHEN 'invalid' THEN method WHEN 'lifecycle' THEN method END AS related
        FROM frames
        -- stderr is the agent's log: only lines that say something failed are errors (kimi
        -- ends every session with "To resume this session: ..."; all of it stays in frames)
        WHERE kind = 'invalid'
           OR (kind = 'stderr' AND byte_len > 0 AND regexp_matches(
                   coalesce(try(decode(raw)), ''), '""" + STDERR_ERROR_RE + """'))
           OR (kind = 'lifecycle' AND method IN ('proxy_error', 'recording_gap', 'client_hangup',
                                                 'spawn_failed', 'exit'))
    )
    WHERE source <> 'exit' OR coalesce(code, 0) <> 0
    UNION ALL
    -- protocol-level anomalies of frames that parsed (ids reused while pending, methods of
    -- another protocol)
    SELECT session_id, seq, ts, direction, 'anomaly', NULL, anomaly, coalesce(method, kind), rpc_id
    FROM frames WHERE anomaly IS NOT NULL
)
SELECT all_errors.session_id, protos.protocol, turn_of.turn, all_errors.ts, all_errors.source,
    all_errors.direction, all_errors.code, all_errors.message, all_errors.related,
    all_errors.rpc_id, all_errors.seq
FROM all_errors
ASOF LEFT JOIN turn_of ON all_errors.session_id = turn_of.session_id AND all_errors.seq >= turn_of.seq
LEFT JOIN protos ON protos.session_id = all_errors.session_id
"""

ANOMALIES = """
CREATE OR REPLACE {temp} VIEW anomalies AS
WITH turn_of AS (""" + TURN_OF + """
), protos AS (
    SELECT session_id, any_value(protocol) AS protocol FROM sessions GROUP BY session_id
), odd AS (
    SELECT session_id, seq, ts, direction, kind, method, rpc_id, byte_len, anomaly, parse_error
    FROM frames WHERE anomaly IS NOT NULL OR kind = 'invalid'
)
SELECT odd.session_id, protos.protocol, turn_of.turn, odd.seq, odd.ts, odd.direction, odd.kind,
    odd.method, odd.rpc_id, concat_ws('; ', odd.parse_error, odd.anomaly) AS problem,
    odd.anomaly, odd.parse_error, odd.byte_len
FROM odd
ASOF LEFT JOIN turn_of ON odd.session_id = turn_of.session_id AND odd.seq >= turn_of.seq
LEFT JOIN protos ON protos.session_id = odd.session_id
"""

VIEW_SQL: list[tuple[str, str]] = [
    ("wr_events", WR_EVENTS),
    ("wr_rpc", WR_RPC),
    ("wr_rounds", WR_ROUNDS),
    ("token_usage", TOKEN_USAGE),
    ("steps", STEPS),
    ("turns", TURNS),
    ("requests", REQUESTS),
    ("tool_calls", TOOL_CALLS),
    ("errors", ERRORS),
    ("anomalies", ANOMALIES),
]
VIEW_NAMES = [name for name, _ in VIEW_SQL]


REGION = re.compile(r"--<(\w+)>\n(.*?)--</\1>\n?", re.S)


def view_sql(name: str, temp: bool = False, materialize: bool = False,
             protocols: set[str | None] | None = None) -> str:
    """The CREATE statement of one view. protocols: the protocols of the sessions the views
    will ever see (a workspace over read-only files knows them). The parts for ACP or MCP are
    then left out when no such session is there, so a Wire-only workspace plans and runs
    exactly the Wire SQL; a single protocol also saves the per-frame join that finds it. None
    (the default, and always for views stored in a file, which gain sessions later): all in."""
    sql = dict(VIEW_SQL)[name]
    kw = "TEMP" if temp else ""
    # Over a materialised wr_events, re-scanning it (with filters pushed down) beats copying
    # the rows a view needs; over the plain view, computing it once per view is what counts.
    cte = "NOT MATERIALIZED" if materialize and temp else "MATERIALIZED"
    sql = sql.replace("{temp}", kw).replace("{materialized}", cte)
    on = {"acp": True, "mcp": True, "join": True}
    protocol = "protos.protocol"
    if protocols is not None:
        on = {"acp": "acp" in protocols, "mcp": "mcp" in protocols, "join": len(protocols) > 1}
        if len(protocols) <= 1:  # one protocol (or no session at all): a constant, no join
            only = next(iter(protocols), None)
            protocol = "NULL::VARCHAR" if only is None else "'" + only.replace("'", "''") + "'"
    on["rpc"] = on["acp"] or on["mcp"]
    sql = REGION.sub(lambda m: m.group(0) if on[m.group(1)] else "", sql)
    sql = sql.replace("{protocol}", protocol)
    # computed once into temp tables too: the ACP/MCP parts of several views read them (only
    # when there are such sessions: a Wire-only workspace never computes them)
    if materialize and temp and (name == "wr_events" or name == "wr_rpc" and on["rpc"]
                                 or name == "wr_rounds" and on["mcp"]):
        sql = sql.replace(f"CREATE OR REPLACE TEMP VIEW {name} AS",
                          f"CREATE OR REPLACE TEMP TABLE {name} AS", 1)
    return sql


def install_views(con: duckdb.DuckDBPyConnection, temp: bool = False,
                  materialize: bool = False, protocols: set[str | None] | None = None) -> None:
    """Create (or replace) every analysis view. temp=True keeps them in the connection only,
    which is how read-only files and unions of files get them. materialize=True (with temp)
    computes `wr_events` once into a temp table: every other view reads it several times, and
    at a million frames each recomputation costs a scan of the payload column (`wr_rpc` and
    `wr_rounds` likewise, when there are ACP / MCP sessions). protocols: see `view_sql` (only
    with temp)."""
    for name, _ in VIEW_SQL:
        con.execute(view_sql(name, temp, materialize, protocols if temp else None))
    if not temp:
        con.execute("INSERT OR REPLACE INTO meta VALUES ('analysis_views', ?)", [VIEWS_VERSION])
