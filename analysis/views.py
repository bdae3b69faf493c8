"""The analysis views over `frames` and `sessions`.

They read the extracted columns (`msg_type`, `rpc_id`, `kind`, `method`) to pick rows and parse
`payload` JSON only on the few rows that need it: at a million frames, filtering on extracted
columns costs milliseconds where parsing every payload costs a third of a second.

The same SQL is installed persistently into every DB the proxy writes (`install_views(con)`,
called by `recorder.store.open_store`) and as TEMP views over the union of many read-only files
(`analysis.sources`). Names inside resolve against whatever `frames` / `sessions` are visible.

Attribution rule used everywhere: a frame belongs to the turn of the last main-agent `TurnBegin`
before it and to the step of the last `StepBegin` after that `TurnBegin`. A `SubagentEvent` is
unpacked (its nested type and payload) and keeps the turn and step of its parent's frame.
Durations come from `mono_ns` (monotonic clock), never from wall-clock `ts`.
"""

from __future__ import annotations

import duckdb

# Bump when a view changes shape; stored in meta so a file says which view set it carries.
VIEWS_VERSION = "1"

# One row per a2c event/request except streamed text (the bulk of a session). Internal, but
# documented: handy for ad-hoc questions ("which events happened in step 3?").
WR_EVENTS = """
CREATE OR REPLACE {temp} VIEW wr_events AS
WITH anchors AS (
    -- only TurnBegin/StepBegin rows are windowed (a few percent of a session); every other
    -- frame finds its anchor by an ASOF join, which is much cheaper than windowing wide rows
    SELECT session_id, seq,
        sum(CASE WHEN msg_type = 'TurnBegin' THEN 1 ELSE 0 END) OVER w AS turn0,
        max(CASE WHEN msg_type = 'TurnBegin' THEN seq END) OVER w AS turn_seq,
        CASE WHEN msg_type = 'StepBegin' THEN seq END AS step_seq,
        CASE WHEN msg_type = 'StepBegin' THEN TRY_CAST(payload->>'n' AS INTEGER) END AS step
    FROM frames
    WHERE direction = 'a2c' AND method = 'event' AND msg_type IN ('TurnBegin', 'StepBegin')
    WINDOW w AS (PARTITION BY session_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), main AS (
    SELECT f.session_id, f.seq, f.ts, f.mono_ns, f.direction, f.kind, f.method, f.rpc_id,
        f.msg_type, f.payload, a.turn0, a.turn_seq, a.step_seq, a.step
    FROM frames f
    ASOF LEFT JOIN anchors a ON f.session_id = a.session_id AND f.seq >= a.seq
    WHERE f.direction IN ('a2c', 'c2a')
      AND f.kind IN ('request', 'notification', 'response', 'error')
      AND (f.msg_type IS NULL OR f.msg_type <> 'ContentPart')
), unpacked AS (
    SELECT session_id, seq, ts, mono_ns, direction, kind, method, rpc_id,
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
SELECT session_id, seq, ts, mono_ns, direction, kind, method, turn, turn_seq, step, step_seq,
    agent_id, subagent_type, parent_tool_call_id, type,
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

TOKEN_USAGE = """
CREATE OR REPLACE {temp} VIEW token_usage AS
SELECT session_id, seq, ts, turn, step, agent_id, subagent_type, parent_tool_call_id,
    status.message_id AS message_id,
    coalesce(status.token_usage.input_other, 0) AS input_other,
    coalesce(status.token_usage.output, 0) AS output,
    coalesce(status.token_usage.input_cache_read, 0) AS input_cache_read,
    coalesce(status.token_usage.input_cache_creation, 0) AS input_cache_creation,
    coalesce(status.token_usage.input_other, 0) + coalesce(status.token_usage.output, 0)
        + coalesce(status.token_usage.input_cache_read, 0)
        + coalesce(status.token_usage.input_cache_creation, 0) AS total,
    status.context_tokens AS context_tokens,
    status.max_context_tokens AS max_context_tokens,
    status.context_usage AS context_usage
