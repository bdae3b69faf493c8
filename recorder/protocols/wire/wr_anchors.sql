-- Wire's turn and step anchors: the main agent's TurnBegin and StepBegin events (a subagent's
-- arrive wrapped in SubagentEvent and are not anchors)
SELECT session_id, seq, msg_type = 'TurnBegin' AS is_turn,
    CASE WHEN msg_type = 'StepBegin' THEN seq END AS step_seq,
    CASE WHEN msg_type = 'StepBegin' THEN TRY_CAST(payload->>'n' AS INTEGER) END AS step
FROM frames
WHERE direction = 'a2c' AND method = 'event' AND msg_type IN ('TurnBegin', 'StepBegin')
