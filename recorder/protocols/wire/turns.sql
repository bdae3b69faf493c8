-- Wire: a turn runs from the main agent's TurnBegin to its TurnEnd; its status comes from the
-- answer to the prompt that started it, else is inferred from its events. A turn re-sent by
-- `replay` is history: numbered within its replay, answering no prompt
WITH turn_events AS MATERIALIZED (
    SELECT session_id, seq, ts, mono_ns, turn, turn_seq, step_seq, agent_id, type, history,
        CASE WHEN type = 'TurnBegin' AND agent_id IS NULL THEN payload->'user_input' END AS ui,
        coalesce(status['token_usage']['input_other'], 0) AS i_other,
        coalesce(status['token_usage']['output'], 0) AS o,
        coalesce(status['token_usage']['input_cache_read'], 0) AS i_read,
        coalesce(status['token_usage']['input_cache_creation'], 0) AS i_create
    FROM wr_events
    WHERE turn_seq IS NOT NULL AND direction = 'a2c' AND protocol IS DISTINCT FROM 'acp'
), turn_agg AS (
    SELECT session_id, turn_seq, any_value(turn) AS turn, bool_or(history) AS history,
        min(ts) FILTER (WHERE seq = turn_seq) AS started_at,
        min(mono_ns) FILTER (WHERE seq = turn_seq) AS start_mono,
        any_value(ui) FILTER (WHERE seq = turn_seq) AS ui,
        min(seq) FILTER (WHERE type = 'TurnEnd' AND agent_id IS NULL) AS end_seq,
        min(ts) FILTER (WHERE type = 'TurnEnd' AND agent_id IS NULL) AS end_ts,
        min(mono_ns) FILTER (WHERE type = 'TurnEnd' AND agent_id IS NULL) AS end_mono,
        count(*) FILTER (WHERE type = 'StepBegin' AND agent_id IS NULL) AS steps,
        max(seq) FILTER (WHERE type = 'StepBegin' AND agent_id IS NULL) AS last_step_seq,
        max(seq) FILTER (WHERE type = 'StepInterrupted' AND agent_id IS NULL) AS last_interrupt_seq,
        count(*) FILTER (WHERE type = 'ToolCall' AND agent_id IS NULL) AS tool_calls,
        count(*) FILTER (WHERE type = 'ToolResult' AND agent_id IS NULL) AS tool_results,
        count(*) FILTER (WHERE type = 'ToolCall' AND agent_id IS NOT NULL) AS subagent_tool_calls,
        count(*) FILTER (WHERE type = 'ApprovalRequest') AS approvals,
        count(*) FILTER (WHERE type = 'StepRetry' AND agent_id IS NULL) AS retries,
        count(*) FILTER (WHERE type = 'SteerInput' AND agent_id IS NULL) AS steers,
        sum(i_other)::BIGINT AS input_other, sum(o)::BIGINT AS output, sum(i_read)::BIGINT AS input_cache_read,
        sum(i_create)::BIGINT AS input_cache_creation,
        sum(i_other + o + i_read + i_create) FILTER (WHERE agent_id IS NOT NULL)::BIGINT AS subagent_tokens
    FROM turn_events GROUP BY session_id, turn_seq
), prompts AS (
    SELECT session_id, seq, ts, mono_ns, rpc_id FROM wr_events
    WHERE direction = 'c2a' AND kind = 'request' AND method = 'prompt'
), prompt_answers AS (
    SELECT session_id, seq, ts, mono_ns, rpc_id, kind, payload FROM wr_events
    WHERE direction = 'a2c' AND kind IN ('response', 'error') AND rpc_id IS NOT NULL
), turn_prompt AS (
    -- the prompt that started a turn: the last one sent before its TurnBegin (unless an
    -- earlier turn already claimed it, e.g. turns re-emitted by `replay`)
    SELECT turn_agg.session_id, turn_agg.turn_seq, prompts.rpc_id AS prompt_id,
        prompts.seq AS prompt_seq, prompts.ts AS prompt_ts, prompts.mono_ns AS prompt_mono
    FROM (SELECT * FROM turn_agg WHERE NOT history) turn_agg
    ASOF LEFT JOIN prompts ON turn_agg.session_id = prompts.session_id
        AND turn_agg.turn_seq > prompts.seq
    QUALIFY prompts.seq IS NULL
        OR row_number() OVER (PARTITION BY turn_agg.session_id, prompts.seq ORDER BY turn_agg.turn_seq) = 1
), turn_response AS (
    -- the first answer with the prompt's id after the prompt (an ASOF join: clients that give
    -- every prompt the same id would make a join on the id grow with its square)
    SELECT turn_prompt.session_id, turn_prompt.turn_seq, prompt_answers.seq AS resp_seq,
        prompt_answers.ts AS resp_ts, prompt_answers.mono_ns AS resp_mono,
        prompt_answers.kind AS resp_kind, prompt_answers.payload AS resp
    FROM turn_prompt ASOF JOIN prompt_answers ON prompt_answers.session_id = turn_prompt.session_id
        AND prompt_answers.rpc_id = turn_prompt.prompt_id
        AND prompt_answers.seq > turn_prompt.prompt_seq
), wire_turns AS (
    SELECT turn_agg.session_id, 'wire' AS protocol, turn_agg.turn, turn_prompt.prompt_id,
        CASE WHEN json_type(turn_agg.ui) = 'VARCHAR' THEN turn_agg.ui->>'$'
             ELSE turn_agg.ui::VARCHAR END AS user_input,
        turn_agg.started_at, turn_agg.end_ts AS ended_at,
        (turn_agg.end_mono - turn_agg.start_mono) / 1e6 AS duration_ms,
        turn_prompt.prompt_ts AS prompt_at, turn_response.resp_ts AS responded_at,
        (turn_response.resp_mono - turn_prompt.prompt_mono) / 1e6 AS response_ms,
        CASE WHEN turn_response.resp_kind = 'response' THEN coalesce(turn_response.resp->>'status', 'finished')
             WHEN turn_response.resp_kind = 'error' THEN 'error'
             WHEN turn_agg.end_seq IS NULL THEN 'incomplete'
             WHEN turn_agg.last_interrupt_seq > turn_agg.last_step_seq THEN 'error'
             WHEN turn_agg.tool_calls > turn_agg.tool_results THEN 'cancelled'
             ELSE 'finished' END AS status,
        CASE WHEN turn_response.resp_kind IS NOT NULL THEN 'response'
             WHEN turn_agg.end_seq IS NULL THEN 'no TurnEnd' ELSE 'inferred' END AS status_source,
        NULL::VARCHAR AS stop_reason,
        TRY_CAST(CASE WHEN turn_response.resp_kind = 'error' THEN turn_response.resp->>'code' END AS INTEGER)
            AS error_code,
        CASE WHEN turn_response.resp_kind = 'error' THEN turn_response.resp->>'message' END
            AS error_message,
        turn_agg.steps, turn_agg.tool_calls, turn_agg.subagent_tool_calls, turn_agg.approvals,
        turn_agg.retries, turn_agg.steers,
        turn_agg.input_other, turn_agg.output, turn_agg.input_cache_read,
        turn_agg.input_cache_creation,
        turn_agg.input_other + turn_agg.output + turn_agg.input_cache_read
            + turn_agg.input_cache_creation AS total_tokens,
        coalesce(turn_agg.subagent_tokens, 0) AS subagent_tokens,
        turn_agg.history, turn_agg.turn_seq AS seq
    FROM turn_agg
    LEFT JOIN turn_prompt ON turn_prompt.session_id = turn_agg.session_id
        AND turn_prompt.turn_seq = turn_agg.turn_seq
    LEFT JOIN turn_response ON turn_response.session_id = turn_agg.session_id
        AND turn_response.turn_seq = turn_agg.turn_seq
)
SELECT * FROM wire_turns
