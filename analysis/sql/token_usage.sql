-- token_usage: one row per StatusUpdate with token counts (main agent and subagents).
-- Its columns and types; each protocol that reports tokens adds its rows.
SELECT NULL::VARCHAR AS session_id, NULL::VARCHAR AS protocol, NULL::BIGINT AS seq,
    NULL::TIMESTAMP AS ts, NULL::INTEGER AS turn, NULL::INTEGER AS step,
    NULL::VARCHAR AS agent_id, NULL::VARCHAR AS subagent_type,
    NULL::VARCHAR AS parent_tool_call_id, NULL::VARCHAR AS message_id,
    NULL::BIGINT AS input_other, NULL::BIGINT AS output, NULL::BIGINT AS input_cache_read,
    NULL::BIGINT AS input_cache_creation, NULL::BIGINT AS total,
    NULL::BIGINT AS context_tokens, NULL::BIGINT AS max_context_tokens,
    NULL::DOUBLE AS context_usage, NULL::BOOLEAN AS history
WHERE false
