-- MCP: the server's requests to the client (sampling/createMessage, roots/list,
-- elicitation/create, ping) with their answers, and, in the 2026-07-28 era, the inputRequests
-- of an input_required result, answered by the inputResponses of the client's retry
WITH rpc_requests AS (
    SELECT session_id, protocol, turn, rpc_id AS request_id, method AS type, 'request' AS via,
        wr_mcp_subject(method, payload) AS subject,
        ts AS requested_at, answered_at,
        CASE WHEN answer_mono IS NOT NULL THEN wr_wait_ms(mono_ns, answer_mono) END AS wait_ms,
        answer_kind, answer,
        wr_mcp_outcome(method, answer_kind, answer) AS outcome,
        CASE WHEN answer_kind IS NOT NULL THEN 'client' END AS resolved_by,
        seq
    FROM wr_rpc WHERE protocol = 'mcp' AND direction = 'a2c'
), input_entries AS (
    SELECT session_id, turn, answer_seq, answered_at, answer_mono, root_id, method, target,
        next_ts, next_mono, next_payload,
        unnest(map_entries(CAST(answer->'inputRequests' AS MAP(VARCHAR, JSON)))) AS entry
    FROM wr_rounds WHERE result_type = 'input_required'
), input_requests AS (
    SELECT session_id, 'mcp' AS protocol, turn, entry['key'] AS request_id,
        entry['value']->>'method' AS type, 'input_required' AS via,
        CASE WHEN method = 'tools/call' THEN root_id END AS tool_call_id,
        wr_mcp_subject(entry['value']->>'method', entry['value']->'params') AS subject,
        CASE WHEN method = 'tools/call' THEN target END AS tool_name,
        answered_at AS requested_at, next_ts AS answered_at,
        CASE WHEN next_mono IS NOT NULL THEN wr_wait_ms(answer_mono, next_mono) END AS wait_ms,
        answer_kind, answer,
        wr_mcp_outcome(type, answer_kind, answer) AS outcome,
        CASE WHEN answer_kind IS NOT NULL THEN 'client' END AS resolved_by,
        answer_seq AS seq
    FROM (SELECT *,
            CAST(next_payload->'inputResponses' AS MAP(VARCHAR, JSON))[entry['key']] AS answer,
            CASE WHEN CAST(next_payload->'inputResponses' AS MAP(VARCHAR, JSON))[entry['key']]
                      IS NOT NULL THEN 'response' END AS answer_kind,
            entry['value']->>'method' AS type
          FROM input_entries)
)
SELECT * FROM rpc_requests
UNION ALL BY NAME SELECT * FROM input_requests
