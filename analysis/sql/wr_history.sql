-- wr_history (internal): spans of a session in which the agent re-sends history, one row each
-- (Wire: from a client's `replay` request to kimi's answer to it, which comes after every
-- re-sent event and request). Inside a span, what the agent sends on its own (events,
-- requests) and the client's answers to it are history: they happened in an earlier run, so
-- the views mark them (`history`) and keep them out of the live turns' numbers and counts.
-- Its columns and types; each protocol that re-sends history adds its rows.
SELECT NULL::VARCHAR AS session_id,
    NULL::BIGINT AS start_seq,  -- the request that asked for the history
    NULL::BIGINT AS end_seq  -- its answer; NULL when none came (the span runs to the end)
WHERE false