FROM wr_events
WHERE type = 'StatusUpdate' AND direction = 'a2c' AND status.token_usage IS NOT NULL
"""

# Per-step and per-turn sums need the token columns of every StatusUpdate (main and subagent)
# next to the other events, so both views aggregate one materialised pass over wr_events.
STEPS = """
CREATE OR REPLACE {temp} VIEW steps AS
WITH e AS {materialized} (
    SELECT session_id, seq, ts, mono_ns, turn, turn_seq, step, step_seq, agent_id, type,
        coalesce(status.token_usage.input_other, 0) AS i_other,
        coalesce(status.token_usage.output, 0) AS o,
        coalesce(status.token_usage.input_cache_read, 0) AS i_read,
        coalesce(status.token_usage.input_cache_creation, 0) AS i_create,
        status.token_usage IS NOT NULL AS has_usage,
        status.message_id AS message_id, status.context_tokens AS context_tokens,
        status.context_usage AS context_usage
    FROM wr_events WHERE step_seq IS NOT NULL
), agg AS (
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
    FROM e GROUP BY session_id, step_seq
), bounded AS (
    SELECT *,
        lead(start_mono) OVER (PARTITION BY session_id, turn_seq ORDER BY step_seq) AS next_mono,
        lead(started_at) OVER (PARTITION BY session_id, turn_seq ORDER BY step_seq) AS next_ts
    FROM agg
)
SELECT session_id, turn, step, started_at,
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
FROM bounded
"""

TURNS = """
CREATE OR REPLACE {temp} VIEW turns AS
WITH e AS {materialized} (
    SELECT session_id, seq, ts, mono_ns, turn, turn_seq, step_seq, agent_id, type,
        CASE WHEN type = 'TurnBegin' AND agent_id IS NULL THEN payload->'user_input' END AS ui,
        coalesce(status.token_usage.input_other, 0) AS i_other,
        coalesce(status.token_usage.output, 0) AS o,
        coalesce(status.token_usage.input_cache_read, 0) AS i_read,
        coalesce(status.token_usage.input_cache_creation, 0) AS i_create
    FROM wr_events WHERE turn_seq IS NOT NULL AND direction = 'a2c'
), agg AS (
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
    FROM e GROUP BY session_id, turn_seq
), prompts AS (
    SELECT session_id, seq, ts, mono_ns, rpc_id FROM wr_events
    WHERE direction = 'c2a' AND kind = 'request' AND method = 'prompt'
), answers AS (
    SELECT session_id, seq, ts, mono_ns, rpc_id, kind, payload FROM wr_events
    WHERE direction = 'a2c' AND kind IN ('response', 'error') AND rpc_id IS NOT NULL
), tp AS (
    -- the prompt that started a turn: the last one sent before its TurnBegin (unless an
    -- earlier turn already claimed it, e.g. turns re-emitted by `replay`)
    SELECT agg.session_id, agg.turn_seq, p.rpc_id AS prompt_id, p.seq AS prompt_seq,
        p.ts AS prompt_ts, p.mono_ns AS prompt_mono
    FROM agg ASOF LEFT JOIN prompts p ON agg.session_id = p.session_id AND agg.turn_seq > p.seq
    QUALIFY p.seq IS NULL
        OR row_number() OVER (PARTITION BY agg.session_id, p.seq ORDER BY agg.turn_seq) = 1
), tr AS (
    SELECT tp.session_id, tp.turn_seq, a.seq AS resp_seq, a.ts AS resp_ts, a.mono_ns AS resp_mono,
        a.kind AS resp_kind, a.payload AS resp
    FROM tp JOIN answers a ON a.session_id = tp.session_id AND a.rpc_id = tp.prompt_id
        AND a.seq > tp.prompt_seq
    QUALIFY row_number() OVER (PARTITION BY tp.session_id, tp.turn_seq ORDER BY a.seq) = 1
)
SELECT agg.session_id, agg.turn, tp.prompt_id,
    CASE WHEN json_type(agg.ui) = 'VARCHAR' THEN agg.ui->>'$' ELSE agg.ui::VARCHAR END AS user_input,
    agg.started_at, agg.end_ts AS ended_at,
    (agg.end_mono - agg.start_mono) / 1e6 AS duration_ms,
    tp.prompt_ts AS prompt_at, tr.resp_ts AS responded_at,
    (tr.resp_mono - tp.prompt_mono) / 1e6 AS response_ms,
    CASE WHEN tr.resp_kind = 'response' THEN coalesce(tr.resp->>'status', 'finished')
         WHEN tr.resp_kind = 'error' THEN 'error'
         WHEN agg.end_seq IS NULL THEN 'incomplete'
         WHEN agg.last_interrupt_seq > agg.last_step_seq THEN 'error'
         WHEN agg.tool_calls > agg.tool_results THEN 'cancelled'
         ELSE 'finished' END AS status,
    CASE WHEN tr.resp_kind IS NOT NULL THEN 'response'
         WHEN agg.end_seq IS NULL THEN 'no TurnEnd' ELSE 'inferred' END AS status_source,
    TRY_CAST(CASE WHEN tr.resp_kind = 'error' THEN tr.resp->>'code' END AS INTEGER) AS error_code,
    CASE WHEN tr.resp_kind = 'error' THEN tr.resp->>'message' END AS error_message,
    agg.steps, agg.tool_calls, agg.subagent_tool_calls, agg.approvals, agg.retries, agg.steers,
    agg.input_other, agg.output, agg.input_cache_read, agg.input_cache_creation,
    agg.input_other + agg.output + agg.input_cache_read + agg.input_cache_creation AS total_tokens,
    coalesce(agg.subagent_tokens, 0) AS subagent_tokens,
    agg.turn_seq AS seq
