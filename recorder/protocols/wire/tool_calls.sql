-- Wire: a ToolCall (its arguments continued by ToolCallParts) ends with the first ToolResult
-- with its id, in the same agent; approvals and external tool requests come from `requests`.
-- Calls re-sent by `replay` (history) pair only with history, live ones only with live ones:
-- `scope` is the agent and the replay
WITH tool_events AS MATERIALIZED (
    SELECT session_id, seq, ts, mono_ns, turn, step, agent_id, subagent_type, parent_tool_call_id,
        type, payload, status, history, history_seq,
        coalesce(agent_id, '') || coalesce('#' || history_seq::VARCHAR, '') AS scope
    FROM wr_events
    WHERE direction = 'a2c' AND (type IN ('ToolCall', 'ToolResult', 'ToolCallPart')
                                 OR agent_id IS NOT NULL)
), wire_calls AS (
    SELECT session_id, seq, ts, mono_ns, turn, step, agent_id, subagent_type, parent_tool_call_id,
        history, history_seq, call['id'] AS tool_call_id, call['function']['name'] AS tool_name,
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
    -- the first approval (external tool) request for each call of a turn, in its agent
    SELECT session_id, turn, history, coalesce(agent_id, '') AS scope, type, tool_call_id,
        request_id, wait_ms, outcome, resolved_by, answer->>'feedback' AS feedback
    FROM requests
    WHERE type IN ('ApprovalRequest', 'ToolCallRequest')
    QUALIFY row_number() OVER (PARTITION BY session_id, turn, history, scope, type, tool_call_id
                               ORDER BY seq) = 1
), appr AS (
    SELECT * FROM asked WHERE type = 'ApprovalRequest'
), ext AS (
    SELECT * FROM asked WHERE type = 'ToolCallRequest'
), sub AS (
    SELECT session_id, parent_tool_call_id, coalesce(history_seq, 0) AS block,
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
        wire_calls.history,
        wire_calls.seq
    FROM wire_calls
    LEFT JOIN wire_parts ON wire_parts.session_id = wire_calls.session_id
        AND wire_parts.scope = wire_calls.scope AND wire_parts.owner_seq = wire_calls.seq
    LEFT JOIN wire_res ON wire_res.session_id = wire_calls.session_id
        AND wire_res.seq = wire_calls.seq
    LEFT JOIN appr ON appr.type = 'ApprovalRequest' AND appr.session_id = wire_calls.session_id
        AND appr.turn IS NOT DISTINCT FROM wire_calls.turn AND appr.history = wire_calls.history
        AND appr.scope = coalesce(wire_calls.agent_id, '')
        AND appr.tool_call_id = wire_calls.tool_call_id
    LEFT JOIN ext ON ext.session_id = wire_calls.session_id
        AND ext.turn IS NOT DISTINCT FROM wire_calls.turn AND ext.history = wire_calls.history
        AND ext.scope = coalesce(wire_calls.agent_id, '')
        AND ext.tool_call_id = wire_calls.tool_call_id
    LEFT JOIN sub ON wire_calls.agent_id IS NULL AND sub.session_id = wire_calls.session_id
        AND sub.parent_tool_call_id = wire_calls.tool_call_id
        AND sub.block = coalesce(wire_calls.history_seq, 0)
)
SELECT * FROM wire_tool_calls
