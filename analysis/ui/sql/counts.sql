-- A session's cards: the counts each protocol has (the page shows those that fit it).
SELECT
  (SELECT count(*) FROM turns WHERE session_id = $sid) AS turns,
  (SELECT count(*) FROM steps WHERE session_id = $sid) AS steps,
  (SELECT sum(total) FROM token_usage WHERE session_id = $sid) AS tokens,
  (SELECT sum(output) FROM token_usage WHERE session_id = $sid) AS output_tokens,
  (SELECT count(*) FROM tool_calls WHERE session_id = $sid) AS tool_calls,
  (SELECT count(*) FROM tool_calls WHERE session_id = $sid AND (is_error OR status = 'error')) AS tool_errors,
  (SELECT median(duration_ms) FROM tool_calls WHERE session_id = $sid) AS tool_p50_ms,
  (SELECT count(*) FROM requests WHERE session_id = $sid) AS client_requests,
  (SELECT sum(wait_ms) FROM requests WHERE session_id = $sid) AS client_wait_ms,
  (SELECT count(*) FROM wr_rpc WHERE session_id = $sid) AS rpc_requests,
  (SELECT count(*) FROM errors WHERE session_id = $sid) AS errors,
  (SELECT count(*) FROM anomalies WHERE session_id = $sid) AS anomalies,
  (SELECT count(*) FROM frames WHERE session_id = $sid) AS frames,
  (SELECT count(*) FROM frames WHERE session_id = $sid AND direction = 'proxy' AND method = 'recording_gap') AS gaps
