-- errors: everything that went wrong, one row each: JSON-RPC errors (with the request they
-- answer), frames that did not parse, agent stderr output that says something failed (one row
-- per burst of lines: a traceback or a validation dump is one error), proxy trouble, a non-zero
-- exit, and protocol anomalies. An exit the client asked for is no error: a client that ends
-- its session with a signal through the proxy (the vendor's Node SDK sends SIGTERM every time)
-- gets an agent killed by that signal or exiting 128 + its number.
WITH stderr_lines AS (
    SELECT session_id, seq, ts, direction, mono_ns,
        coalesce(try(decode(raw)), 'non-UTF-8 bytes: ' || byte_len::VARCHAR) AS line,
        -- a line more than 100 ms after the one before starts a new burst
        coalesce(mono_ns - lag(mono_ns) OVER (PARTITION BY session_id ORDER BY seq)
                 > 100000000, true) AS starts
    FROM frames WHERE kind = 'stderr' AND byte_len > 0
), stderr_bursts AS (
    SELECT *, sum(starts::INTEGER) OVER (PARTITION BY session_id ORDER BY seq) AS burst
    FROM stderr_lines
), stderr_errors AS (
    SELECT session_id, min(seq) AS seq, arg_min(ts, seq) AS ts, 'stderr' AS direction,
        string_agg(rtrim(line, chr(10) || chr(13)), chr(10) ORDER BY seq) AS message
    FROM stderr_bursts GROUP BY session_id, burst
    -- stderr is the agent's log: only output that says something failed is an error (kimi ends
    -- every session with "To resume this session: ..."; all of it stays in frames)
    HAVING bool_or(wr_says_failed(line))
), reqs AS (
    SELECT session_id, seq, rpc_id,
        CASE direction WHEN 'c2a' THEN 'a2c' ELSE 'c2a' END AS answer_dir,
        coalesce(type, method) AS what
    FROM wr_events WHERE kind = 'request' AND rpc_id IS NOT NULL
), rpc_errors AS (
    SELECT session_id, seq, ts, direction, rpc_id, payload FROM wr_events WHERE kind = 'error'
), turn_of AS (
    -- the frame each turn starts with, for frames that are not in wr_events
    SELECT session_id, seq, turn FROM wr_events WHERE seq = turn_seq AND NOT history
), client_signals AS (
    SELECT session_id, seq, payload->>'signal' AS signal,
        CASE payload->>'signal' WHEN 'SIGHUP' THEN 1 WHEN 'SIGINT' THEN 2 WHEN 'SIGTERM' THEN 15
        END AS signum
    FROM frames WHERE kind = 'lifecycle' AND method = 'signal' AND direction = 'proxy'
), protos AS (
    SELECT session_id, any_value(protocol) AS protocol FROM sessions GROUP BY session_id
), all_errors AS (
    SELECT rpc_errors.session_id, rpc_errors.seq, rpc_errors.ts, rpc_errors.direction,
        'jsonrpc' AS source,
        TRY_CAST(rpc_errors.payload->>'code' AS INTEGER) AS code,
        rpc_errors.payload->>'message' AS message,
        reqs.what AS related, rpc_errors.rpc_id
    FROM rpc_errors ASOF LEFT JOIN reqs ON rpc_errors.session_id = reqs.session_id
        AND rpc_errors.rpc_id = reqs.rpc_id AND rpc_errors.direction = reqs.answer_dir
        AND rpc_errors.seq > reqs.seq
    -- a probe's "not found" (ACP: Kimi Code looking for AGENTS.md) is what the agent expects
    WHERE NOT EXISTS (SELECT 1 FROM requests rq WHERE rq.session_id = rpc_errors.session_id
                      AND rq.seq = reqs.seq AND rq.outcome = 'expected_miss')
    UNION ALL
    SELECT session_id, seq, ts, direction, source, code, message, related, rpc_id FROM (
        SELECT session_id, seq, ts, direction, rpc_id, payload->>'signal' AS exit_signal,
            CASE kind WHEN 'invalid' THEN 'invalid_frame'
                 WHEN 'lifecycle' THEN CASE WHEN method = 'exit' THEN 'exit' ELSE 'proxy' END
            END AS source,
            CASE WHEN kind = 'lifecycle' AND method = 'exit'
                 THEN TRY_CAST(payload->>'exit_status' AS INTEGER) END AS code,
            CASE kind
                WHEN 'invalid' THEN parse_error
                ELSE CASE
                    WHEN method <> 'exit' THEN concat_ws(': ', method,
                        coalesce(payload->>'where', payload->>'reason'), payload->>'error')
                    WHEN (payload->>'signal') IS NOT NULL THEN 'agent killed by ' || (payload->>'signal')
                    ELSE 'agent exited with status ' || (payload->>'exit_status') END
            END AS message,
            CASE kind WHEN 'invalid' THEN method WHEN 'lifecycle' THEN method END AS related
        FROM frames
        WHERE kind = 'invalid'
           OR (kind = 'lifecycle' AND method IN ('proxy_error', 'recording_gap', 'client_hangup',
                                                 'spawn_failed', 'exit'))
    ) AS ex
    WHERE source <> 'exit' OR (coalesce(code, 0) <> 0 AND NOT EXISTS (
        SELECT 1 FROM client_signals cs WHERE cs.session_id = ex.session_id AND cs.seq < ex.seq
            AND (cs.signal = ex.exit_signal OR cs.signum + 128 = ex.code)))
    UNION ALL
    SELECT session_id, seq, ts, direction, 'stderr', NULL, message, NULL, NULL FROM stderr_errors
    UNION ALL
    -- protocol-level anomalies of frames that parsed (ids reused while pending, methods of
    -- another protocol)
    SELECT session_id, seq, ts, direction, 'anomaly', NULL, anomaly, coalesce(method, kind), rpc_id
    FROM frames WHERE anomaly IS NOT NULL
)
SELECT all_errors.session_id, protos.protocol, turn_of.turn, all_errors.ts, all_errors.source,
    all_errors.direction, all_errors.code, all_errors.message, all_errors.related,
    all_errors.rpc_id, all_errors.seq
FROM all_errors
ASOF LEFT JOIN turn_of ON all_errors.session_id = turn_of.session_id AND all_errors.seq >= turn_of.seq
LEFT JOIN protos ON protos.session_id = all_errors.session_id