FROM agg
LEFT JOIN tp USING (session_id, turn_seq)
LEFT JOIN tr USING (session_id, turn_seq)
"""

REQUESTS = """
CREATE OR REPLACE {temp} VIEW requests AS
WITH rq AS (
    SELECT session_id, seq, ts, mono_ns, turn, step, rpc_id AS request_id, type, payload
    FROM wr_events WHERE is_request
), ans AS (
    SELECT session_id, seq, ts, mono_ns, rpc_id, kind, payload FROM wr_events
    WHERE direction = 'c2a' AND kind IN ('response', 'error') AND rpc_id IS NOT NULL
), pairs AS (
    -- An answer belongs to the latest request with its id before it (`replay` re-sends requests
    -- with their original ids). A client that answers within microseconds can have its answer
    -- recorded before the request (the relay writes to the client first, then records), so
    -- an answer with no earlier request takes the first one after it.
    SELECT ans.*, rq.seq AS req_seq,
        row_number() OVER (PARTITION BY ans.session_id, ans.seq
                           ORDER BY rq.seq < ans.seq DESC,
                                    CASE WHEN rq.seq < ans.seq THEN -rq.seq ELSE rq.seq END) AS pick
    FROM ans JOIN rq ON ans.session_id = rq.session_id AND ans.rpc_id = rq.request_id
), matched AS (
    SELECT * FROM pairs WHERE pick = 1
    QUALIFY row_number() OVER (PARTITION BY session_id, req_seq ORDER BY seq) = 1
), resolved AS (
    SELECT session_id, payload->>'request_id' AS request_id, min(seq) AS seq,
        arg_min(ts, seq) AS ts, arg_min(mono_ns, seq) AS mono_ns,
        arg_min(payload->>'response', seq) AS response
    FROM wr_events
    WHERE direction = 'a2c' AND type = 'ApprovalResponse' AND agent_id IS NULL
    GROUP BY ALL
), src AS (
    SELECT session_id, source FROM sessions
)
SELECT rq.session_id, rq.turn, rq.step, rq.request_id, rq.type,
    CASE rq.type WHEN 'ToolCallRequest' THEN rq.request_id
        ELSE coalesce(rq.payload->>'tool_call_id', rq.payload->'input_data'->>'tool_call_id')
    END AS tool_call_id,
    rq.payload->>'agent_id' AS agent_id,
    CASE rq.type
        WHEN 'ApprovalRequest' THEN rq.payload->>'description'
        WHEN 'ToolCallRequest' THEN rq.payload->>'name'
        WHEN 'QuestionRequest' THEN rq.payload->'questions'->0->>'question'
        WHEN 'HookRequest' THEN concat_ws(' ', rq.payload->>'event', rq.payload->>'target')
    END AS subject,
    CASE rq.type WHEN 'ApprovalRequest' THEN rq.payload->>'sender'
        WHEN 'ToolCallRequest' THEN rq.payload->>'name' END AS tool_name,
    rq.ts AS requested_at, m.ts AS answered_at,
    CASE WHEN m.mono_ns IS NOT NULL THEN greatest(m.mono_ns - rq.mono_ns, 0) / 1e6 END AS wait_ms,
    m.kind AS answer_kind, m.payload AS answer,
    CASE
        WHEN m.kind = 'error' THEN 'error'
        WHEN m.kind IS NULL AND r.response IS NOT NULL THEN r.response
        WHEN m.kind IS NULL AND src.source = 'kimi-wire-jsonl' THEN 'unknown'
        WHEN m.kind IS NULL THEN 'unanswered'
        WHEN rq.type = 'ApprovalRequest' THEN coalesce(m.payload->>'response', 'invalid')
        WHEN rq.type = 'QuestionRequest' THEN
            CASE WHEN coalesce(json_array_length(json_keys(m.payload->'answers')), 0) = 0
                 THEN 'dismissed' ELSE 'answered' END
        WHEN rq.type = 'ToolCallRequest' THEN
            CASE WHEN (m.payload->'return_value'->>'is_error')::BOOLEAN THEN 'tool_error'
                 WHEN (m.payload->'return_value') IS NULL THEN 'invalid' ELSE 'ok' END
        WHEN rq.type = 'HookRequest' THEN coalesce(m.payload->>'action', 'allow')
        ELSE 'answered'
    END AS outcome,
    CASE WHEN m.kind IS NOT NULL THEN 'client' WHEN r.response IS NOT NULL THEN 'agent' END
        AS resolved_by,
    r.response AS agent_response, r.ts AS agent_resolved_at,
    (r.mono_ns - rq.mono_ns) / 1e6 AS agent_resolved_ms,
    rq.seq
