-- anomalies: frames that did not parse or broke the protocol (an id reused while pending, a
-- method of another protocol), with the turn they happened in
WITH turn_of AS (
    SELECT session_id, seq, turn FROM wr_events WHERE seq = turn_seq AND NOT history
), protos AS (
    SELECT session_id, any_value(protocol) AS protocol FROM sessions GROUP BY session_id
), odd AS (
    SELECT session_id, seq, ts, direction, kind, method, rpc_id, byte_len, anomaly, parse_error
    FROM frames WHERE anomaly IS NOT NULL OR kind = 'invalid'
)
SELECT odd.session_id, protos.protocol, turn_of.turn, odd.seq, odd.ts, odd.direction, odd.kind,
    odd.method, odd.rpc_id, concat_ws('; ', odd.parse_error, odd.anomaly) AS problem,
    odd.anomaly, odd.parse_error, odd.byte_len
FROM odd
ASOF LEFT JOIN turn_of ON odd.session_id = turn_of.session_id AND odd.seq >= turn_of.seq
LEFT JOIN protos ON protos.session_id = odd.session_id
