-- ACP: a `usage_update` (Kimi Code 2.x) says how full the context is (`used` of `size` tokens),
-- not what one model call cost: it fills the context columns only. It comes after the answer of
-- the prompt it is about (often after the next prompt was sent), so it belongs to the last
-- prompt answered before it.
WITH acp_usage AS (
    SELECT session_id, seq, ts, history,
        TRY_CAST(payload->>'$.update.used' AS BIGINT) AS used,
        TRY_CAST(payload->>'$.update.size' AS BIGINT) AS size
    FROM wr_events
    WHERE protocol = 'acp' AND direction = 'a2c' AND method = 'session/update'
      AND type = 'usage_update'
), acp_answered AS (
    SELECT session_id, turn, answer_seq FROM wr_rpc
    WHERE protocol = 'acp' AND direction = 'c2a' AND method = 'session/prompt'
      AND answer_seq IS NOT NULL
)
SELECT acp_usage.session_id, 'acp' AS protocol, acp_usage.seq, acp_usage.ts,
    acp_answered.turn, NULL::INTEGER AS step, NULL::VARCHAR AS agent_id,
    NULL::VARCHAR AS subagent_type, NULL::VARCHAR AS parent_tool_call_id,
    NULL::VARCHAR AS message_id, NULL::BIGINT AS input_other, NULL::BIGINT AS output,
    NULL::BIGINT AS input_cache_read, NULL::BIGINT AS input_cache_creation,
    NULL::BIGINT AS total, acp_usage.used AS context_tokens, acp_usage.size AS max_context_tokens,
    round(acp_usage.used / nullif(acp_usage.size, 0), 4) AS context_usage, acp_usage.history
FROM acp_usage ASOF LEFT JOIN acp_answered ON acp_usage.session_id = acp_answered.session_id
    AND acp_usage.seq > acp_answered.answer_seq
