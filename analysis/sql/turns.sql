-- turns: one row per user prompt (Wire prompt, ACP session/prompt; MCP has none).
-- Its columns and types; each protocol adds its rows (UNION ALL BY NAME: a column a protocol
-- does not have stays NULL).
SELECT NULL::VARCHAR AS session_id, NULL::VARCHAR AS protocol, NULL::INTEGER AS turn,
    NULL::VARCHAR AS prompt_id, NULL::VARCHAR AS user_input, NULL::TIMESTAMP AS started_at,
    NULL::TIMESTAMP AS ended_at, NULL::DOUBLE AS duration_ms, NULL::TIMESTAMP AS prompt_at,
    NULL::TIMESTAMP AS responded_at, NULL::DOUBLE AS response_ms, NULL::VARCHAR AS status,
    NULL::VARCHAR AS status_source, NULL::VARCHAR AS stop_reason, NULL::INTEGER AS error_code,
    NULL::VARCHAR AS error_message, NULL::BIGINT AS steps, NULL::BIGINT AS tool_calls,
    NULL::BIGINT AS subagent_tool_calls, NULL::BIGINT AS approvals, NULL::BIGINT AS retries,
    NULL::BIGINT AS steers, NULL::BIGINT AS input_other, NULL::BIGINT AS output,
    NULL::BIGINT AS input_cache_read, NULL::BIGINT AS input_cache_creation,
    NULL::BIGINT AS total_tokens, NULL::BIGINT AS subagent_tokens, NULL::BOOLEAN AS history,
    NULL::BIGINT AS seq
WHERE false
