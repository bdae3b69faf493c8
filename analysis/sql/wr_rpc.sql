-- wr_rpc (internal): the requests of either direction in wr_rpc_events with their answers.
-- Ids count separately per direction there, so an answer goes with a request of the *other*
-- direction: the latest one with its id before it (an id may be reused once answered), else
-- the first one after it (a client answering within microseconds can be recorded before the
-- request, because the relay writes to the peer first and records after). An id reused while
-- pending (an anomaly) leaves a second answer that nobody took: it goes to the latest request
-- before it still unanswered.
WITH rpc_requests AS (
    SELECT session_id, protocol, seq, ts, mono_ns, direction, method, rpc_id, turn, payload
    FROM wr_rpc_events
    WHERE kind = 'request' AND rpc_id IS NOT NULL
), rpc_answers AS (
    SELECT session_id, seq, ts, mono_ns, direction, rpc_id, kind, payload,
        CASE direction WHEN 'c2a' THEN 'a2c' ELSE 'c2a' END AS asked_by
    FROM wr_rpc_events
    WHERE kind IN ('response', 'error') AND rpc_id IS NOT NULL
), rpc_asked AS (
    SELECT session_id, direction, rpc_id, seq FROM rpc_requests
), rpc_first AS (
    -- ASOF joins, never a join on the id alone: a peer that reuses one id thousands of times
    -- would make that join grow with the square of its uses
    SELECT rpc_answers.session_id, rpc_answers.seq, coalesce(before.seq, after.seq) AS req_seq
    FROM rpc_answers
    ASOF LEFT JOIN rpc_asked before ON rpc_answers.session_id = before.session_id
        AND rpc_answers.rpc_id = before.rpc_id AND rpc_answers.asked_by = before.direction
        AND rpc_answers.seq > before.seq
    ASOF LEFT JOIN rpc_asked after ON rpc_answers.session_id = after.session_id
        AND rpc_answers.rpc_id = after.rpc_id AND rpc_answers.asked_by = after.direction
        AND rpc_answers.seq < after.seq
    WHERE coalesce(before.seq, after.seq) IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY rpc_answers.session_id, req_seq
                               ORDER BY rpc_answers.seq) = 1
), rpc_unanswered AS (
    SELECT rpc_asked.* FROM rpc_asked
    ANTI JOIN rpc_first ON rpc_first.session_id = rpc_asked.session_id
        AND rpc_first.req_seq = rpc_asked.seq
), rpc_second AS (
    -- an answer no request took: the latest request before it with its id still unanswered
    SELECT rpc_answers.session_id, rpc_answers.seq, rpc_unanswered.seq AS req_seq
    FROM (SELECT * FROM rpc_answers ANTI JOIN rpc_first ON rpc_first.session_id = rpc_answers.session_id
              AND rpc_first.seq = rpc_answers.seq) rpc_answers
    ASOF JOIN rpc_unanswered ON rpc_answers.session_id = rpc_unanswered.session_id
        AND rpc_answers.rpc_id = rpc_unanswered.rpc_id
        AND rpc_answers.asked_by = rpc_unanswered.direction
        AND rpc_answers.seq > rpc_unanswered.seq
), rpc_matched AS (
    SELECT * FROM rpc_first
    UNION ALL
    SELECT * FROM rpc_second
    QUALIFY row_number() OVER (PARTITION BY session_id, req_seq ORDER BY seq) = 1
)
SELECT rpc_requests.session_id, rpc_requests.protocol, rpc_requests.seq, rpc_requests.ts,
    rpc_requests.mono_ns, rpc_requests.direction, rpc_requests.method, rpc_requests.rpc_id,
    rpc_requests.turn, rpc_requests.payload,
    rpc_answers.seq AS answer_seq, rpc_answers.ts AS answered_at,
    rpc_answers.mono_ns AS answer_mono, rpc_answers.kind AS answer_kind,
    rpc_answers.payload AS answer
FROM rpc_requests
LEFT JOIN rpc_matched ON rpc_matched.session_id = rpc_requests.session_id
    AND rpc_matched.req_seq = rpc_requests.seq
LEFT JOIN rpc_answers ON rpc_answers.session_id = rpc_matched.session_id
    AND rpc_answers.seq = rpc_matched.seq
