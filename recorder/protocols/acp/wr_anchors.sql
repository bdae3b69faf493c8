-- ACP's turn anchors: a turn is a session/prompt request (ACP has no steps)
SELECT session_id, seq, true AS is_turn, NULL AS step_seq, NULL AS step
FROM frames
WHERE direction = 'c2a' AND kind = 'request' AND method = 'session/prompt'
  AND session_id IN (SELECT session_id FROM sessions WHERE protocol = 'acp')
