-- ACP: a tool_call update starts a call, its tool_call_updates change its status; it ends with
-- the first update whose status is completed or failed
WITH acp_updates AS MATERIALIZED (
    SELECT session_id, seq, ts, mono_ns, turn, type,
        payload->'update' AS upd,
        payload->>'$.update.toolCallId' AS tcid,
        payload->>'$.update.title' AS title,
        payload->>'$.update.kind' AS tool_kind,
        payload->>'$.update.status' AS tool_status
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
        arg_max(tool_kind, seq) FILTER (WHERE tool_kind IS NOT NULL) AS last_kind,
        -- Kimi Code 2.x: the arguments come later, streamed as the text of untitled
        -- in_progress updates, then whole as `rawInput`
        arg_min((upd->'rawInput')::VARCHAR, seq) FILTER (WHERE (upd->'rawInput') IS NOT NULL)
            AS raw_input,
        arg_max(array_to_string(json_extract_string(upd, '$.content[*].content.text'), ''), seq)
            FILTER (WHERE tool_status = 'in_progress' AND title IS NULL
                    AND len(json_extract_string(upd, '$.content[*].content.text')) > 0)
            AS streamed_input
    FROM acp_later GROUP BY ALL
), appr AS (
    -- the first permission request for each tool call of a turn
    SELECT session_id, turn, type, tool_call_id, request_id, wait_ms, outcome, resolved_by
    FROM requests
    WHERE type = 'session/request_permission'
    QUALIFY row_number() OVER (PARTITION BY session_id, turn, coalesce(agent_id, ''), tool_call_id
                               ORDER BY seq) = 1
), acp_tool_calls AS (
    SELECT acp_starts.session_id, 'acp' AS protocol, acp_starts.turn,
        acp_starts.tcid AS tool_call_id,
        wr_acp_call_name(acp_starts.title, coalesce(acp_agg.last_title, acp_starts.title),
                         coalesce(acp_agg.last_kind, acp_starts.tool_kind)) AS tool_name,
        coalesce((acp_starts.upd->'rawInput')::VARCHAR,
                 nullif(array_to_string(json_extract_string(acp_starts.upd, '$.content[*].content.text'), ''), ''),
                 acp_agg.raw_input, nullif(acp_agg.streamed_input, ''))
            AS arguments,
        acp_starts.ts AS started_at, acp_end.ts AS finished_at,
        (acp_end.mono_ns - acp_starts.mono_ns) / 1e6 AS duration_ms,
        -- a call that never finished in a turn the client cancelled was cancelled with it
        CASE WHEN coalesce(acp_agg.last_status, acp_starts.tool_status) IN ('pending', 'in_progress')
                  -- parenthesised: DuckDB 1.4 and 1.5 read `a AND j->>'k' = 'v'` as a ->> of the AND
                  AND (acp_prompt.answer->>'stopReason') = 'cancelled' THEN 'cancelled'
             ELSE coalesce(acp_agg.last_status, acp_starts.tool_status) END AS status,
        CASE coalesce(acp_agg.last_status, acp_starts.tool_status)
            WHEN 'failed' THEN true WHEN 'completed' THEN false END AS is_error,
        -- (DuckDB 1.4 joins an empty list to NULL, 2.0 to '')
        length(coalesce((acp_end.upd->'rawOutput')::VARCHAR,
                        array_to_string(json_extract_string(acp_end.upd, '$.content[*].content.text'), ''),
                        '')) AS output_chars,
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
)
SELECT * FROM acp_tool_calls
