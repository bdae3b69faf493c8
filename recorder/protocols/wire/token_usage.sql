-- Wire: a StatusUpdate's token counts (main agent and subagents)
SELECT session_id, 'wire' AS protocol, seq, ts, turn, step, agent_id, subagent_type,
    parent_tool_call_id,
    status['message_id'] AS message_id,
    coalesce(status['token_usage']['input_other'], 0) AS input_other,
    coalesce(status['token_usage']['output'], 0) AS output,
    coalesce(status['token_usage']['input_cache_read'], 0) AS input_cache_read,
    coalesce(status['token_usage']['input_cache_creation'], 0) AS input_cache_creation,
    wr_tokens(status) AS total,
    status['context_tokens'] AS context_tokens,
    status['max_context_tokens'] AS max_context_tokens,
    status['context_usage'] AS context_usage,
    history
FROM wr_events
WHERE type = 'StatusUpdate' AND direction = 'a2c' AND status['token_usage'] IS NOT NULL
