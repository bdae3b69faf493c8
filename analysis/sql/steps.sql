-- steps: one row per LLM step of the main agent, with its token sums and what happened in it.
-- Its columns and types; each protocol that has steps adds its rows.
SELECT NULL::VARCHAR AS session_id, NULL::VARCHAR AS protocol, NULL::INTEGER AS turn,
    NULL::INTEGER AS step, NULL::TIMESTAMP AS started_at, NULL::TIMESTAMP AS ended_at,
    NULL::DOUBLE AS duration_ms, NULL::BIGINT AS input_other, NULL::BIGINT AS output,
    NULL::BIGINT AS input_cache_read, NULL::BIGINT AS input_cache_creation,
    NULL::BIGINT AS total_tokens, NULL::BIGINT AS subagent_tokens,
    NULL::BIGINT AS context_tokens, NULL::DOUBLE AS context_usage, NULL::VARCHAR AS message_id,
    NULL::BIGINT AS status_updates, NULL::BIGINT AS tool_calls,
    NULL::BIGINT AS subagent_tool_calls, NULL::BOOLEAN AS interrupted, NULL::BIGINT AS retries,
    NULL::BOOLEAN AS retried, NULL::BOOLEAN AS history,
    NULL::BIGINT AS seq
WHERE false
