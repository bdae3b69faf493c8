-- Wire: the agent's requests to the client (ApprovalRequest, QuestionRequest,
-- ToolCallRequest, HookRequest) with the client's answer, or the agent's own resolution
WITH wire_rq AS (
    SELECT session_id, seq, ts, mono_ns, turn, step, rpc_id AS request_id, type, payload, history
    FROM wr_events WHERE is_request
), wire_ans AS (
    SELECT session_id, seq, ts, mono_ns, rpc_id, kind, payload FROM wr_events
    WHERE direction = 'c2a' AND kind IN ('response', 'error') AND rpc_id IS NOT NULL
), wire_pairs AS (
    -- An answer belongs to the latest request with its id before it (`replay` re-sends requests
    -- with their original ids). A client that answers within microseconds can have its answer
    -- recorded before the request (the relay writes to the client first, then records), so
    -- an answer with no earlier request takes the first one after it. Two ASOF joins, not a
    -- join on the id: with ids reused thousands of times that join grows with their square.
    SELECT wire_ans.*, coalesce(before.seq, after.seq) AS req_seq
    FROM wire_ans
    ASOF LEFT JOIN (SELECT session_id, request_id, seq FROM wire_rq) before
        ON wire_ans.session_id = before.session_id AND wire_ans.rpc_id = before.request_id
        AND wire_ans.seq > before.seq
    ASOF LEFT JOIN (SELECT session_id, request_id, seq FROM wire_rq) after
        ON wire_ans.session_id = after.session_id AND wire_ans.rpc_id = after.request_id
        AND wire_ans.seq < after.seq
), wire_matched AS (
    SELECT * FROM wire_pairs WHERE req_seq IS NOT NULL
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
                          wire_rq.payload->>'$.input_data.tool_call_id')
        END AS tool_call_id,
        wire_rq.payload->>'agent_id' AS agent_id,
        CASE wire_rq.type
            WHEN 'ApprovalRequest' THEN wire_rq.payload->>'description'
            WHEN 'ToolCallRequest' THEN wire_rq.payload->>'name'
            WHEN 'QuestionRequest' THEN wire_rq.payload->>'$.questions[0].question'
            WHEN 'HookRequest' THEN concat_ws(' ', wire_rq.payload->>'event', wire_rq.payload->>'target')
        END AS subject,
        CASE wire_rq.type WHEN 'ApprovalRequest' THEN wire_rq.payload->>'sender'
            WHEN 'ToolCallRequest' THEN wire_rq.payload->>'name' END AS tool_name,
        wire_rq.ts AS requested_at, wire_matched.ts AS answered_at,
        CASE WHEN wire_matched.mono_ns IS NOT NULL
             THEN wr_wait_ms(wire_rq.mono_ns, wire_matched.mono_ns) END AS wait_ms,
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
                CASE WHEN (wire_matched.payload->>'$.return_value.is_error')::BOOLEAN THEN 'tool_error'
                     WHEN (wire_matched.payload->'return_value') IS NULL THEN 'invalid' ELSE 'ok' END
            WHEN wire_rq.type = 'HookRequest' THEN coalesce(wire_matched.payload->>'action', 'allow')
            ELSE 'answered'
        END AS outcome,
        CASE WHEN wire_matched.kind IS NOT NULL THEN 'client'
             WHEN wire_resolved.response IS NOT NULL THEN 'agent' END AS resolved_by,
        wire_resolved.response AS agent_response, wire_resolved.ts AS agent_resolved_at,
        (wire_resolved.mono_ns - wire_rq.mono_ns) / 1e6 AS agent_resolved_ms,
        wire_rq.history, wire_rq.seq
    FROM wire_rq
    LEFT JOIN wire_matched ON wire_matched.session_id = wire_rq.session_id
        AND wire_matched.req_seq = wire_rq.seq
    LEFT JOIN wire_resolved ON wire_rq.type = 'ApprovalRequest'
        AND wire_resolved.session_id = wire_rq.session_id
        AND wire_resolved.request_id = wire_rq.request_id AND wire_resolved.seq > wire_rq.seq
    LEFT JOIN session_source ON session_source.session_id = wire_rq.session_id
)
SELECT * FROM wire_requests
