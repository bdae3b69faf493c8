-- Wire: what each main-agent tool call returned (wire-diff compares it; not an analysis view):
-- the ToolResult's output (content parts as their JSON text) and message
SELECT session_id, seq, payload->>'tool_call_id' AS tool_call_id,
    CASE WHEN json_type(payload->'$.return_value.output') = 'VARCHAR'
         THEN payload->>'$.return_value.output'
         ELSE (payload->'$.return_value.output')::VARCHAR END AS output,
    payload->>'$.return_value.message' AS message
FROM wr_events
WHERE direction = 'a2c' AND type = 'ToolResult' AND agent_id IS NULL AND NOT history
