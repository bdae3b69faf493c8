-- wr_rounds (internal): MCP 2026-07-28 rounds. A tools/call (prompts/get, resources/read)
-- answered with resultType "input_required" is retried by the client with a new id, the
-- server's requestState and its inputResponses. One row per request, with the first request of
-- its logical call (root), its round (0 = first request) and the retry that answered it (next).
-- Its columns and types; recorder/protocols/mcp/wr_rounds.sql gives the rows.
SELECT NULL::VARCHAR AS session_id, NULL::BIGINT AS seq, NULL::TIMESTAMP AS ts,
    NULL::BIGINT AS mono_ns, NULL::VARCHAR AS method, NULL::VARCHAR AS rpc_id,
    NULL::INTEGER AS turn, NULL::JSON AS payload, NULL::BIGINT AS answer_seq,
    NULL::TIMESTAMP AS answered_at, NULL::BIGINT AS answer_mono, NULL::VARCHAR AS answer_kind,
    NULL::JSON AS answer, NULL::VARCHAR AS target, NULL::VARCHAR AS state_in,
    NULL::BOOLEAN AS has_responses, NULL::VARCHAR AS result_type, NULL::VARCHAR AS state_out,
    NULL::BIGINT AS parent_seq, NULL::BIGINT AS root_seq, NULL::INTEGER AS round,
    NULL::VARCHAR AS root_id, NULL::BIGINT AS next_seq, NULL::TIMESTAMP AS next_ts,
    NULL::BIGINT AS next_mono, NULL::JSON AS next_payload
WHERE false
