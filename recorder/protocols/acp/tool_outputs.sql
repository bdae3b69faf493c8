-- ACP: what each tool call returned (wire-diff compares it; not an analysis view): the raw
-- output, else the text content, of the update that finished it
SELECT session_id, seq, payload->>'$.update.toolCallId' AS tool_call_id,
    coalesce((payload->'$.update.rawOutput')::VARCHAR,
             array_to_string(json_extract_string(payload, '$.update.content[*].content.text'), ''))
        AS output,
    NULL::VARCHAR AS message
FROM wr_events
WHERE protocol = 'acp' AND direction = 'a2c' AND method = 'session/update'
  AND type IN ('tool_call', 'tool_call_update')
  AND (payload->>'$.update.status') IN ('completed', 'failed')
