-- MCP: a tools/call and its answer; in the 2026-07-28 era a logical call runs from the first
-- request through its input_required rounds to the final (complete) result
WITH mcp_logical AS (
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
        CASE WHEN cancel_mono IS NOT NULL THEN wr_wait_ms(start_mono, cancel_mono)
             WHEN last_answer_kind IS NOT NULL AND last_result_type IS DISTINCT FROM 'input_required'
             THEN wr_wait_ms(start_mono, last_answer_mono) END AS duration_ms,
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
)
SELECT * FROM mcp_tool_calls