FROM rq
LEFT JOIN matched m ON m.session_id = rq.session_id AND m.req_seq = rq.seq
LEFT JOIN resolved r ON rq.type = 'ApprovalRequest' AND r.session_id = rq.session_id
    AND r.request_id = rq.request_id AND r.seq > rq.seq
LEFT JOIN src ON src.session_id = rq.session_id
"""

TOOL_CALLS = """
CREATE OR REPLACE {temp} VIEW tool_calls AS
WITH e AS {materialized} (
    SELECT session_id, seq, ts, mono_ns, turn, step, agent_id, subagent_type, parent_tool_call_id,
        type, payload, status, coalesce(agent_id, '') AS scope
    FROM wr_events
    WHERE direction = 'a2c' AND (type IN ('ToolCall', 'ToolResult', 'ToolCallPart')
                                 OR agent_id IS NOT NULL)
), tc AS (
    SELECT session_id, seq, ts, mono_ns, turn, step, agent_id, subagent_type, parent_tool_call_id,
        p.id AS tool_call_id, p.function.name AS tool_name, p.function.arguments AS args0, scope
    FROM (SELECT *, from_json(payload, '{"id": "VARCHAR",
                    "function": {"name": "VARCHAR", "arguments": "VARCHAR"}}') AS p
          FROM e WHERE type = 'ToolCall')
), parts AS (
    -- streamed arguments: each ToolCallPart continues the ToolCall before it (same agent)
    SELECT p.session_id, p.scope, c.seq AS owner_seq, string_agg(p.part, '' ORDER BY p.seq) AS more
    FROM (SELECT session_id, scope, seq, payload->>'arguments_part' AS part
          FROM e WHERE type = 'ToolCallPart') p
    ASOF JOIN (SELECT session_id, scope, seq FROM e WHERE type = 'ToolCall') c
        ON p.session_id = c.session_id AND p.scope = c.scope AND p.seq > c.seq
    GROUP BY ALL
), tr AS (
    -- one parse per result: outputs can be large. A non-string output (content parts) is
    -- measured as its JSON text.
    SELECT session_id, seq, ts, mono_ns, scope, p.tool_call_id AS tool_call_id,
        p.return_value.is_error AS is_error, length(p.return_value.output) AS output_chars,
        p.return_value.message AS message
    FROM (SELECT *, from_json(payload, '{"tool_call_id": "VARCHAR", "return_value":
                    {"is_error": "BOOLEAN", "output": "VARCHAR", "message": "VARCHAR"}}') AS p
          FROM e WHERE type = 'ToolResult')
), res AS (
    -- the first ToolResult with the call's id after the ToolCall, in the same agent
    SELECT tc.session_id, tc.seq, tr.ts, tr.mono_ns, tr.is_error, tr.output_chars, tr.message
    FROM tc ASOF JOIN tr ON tc.session_id = tr.session_id AND tc.scope = tr.scope
        AND tc.tool_call_id = tr.tool_call_id AND tc.seq < tr.seq
), rq AS MATERIALIZED (
    SELECT session_id, turn, coalesce(agent_id, '') AS scope, type, tool_call_id, request_id,
        wait_ms, outcome, resolved_by, answer->>'feedback' AS feedback
    FROM requests WHERE type IN ('ApprovalRequest', 'ToolCallRequest')
    QUALIFY row_number() OVER (PARTITION BY session_id, turn, scope, type, tool_call_id
                               ORDER BY seq) = 1
), appr AS (
    SELECT * FROM rq WHERE type = 'ApprovalRequest'
), ext AS (
    SELECT * FROM rq WHERE type = 'ToolCallRequest'
), sub AS (
    SELECT session_id, parent_tool_call_id,
        count(*) AS subagent_events,
        count(*) FILTER (WHERE type = 'ToolCall') AS subagent_tool_calls,
        sum(coalesce(status.token_usage.input_other, 0) + coalesce(status.token_usage.output, 0)
            + coalesce(status.token_usage.input_cache_read, 0)
            + coalesce(status.token_usage.input_cache_creation, 0))::BIGINT AS subagent_tokens
    FROM e WHERE agent_id IS NOT NULL GROUP BY ALL
)
SELECT tc.session_id, tc.turn, tc.step, tc.tool_call_id, tc.tool_name,
    CASE WHEN tc.args0 IS NULL AND parts.more IS NULL THEN NULL
         ELSE coalesce(tc.args0, '') || coalesce(parts.more, '') END AS arguments,
    tc.ts AS started_at, res.ts AS finished_at,
    (res.mono_ns - tc.mono_ns) / 1e6 AS duration_ms,
    res.is_error, res.output_chars, res.message,
    appr.request_id IS NOT NULL AS approval_requested,
    appr.outcome AS approval, appr.resolved_by AS approval_resolved_by,
    appr.feedback AS approval_feedback, appr.wait_ms AS approval_wait_ms,
    ext.request_id IS NOT NULL AS external, ext.outcome AS external_outcome,
    ext.wait_ms AS external_wait_ms,
    tc.agent_id, tc.subagent_type, tc.parent_tool_call_id,
    coalesce(sub.subagent_events, 0) AS subagent_events,
    coalesce(sub.subagent_tool_calls, 0) AS subagent_tool_calls,
    coalesce(sub.subagent_tokens, 0) AS subagent_tokens,
    tc.seq
