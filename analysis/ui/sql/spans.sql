-- The bars of a session's timeline, in ms since the session's start: turns, steps, tool calls,
-- requests to the client (their wait), and every JSON-RPC request with its answer (lane per
-- method: the latency lanes). kind, lane, label, start_ms, end_ms (NULL: no end), status, seq.
-- A protocol whose ids are not paired in wr_rpc (one id space for both directions) gets the same
-- lanes from its frames: each request with the first answer of the other direction after it,
-- a lane per direction, method and message type.
WITH s AS (SELECT coalesce(min(mono_start_ns), 0) AS m0 FROM sessions WHERE session_id = $sid),
fm AS (SELECT seq, mono_ns FROM frames WHERE session_id = $sid),
own AS (SELECT seq, mono_ns, direction, method, msg_type, rpc_id, kind FROM frames
        WHERE session_id = $sid AND rpc_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM wr_rpc WHERE session_id = $sid)),
own_q AS (SELECT * FROM own WHERE kind = 'request'),
own_a AS (SELECT seq, mono_ns, rpc_id, kind, CASE direction WHEN 'c2a' THEN 'a2c' ELSE 'c2a' END AS asked_by
          FROM own WHERE kind IN ('response', 'error')),
base AS (
  SELECT 'turn' AS kind, 'turns' AS lane, 'turn ' || turn || ': ' || left(CAST(user_input AS VARCHAR), 80) AS label,
         seq, duration_ms, status FROM turns WHERE session_id = $sid
  UNION ALL
  SELECT 'step', 'steps', 'turn ' || turn || ' step ' || step, seq, duration_ms,
         CASE WHEN interrupted THEN 'interrupted' ELSE 'ok' END FROM steps WHERE session_id = $sid
  UNION ALL
  SELECT 'tool', 'tools', coalesce(tool_name, '?') || coalesce(' ' || left(title, 60), ''), seq, duration_ms,
         coalesce(status, CASE WHEN is_error THEN 'error' ELSE 'ok' END) FROM tool_calls WHERE session_id = $sid
  UNION ALL
  SELECT 'request', 'client', coalesce(type, '?') || coalesce(' ' || tool_name, ''), seq, wait_ms,
         coalesce(outcome, answer_kind) FROM requests WHERE session_id = $sid
  UNION ALL
  SELECT 'rpc', direction || ' ' || method, method || ' #' || rpc_id, seq,
         (answer_mono - mono_ns) / 1e6, coalesce(answer_kind, 'unanswered') FROM wr_rpc WHERE session_id = $sid
  UNION ALL
  SELECT 'rpc', q.direction || ' ' || q.method || coalesce(' ' || q.msg_type, ''),
         coalesce(q.msg_type, q.method) || ' #' || q.rpc_id, q.seq,
         (a.mono_ns - q.mono_ns) / 1e6, coalesce(a.kind, 'unanswered')
  FROM own_q q ASOF LEFT JOIN own_a a ON a.rpc_id = q.rpc_id AND a.asked_by = q.direction AND a.seq > q.seq)
SELECT b.kind, b.lane, b.label, (fm.mono_ns - s.m0) / 1e6 AS start_ms,
       (fm.mono_ns - s.m0) / 1e6 + b.duration_ms AS end_ms, b.status, b.seq
FROM base b JOIN fm USING (seq), s
ORDER BY start_ms
LIMIT 200000
