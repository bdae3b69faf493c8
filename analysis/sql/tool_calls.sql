-- tool_calls: one row per tool call (Wire ToolCall, ACP tool_call update, MCP tools/call).
-- Its columns and types; each protocol adds its rows (UNION ALL BY NAME: a column a protocol
-- does not have stays NULL).
SELECT NULL::VARCHAR AS session_id, NULL::VARCHAR AS protocol, NULL::INTEGER AS turn,
    NULL::INTEGER AS step, NULL::VARCHAR AS tool_call_id, NULL::VARCHAR AS tool_name,
    NULL::VARCHAR AS arguments, NULL::TIMESTAMP AS started_at, NULL::TIMESTAMP AS finished_at,
    NULL::DOUBLE AS duration_ms, NULL::VARCHAR AS status, NULL::BOOLEAN AS is_error,
    NULL::BIGINT AS output_chars, NULL::VARCHAR AS message, NULL::VARCHAR AS title,
    NULL::VARCHAR AS kind, NULL::BIGINT AS updates, NULL::BOOLEAN AS approval_requested,
    NULL::VARCHAR AS approval, NULL::VARCHAR AS approval_resolved_by,
    NULL::VARCHAR AS approval_feedback, NULL::DOUBLE AS approval_wait_ms,
    NULL::BOOLEAN AS external, NULL::VARCHAR AS external_outcome,
    NULL::DOUBLE AS external_wait_ms, NULL::BIGINT AS input_rounds,
    NULL::DOUBLE AS input_wait_ms, NULL::VARCHAR AS agent_id, NULL::VARCHAR AS subagent_type,
    NULL::VARCHAR AS parent_tool_call_id, NULL::BIGINT AS subagent_events,
    NULL::BIGINT AS subagent_tool_calls, NULL::BIGINT AS subagent_tokens,
    NULL::BOOLEAN AS history, NULL::BIGINT AS seq
WHERE false
