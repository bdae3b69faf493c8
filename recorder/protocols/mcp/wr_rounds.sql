-- MCP 2026-07-28 rounds: a call answered with input_required, its retries and their links
WITH RECURSIVE mcp_calls AS MATERIALIZED (
    SELECT session_id, seq, ts, mono_ns, method, rpc_id, turn, payload,
        answer_seq, answered_at, answer_mono, answer_kind, answer,
        coalesce(payload->>'name', payload->>'uri') AS target,
        payload->>'requestState' AS state_in,
        (payload->'inputResponses') IS NOT NULL AS has_responses,
        CASE WHEN answer_kind = 'response' THEN coalesce(answer->>'resultType', 'complete') END
            AS result_type,
        answer->>'requestState' AS state_out
    FROM wr_rpc
    WHERE protocol = 'mcp' AND direction = 'c2a'
      AND method IN ('tools/call', 'prompts/get', 'resources/read')
), mcp_waiting AS (
    -- the results a retry can answer
    SELECT session_id, seq, method, state_out, coalesce(target, '') AS target_key
    FROM mcp_calls WHERE result_type = 'input_required'
), mcp_linked AS MATERIALIZED (
    -- a retry carries the requestState of the input_required result it answers (or, when the
    -- server sent none, answers the latest one for the same tool). ASOF joins keep this linear
    -- however often a state or a tool repeats.
    SELECT mcp_calls.*, coalesce(by_state.seq, by_target.seq) AS parent_seq
    FROM mcp_calls
    ASOF LEFT JOIN mcp_waiting by_state ON by_state.session_id = mcp_calls.session_id
        AND by_state.method = mcp_calls.method AND by_state.state_out = mcp_calls.state_in
        AND mcp_calls.seq > by_state.seq
    ASOF LEFT JOIN (SELECT * FROM mcp_waiting WHERE state_out IS NULL) by_target
        ON by_target.session_id = mcp_calls.session_id
        AND by_target.method = mcp_calls.method
        AND by_target.target_key = CASE WHEN mcp_calls.state_in IS NULL
                                             AND mcp_calls.has_responses
                                        THEN coalesce(mcp_calls.target, '') END
        AND mcp_calls.seq > by_target.seq
), mcp_chain AS (
    SELECT session_id, seq, seq AS root_seq, 0 AS round FROM mcp_linked WHERE parent_seq IS NULL
    UNION ALL
    SELECT mcp_linked.session_id, mcp_linked.seq, mcp_chain.root_seq, mcp_chain.round + 1
    FROM mcp_linked JOIN mcp_chain ON mcp_linked.session_id = mcp_chain.session_id
        AND mcp_linked.parent_seq = mcp_chain.seq
), mcp_next AS (
    SELECT session_id, parent_seq, min(seq) AS next_seq
    FROM mcp_linked WHERE parent_seq IS NOT NULL GROUP BY ALL
)
SELECT mcp_linked.*, mcp_chain.root_seq, mcp_chain.round, mcp_root.rpc_id AS root_id,
    retry.seq AS next_seq, retry.ts AS next_ts, retry.mono_ns AS next_mono,
    retry.payload AS next_payload
FROM mcp_linked
JOIN mcp_chain ON mcp_chain.session_id = mcp_linked.session_id AND mcp_chain.seq = mcp_linked.seq
JOIN mcp_linked mcp_root ON mcp_root.session_id = mcp_chain.session_id
    AND mcp_root.seq = mcp_chain.root_seq
LEFT JOIN mcp_next ON mcp_next.session_id = mcp_linked.session_id
    AND mcp_next.parent_seq = mcp_linked.seq
LEFT JOIN mcp_linked retry ON retry.session_id = mcp_next.session_id
    AND retry.seq = mcp_next.next_seq