FROM tc
LEFT JOIN parts ON parts.session_id = tc.session_id AND parts.scope = tc.scope
    AND parts.owner_seq = tc.seq
LEFT JOIN res ON res.session_id = tc.session_id AND res.seq = tc.seq
LEFT JOIN appr ON appr.session_id = tc.session_id AND appr.turn IS NOT DISTINCT FROM tc.turn
    AND appr.scope = tc.scope AND appr.tool_call_id = tc.tool_call_id
LEFT JOIN ext ON ext.session_id = tc.session_id AND ext.turn IS NOT DISTINCT FROM tc.turn
    AND ext.scope = tc.scope AND ext.tool_call_id = tc.tool_call_id
LEFT JOIN sub ON tc.agent_id IS NULL AND sub.session_id = tc.session_id
    AND sub.parent_tool_call_id = tc.tool_call_id
"""

ERRORS = """
CREATE OR REPLACE {temp} VIEW errors AS
WITH reqs AS (
    SELECT session_id, seq, rpc_id,
        CASE direction WHEN 'c2a' THEN 'a2c' ELSE 'c2a' END AS answer_dir,
        coalesce(type, method) AS what
    FROM wr_events WHERE kind = 'request' AND rpc_id IS NOT NULL
), rpc AS (
    SELECT session_id, seq, ts, direction, rpc_id, payload FROM wr_events WHERE kind = 'error'
), turn_of AS (
    SELECT session_id, seq, turn FROM wr_events WHERE type = 'TurnBegin' AND agent_id IS NULL
), all_errors AS (
    SELECT rpc.session_id, rpc.seq, rpc.ts, rpc.direction, 'jsonrpc' AS source,
        TRY_CAST(rpc.payload->>'code' AS INTEGER) AS code, rpc.payload->>'message' AS message,
        reqs.what AS related, rpc.rpc_id
    FROM rpc ASOF LEFT JOIN reqs ON rpc.session_id = reqs.session_id
        AND rpc.rpc_id = reqs.rpc_id AND rpc.direction = reqs.answer_dir AND rpc.seq > reqs.seq
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
        WHERE kind = 'invalid' OR (kind = 'stderr' AND byte_len > 0)
           OR (kind = 'lifecycle' AND method IN ('proxy_error', 'recording_gap', 'client_hangup',
                                                 'spawn_failed', 'exit'))
    )
    WHERE source <> 'exit' OR coalesce(code, 0) <> 0
)
SELECT a.session_id, t.turn, a.ts, a.source, a.direction, a.code, a.message, a.related,
    a.rpc_id, a.seq
