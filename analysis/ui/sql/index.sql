-- One row per session for the index page: the session's own columns, counts from the analysis
-- views, and the text the search looks through (prompts, then every "text", "think" or
-- "user_input" string of the frames in order, so streamed chunks join up again; capped).
WITH t AS (SELECT session_id, count(*) AS turns, sum(total_tokens) AS turn_tokens,
                  string_agg(CAST(user_input AS VARCHAR), ' ' ORDER BY turn) AS prompts
           FROM turns GROUP BY ALL),
u AS (SELECT session_id, sum(total) AS tokens FROM token_usage GROUP BY ALL),
c AS (SELECT session_id, count(*) AS tool_calls FROM tool_calls GROUP BY ALL),
e AS (SELECT session_id, count(*) AS errors FROM errors GROUP BY ALL),
a AS (SELECT session_id, count(*) AS anomalies FROM anomalies GROUP BY ALL),
f AS (SELECT session_id, min(mono_ns) AS mono_first, max(mono_ns) AS mono_last,
             left(string_agg(array_to_string(regexp_extract_all(
                 payload, '"(?:text|think|user_input)":"((?:[^"\\]|\\.)*)"', 1), '')
               , ' ' ORDER BY seq) FILTER (WHERE direction IN ('c2a', 'a2c')), 20000) AS said
      FROM frames GROUP BY ALL)
SELECT s.session_id, s.name, s.protocol, s.protocol_version, s.command, s.cwd, s.started_at,
       s.ended_at, s.tags, s.frame_count, s.source, s.source_file, s.mono_start_ns,
       (f.mono_last - coalesce(s.mono_start_ns, f.mono_first)) / 1e6 AS duration_ms,
       coalesce(t.turns, 0) AS turns, coalesce(u.tokens, t.turn_tokens, 0) AS tokens,
       coalesce(c.tool_calls, 0) AS tool_calls, coalesce(e.errors, 0) AS errors,
       coalesce(a.anomalies, 0) AS anomalies, left(t.prompts, 20000) AS prompts, f.said
FROM sessions s
LEFT JOIN t USING (session_id) LEFT JOIN u USING (session_id) LEFT JOIN c USING (session_id)
LEFT JOIN e USING (session_id) LEFT JOIN a USING (session_id) LEFT JOIN f USING (session_id)
ORDER BY s.started_at, s.session_id
