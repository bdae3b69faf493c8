-- Wire: a step runs from its StepBegin to the next one (or its turn's TurnEnd). The per-step
-- sums need the token columns of every StatusUpdate (main and subagent) next to the other
-- events, so they aggregate one materialised pass over wr_events.
WITH step_events AS MATERIALIZED (
    SELECT session_id, seq, ts, mono_ns, turn, turn_seq, step, step_seq, agent_id, type, history,
        coalesce(status['token_usage']['input_other'], 0) AS i_other,
        coalesce(status['token_usage']['output'], 0) AS o,
        coalesce(status['token_usage']['input_cache_read'], 0) AS i_read,
        coalesce(status['token_usage']['input_cache_creation'], 0) AS i_create,
        status['token_usage'] IS NOT NULL AS has_usage,
        status['message_id'] AS message_id, status['context_tokens'] AS context_tokens,
        status['context_usage'] AS context_usage
    FROM wr_events WHERE step_seq IS NOT NULL
), step_agg AS (
    SELECT session_id, step_seq,
        any_value(turn) AS turn, any_value(turn_seq) AS turn_seq, any_value(step) AS step,
        bool_or(history) AS history,
        min(ts) FILTER (WHERE seq = step_seq) AS started_at,
        min(mono_ns) FILTER (WHERE seq = step_seq) AS start_mono,
        min(ts) FILTER (WHERE type = 'TurnEnd' AND agent_id IS NULL) AS turn_end_ts,
        min(mono_ns) FILTER (WHERE type = 'TurnEnd' AND agent_id IS NULL) AS turn_end_mono,
        max(ts) AS last_ts, max(mono_ns) AS last_mono,
        sum(i_other) FILTER (WHERE agent_id IS NULL)::BIGINT AS input_other,
        sum(o) FILTER (WHERE agent_id IS NULL)::BIGINT AS output,
        sum(i_read) FILTER (WHERE agent_id IS NULL)::BIGINT AS input_cache_read,
        sum(i_create) FILTER (WHERE agent_id IS NULL)::BIGINT AS input_cache_creation,
        sum(i_other + o + i_read + i_create) FILTER (WHERE agent_id IS NOT NULL)::BIGINT AS subagent_tokens,
        arg_min(message_id, seq) FILTER (WHERE has_usage AND agent_id IS NULL) AS message_id,
        arg_max(context_tokens, seq) FILTER (WHERE has_usage AND agent_id IS NULL) AS context_tokens,
        arg_max(context_usage, seq) FILTER (WHERE has_usage AND agent_id IS NULL) AS context_usage,
        count(*) FILTER (WHERE has_usage AND agent_id IS NULL) AS status_updates,
        count(*) FILTER (WHERE type = 'ToolCall' AND agent_id IS NULL) AS tool_calls,
        count(*) FILTER (WHERE type = 'ToolCall' AND agent_id IS NOT NULL) AS subagent_tool_calls,
        count(*) FILTER (WHERE type = 'StepInterrupted' AND agent_id IS NULL) AS interruptions,
        count(*) FILTER (WHERE type = 'StepRetry' AND agent_id IS NULL) AS retries
    FROM step_events GROUP BY session_id, step_seq
), step_bounds AS (
    SELECT *,
        lead(start_mono) OVER (PARTITION BY session_id, turn_seq ORDER BY step_seq) AS next_mono,
        lead(started_at) OVER (PARTITION BY session_id, turn_seq ORDER BY step_seq) AS next_ts
    FROM step_agg
)
SELECT session_id, 'wire' AS protocol, turn, step, started_at,
    coalesce(turn_end_ts, next_ts, last_ts) AS ended_at,
    (coalesce(turn_end_mono, next_mono, last_mono) - start_mono) / 1e6 AS duration_ms,
    coalesce(input_other, 0) AS input_other, coalesce(output, 0) AS output,
    coalesce(input_cache_read, 0) AS input_cache_read,
    coalesce(input_cache_creation, 0) AS input_cache_creation,
    coalesce(input_other, 0) + coalesce(output, 0) + coalesce(input_cache_read, 0)
        + coalesce(input_cache_creation, 0) AS total_tokens,
    coalesce(subagent_tokens, 0) AS subagent_tokens,
    context_tokens, context_usage, message_id, status_updates, tool_calls, subagent_tool_calls,
    interruptions > 0 AS interrupted, retries, retries > 0 AS retried, history,
    step_seq AS seq
FROM step_bounds
