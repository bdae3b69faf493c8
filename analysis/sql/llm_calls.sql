-- llm_calls: one row per model call of a session recorded with its model leg (wire-proxy --llm).
-- The exchanges are the `llm_request`/`llm_response` lifecycle rows (recorder/llm_leg.py); one
-- that sends the same body as the one before (the client library's retry after an error) is
-- another attempt of the same call. A call belongs to the step (and turn) whose usage names the
-- message id the model gave (steps.message_id); else to the last step that began before its
-- first request (the relay and the model leg are read by different threads, so that order can
-- be off by a frame when the agent asks its model at once after announcing the step).
WITH ex AS (
    SELECT session_id, seq, ts, method, payload FROM frames
    WHERE direction = 'proxy' AND kind = 'lifecycle' AND method IN ('llm_request', 'llm_response')
), req AS (
    SELECT session_id, seq, ts, CAST(payload->>'n' AS INTEGER) AS n,
        payload->>'method' AS http_method, payload->>'path' AS path,
        payload->>'upstream' AS upstream,
        payload->>'sha256' AS body_sha256,
        CAST(payload->>'bytes' AS BIGINT) AS request_bytes
    FROM ex WHERE method = 'llm_request'
), res AS (
    SELECT session_id, CAST(payload->>'n' AS INTEGER) AS n, ts AS ended_at,
        CAST(payload->>'status' AS INTEGER) AS status,
        CAST(payload->>'first_byte_ms' AS DOUBLE) AS first_byte_ms,
        CAST(payload->>'duration_ms' AS DOUBLE) AS duration_ms,
        payload->>'error' AS error,
        CAST(payload->>'bytes' AS BIGINT) AS response_bytes,
        payload->>'$.summary.model' AS model,
        payload->>'$.summary.message_id' AS message_id,
        payload->>'$.summary.finish_reason' AS finish_reason,
        CAST(payload->>'$.summary.first_token_ms' AS DOUBLE) AS first_token_ms,
        CAST(payload->>'$.summary.usage.input_other' AS BIGINT) AS input_other,
        CAST(payload->>'$.summary.usage.output' AS BIGINT) AS output,
        CAST(payload->>'$.summary.usage.input_cache_read' AS BIGINT) AS input_cache_read,
        CAST(payload->>'$.summary.usage.input_cache_creation' AS BIGINT) AS input_cache_creation,
        payload->>'$.summary.error' AS provider_error
    FROM ex WHERE method = 'llm_response'
), attempts AS (
    -- res's columns by name: DuckDB writes an EXCLUDE list back in another order (grow_blocks)
    SELECT req.*,
        res.ended_at, res.status, res.first_byte_ms, res.duration_ms, res.error,
        res.response_bytes, res.model, res.message_id, res.finish_reason, res.first_token_ms,
        res.input_other, res.output, res.input_cache_read, res.input_cache_creation,
        res.provider_error,
        CASE WHEN req.body_sha256 = lag(req.body_sha256) OVER w THEN 0 ELSE 1 END AS starts_call
    FROM req LEFT JOIN res USING (session_id, n)
    WINDOW w AS (PARTITION BY req.session_id ORDER BY req.n)
), numbered AS (
    SELECT *, sum(starts_call) OVER (PARTITION BY session_id ORDER BY n) AS call
    FROM attempts
), calls AS (
    SELECT session_id, CAST(call AS INTEGER) AS call,
        min(seq) AS seq, min(ts) AS started_at, arg_max(ended_at, n) AS ended_at,
        min(n) AS first_exchange, max(n) AS last_exchange,
        CAST(count(*) - 1 AS BIGINT) AS retries,
        list(status ORDER BY n) AS statuses,
        arg_max(status, n) AS status, arg_max(error, n) AS error,
        arg_max(model, n) AS model,
        arg_max(message_id, n) AS message_id, arg_max(finish_reason, n) AS finish_reason,
        arg_max(first_token_ms, n) AS time_to_first_token_ms,
        arg_max(first_byte_ms, n) AS time_to_first_byte_ms,
        arg_max(duration_ms, n) AS duration_ms,
        arg_max(input_other, n) AS input_other, arg_max(output, n) AS output,
        arg_max(input_cache_read, n) AS input_cache_read,
        arg_max(input_cache_creation, n) AS input_cache_creation,
        arg_max(request_bytes, n) AS request_bytes, arg_max(response_bytes, n) AS response_bytes,
        arg_max(upstream, n) AS upstream, arg_max(path, n) AS path
    FROM numbered GROUP BY session_id, call
)
SELECT c.session_id, ses.protocol, c.call, coalesce(by_id.turn, st.turn) AS turn,
    coalesce(by_id.step, st.step) AS step, c.started_at, c.ended_at, c.model, c.status,
    c.statuses, c.retries, c.finish_reason, c.time_to_first_token_ms, c.time_to_first_byte_ms,
    c.duration_ms, c.input_other, c.output, c.input_cache_read, c.input_cache_creation,
    c.message_id, c.error, c.request_bytes, c.response_bytes, c.upstream, c.path,
    c.first_exchange, c.last_exchange, c.seq
FROM calls c
LEFT JOIN (SELECT session_id, any_value(protocol) AS protocol FROM sessions GROUP BY session_id) ses
    ON ses.session_id = c.session_id
LEFT JOIN (SELECT session_id, message_id, any_value(turn) AS turn, any_value(step) AS step
           FROM steps WHERE message_id IS NOT NULL GROUP BY session_id, message_id
           HAVING count(*) = 1) by_id
    ON by_id.session_id = c.session_id AND by_id.message_id = c.message_id
ASOF LEFT JOIN (SELECT session_id, turn, step, seq FROM steps) st
    ON st.session_id = c.session_id AND c.seq >= st.seq
