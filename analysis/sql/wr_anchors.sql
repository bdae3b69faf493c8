-- wr_anchors (internal): the frames that start a turn or a step, one row each, from every
-- protocol's fragment (Wire: TurnBegin and StepBegin events; ACP: session/prompt requests).
-- Only these rows are windowed in wr_events (a few percent of a session); every other frame
-- finds its anchor by an ASOF join, which is much cheaper than windowing wide rows.
SELECT NULL::VARCHAR AS session_id, NULL::BIGINT AS seq,
    NULL::BOOLEAN AS is_turn,  -- true: starts a turn; false: starts a step
    NULL::BIGINT AS step_seq, NULL::INTEGER AS step
WHERE false
