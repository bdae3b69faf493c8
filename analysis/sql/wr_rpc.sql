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
    SELECT session_id, seq, ts, mono_ns, direction, rpc_id, kind, payload
    FROM wr_rpc_events
    WHERE kind IN ('response', 'error') AND rpc_id IS NOT NULL
), rpc_pairs AS (
    SELECT rpc_answers.session_id, rpc_answers.seq, rpc_requests.seq AS req_seq,
        row_number() OVER (
            PARTITION BY rpc_answers.session_id, rpc_answers.seq
            ORDER BY rpc_requests.seq < rpc_answers.seq DESC,
                     CASE WHEN rpc_requests.seq < rpc_answers.seq THEN -rpc_requests.seq
                          ELSE rpc_requests.seq END) AS pick
    FROM rpc_answers JOIN rpc_requests ON rpc_answers.session_id = rpc_requests.session_id
        AND rpc_answers.rpc_id = rpc_requests.rpc_id
        AND rpc_answers.direction <> rpc_requests.direction
), rpc_first AS (
    SELECT session_id, seq, req_seq FROM rpc_pairs WHERE pick = 1
    QUALIFY row_number() OVER (PARTITION BY session_id, req_seq ORDER BY seq) = 1
), rpc_second AS (
    SELECT rpc_pairs.session_id, rpc_pairs.seq, rpc_pairs.req_seq
    FROM rpc_pairs
    ANTI JOIN rpc_first answered ON answered.session_id = rpc_pairs.session_id
        AND answered.seq = rpc_pairs.seq
    ANTI JOIN rpc_first asked ON asked.session_id = rpc_pairs.session_id
        AND asked.req_seq = rpc_pairs.req_seq
    WHERE rpc_pairs.req_seq < rpc_pairs.seq
    QUALIFY row_number() OVER (PARTITION BY rpc_pairs.session_id, rpc_pairs.seq
                               ORDER BY rpc_pairs.req_seq DESC) = 1
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
