-- MCP: what each tools/call returned (wire-diff compares it; not an analysis view): the answer
-- of its last round (a result's content, or an error)
SELECT session_id, max(seq) AS seq, any_value(root_id) AS tool_call_id,
    arg_max(answer, seq)::VARCHAR AS output, NULL::VARCHAR AS message
FROM wr_rounds WHERE method = 'tools/call'
GROUP BY session_id, root_seq