FROM all_errors a
ASOF LEFT JOIN turn_of t ON a.session_id = t.session_id AND a.seq >= t.seq
"""

VIEW_SQL: list[tuple[str, str]] = [
    ("wr_events", WR_EVENTS),
    ("token_usage", TOKEN_USAGE),
    ("steps", STEPS),
    ("turns", TURNS),
    ("requests", REQUESTS),
    ("tool_calls", TOOL_CALLS),
    ("errors", ERRORS),
]
VIEW_NAMES = [name for name, _ in VIEW_SQL]


def install_views(con: duckdb.DuckDBPyConnection, temp: bool = False,
                  materialize: bool = False) -> None:
    """Create (or replace) every analysis view. temp=True keeps them in the connection only,
    which is how read-only files and unions of files get them. materialize=True (with temp)
    computes `wr_events` once into a temp table: every other view reads it several times, and
    at a million frames each recomputation costs a scan of the payload column."""
    kw = "TEMP" if temp else ""
    # Over a materialised wr_events, re-scanning it (with filters pushed down) beats copying
    # the rows a view needs; over the plain view, computing it once per view is what counts.
    cte = "NOT MATERIALIZED" if materialize and temp else "MATERIALIZED"
    for name, sql in VIEW_SQL:
        sql = sql.replace("{temp}", kw).replace("{materialized}", cte)
        if name == "wr_events" and materialize and temp:
            sql = sql.replace("CREATE OR REPLACE TEMP VIEW wr_events AS",
                              "CREATE OR REPLACE TEMP TABLE wr_events AS", 1)
        con.execute(sql)
    if not temp:
        con.execute("INSERT OR REPLACE INTO meta VALUES ('analysis_views', ?)", [VIEWS_VERSION])
