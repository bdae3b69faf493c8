-- ACP: every request of the agent to the client (session/request_permission, fs/*,
-- terminal/*, ...) with its answer
SELECT session_id, protocol, turn, rpc_id AS request_id, method AS type, 'request' AS via,
    CASE WHEN method = 'session/request_permission'
         THEN payload->>'$.toolCall.toolCallId' END AS tool_call_id,
    wr_acp_subject(method, payload) AS subject,
    CASE WHEN method = 'session/request_permission'
         THEN wr_acp_call_name(payload->>'$.toolCall.title', payload->>'$.toolCall.title',
                              payload->>'$.toolCall.kind') END
        AS tool_name,
    ts AS requested_at, answered_at,
    CASE WHEN answer_mono IS NOT NULL THEN wr_wait_ms(mono_ns, answer_mono) END AS wait_ms,
    answer_kind, answer,
    wr_acp_outcome(method, answer_kind, answer, payload) AS outcome,
    CASE WHEN answer_kind IS NOT NULL THEN 'client' END AS resolved_by,
    seq
FROM wr_rpc WHERE protocol = 'acp' AND direction = 'a2c'
