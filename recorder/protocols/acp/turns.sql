-- ACP: a turn is a session/prompt request, until its response (stopReason)
WITH acp_prompts AS (
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
        wr_wait_ms(acp_prompts.mono_ns, acp_prompts.answer_mono) AS duration_ms,
        acp_prompts.ts AS prompt_at, acp_prompts.answered_at AS responded_at,
        wr_wait_ms(acp_prompts.mono_ns, acp_prompts.answer_mono) AS response_ms,
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
)
SELECT * FROM acp_turns
