-- Tokens per step (main agent and subagents apart), for the token chart.
SELECT turn, step, sum(input_other) FILTER (WHERE agent_id IS NULL) AS input_other,
       sum(input_cache_read) FILTER (WHERE agent_id IS NULL) AS input_cache_read,
       sum(input_cache_creation) FILTER (WHERE agent_id IS NULL) AS input_cache_creation,
       sum(output) FILTER (WHERE agent_id IS NULL) AS output,
       sum(total) FILTER (WHERE agent_id IS NOT NULL) AS subagents
FROM token_usage WHERE session_id = $sid
  -- rows that say only how full the context is (ACP usage_update) have no tokens to chart
  AND (total IS NOT NULL OR output IS NOT NULL OR input_other IS NOT NULL)
GROUP BY ALL ORDER BY turn NULLS FIRST, step NULLS FIRST
