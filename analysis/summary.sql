-- wr_session_summary: one row per session of `wr_summary_scope`, what `wire-stats` and the
-- `wire-ui` index read of the analysis views, computed once. The same statement runs on the
-- recording when its loader has stored a session (stored) and on a workspace for a session
-- without a valid stored row (old files, files other tools wrote): one definition.
-- History an agent re-sends (Wire `replay`, a reopened ACP session) is left out, as in
-- wire-stats. `frame_rows` and `max_seq` are what a reader checks the row against.
WITH fr AS (
    SELECT session_id, count(*) AS frame_rows, max(seq) AS max_seq
    FROM frames WHERE session_id IN (SELECT session_id FROM wr_summary_scope)
    GROUP BY session_id
), tu AS (
    SELECT session_id, count(*) AS turns, sum(steps) AS steps,
        coalesce(sum(input_other), 0) + coalesce(sum(input_cache_read), 0)
            + coalesce(sum(input_cache_creation), 0) AS input_tokens,
        sum(output) AS output_tokens, sum(total_tokens) AS total_tokens,
        list({'protocol': protocol, 'turn': turn, 'status': status, 'steps': steps,
              'input_other': input_other, 'input_cache_read': input_cache_read,
              'input_cache_creation': input_cache_creation, 'output': output,
              'total_tokens': total_tokens, 'subagent_tokens': subagent_tokens,
              -- all wire-stats shows of it
              'user_input': left(regexp_replace(coalesce(user_input, ''), '\s+', ' ', 'g'), 30)}
             ORDER BY turn) AS turn_rows
    FROM turns WHERE NOT history AND session_id IN (SELECT session_id FROM wr_summary_scope)
    GROUP BY session_id
), tc AS (
    SELECT session_id, count(*) AS tool_calls,
        list({'protocol': protocol, 'tool_name': tool_name, 'is_error': is_error,
              'duration_ms': duration_ms, 'agent_id': agent_id, 'input_rounds': input_rounds,
              'input_wait_ms': input_wait_ms} ORDER BY seq) AS tool_rows
    FROM tool_calls WHERE NOT history AND session_id IN (SELECT session_id FROM wr_summary_scope)
    GROUP BY session_id
), rq AS (
    SELECT session_id, count(*) AS requests,
        list({'protocol': protocol, 'type': type, 'via': via, 'outcome': outcome,
              'resolved_by': resolved_by, 'wait_ms': wait_ms} ORDER BY seq) AS request_rows
    FROM requests WHERE NOT history AND session_id IN (SELECT session_id FROM wr_summary_scope)
    GROUP BY session_id
), er_grouped AS (
    -- errors grouped as wire-stats lists them: stderr bursts are long and all alike there
    SELECT session_id, source, code,
        CASE WHEN source = 'stderr' THEN '(agent stderr: see the errors view)'
             ELSE left(regexp_replace(coalesce(message, ''), '\s+', ' ', 'g'), 60) END AS msg,
        count(*) AS n
    FROM errors WHERE session_id IN (SELECT session_id FROM wr_summary_scope)
    GROUP BY ALL
), er AS (
    SELECT session_id, sum(n) AS errors,
        list({'source': source, 'code': code, 'message': msg, 'n': n}
             ORDER BY source, code, msg) AS error_rows
    FROM er_grouped GROUP BY session_id
)
SELECT s.session_id, coalesce(fr.frame_rows, 0) AS frame_rows, fr.max_seq,
    coalesce(tu.turns, 0) AS turns, coalesce(tu.steps, 0)::BIGINT AS steps,
    coalesce(tu.input_tokens, 0)::BIGINT AS input_tokens, coalesce(tu.output_tokens, 0)::BIGINT AS output_tokens,
    coalesce(tu.total_tokens, 0)::BIGINT AS total_tokens, coalesce(tc.tool_calls, 0) AS tool_calls,
    coalesce(rq.requests, 0) AS requests, coalesce(er.errors, 0)::BIGINT AS errors,
    tu.turn_rows, tc.tool_rows, rq.request_rows, er.error_rows
FROM (SELECT DISTINCT session_id FROM wr_summary_scope) s
LEFT JOIN fr ON fr.session_id = s.session_id
LEFT JOIN tu ON tu.session_id = s.session_id
LEFT JOIN tc ON tc.session_id = s.session_id
LEFT JOIN rq ON rq.session_id = s.session_id
LEFT JOIN er ON er.session_id = s.session_id
