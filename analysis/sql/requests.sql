-- requests: whatever the agent (MCP: the server) asked the client, with the client's answer.
-- Its columns and types; each protocol adds its rows (UNION ALL BY NAME: a column a protocol
-- does not have stays NULL).
SELECT NULL::VARCHAR AS session_id, NULL::VARCHAR AS protocol, NULL::INTEGER AS turn,
    NULL::INTEGER AS step, NULL::VARCHAR AS request_id, NULL::VARCHAR AS type,
    NULL::VARCHAR AS via, NULL::VARCHAR AS tool_call_id, NULL::VARCHAR AS agent_id,
    NULL::VARCHAR AS subject, NULL::VARCHAR AS tool_name, NULL::TIMESTAMP AS requested_at,
    NULL::TIMESTAMP AS answered_at, NULL::DOUBLE AS wait_ms, NULL::VARCHAR AS answer_kind,
    NULL::JSON AS answer, NULL::VARCHAR AS outcome, NULL::VARCHAR AS resolved_by,
    NULL::VARCHAR AS agent_response, NULL::TIMESTAMP AS agent_resolved_at,
    NULL::DOUBLE AS agent_resolved_ms, NULL::BOOLEAN AS history,
    NULL::BIGINT AS seq
WHERE false
