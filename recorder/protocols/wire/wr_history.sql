-- Wire: kimi answers `replay` after re-sending the session's wire.jsonl records as events and
-- requests (requests with their original ids). A replay refused with an error (-32000 while a
-- turn runs) re-sent nothing: the live turn's frames around it stay live.
WITH replays AS (
    SELECT session_id, seq, rpc_id FROM frames
    WHERE direction = 'c2a' AND kind = 'request' AND method = 'replay' AND rpc_id IS NOT NULL
), answers AS (
    SELECT session_id, seq, rpc_id, kind FROM frames
    WHERE direction = 'a2c' AND kind IN ('response', 'error') AND rpc_id IS NOT NULL
)
SELECT replays.session_id, replays.seq AS start_seq, answers.seq AS end_seq
FROM replays ASOF LEFT JOIN answers ON replays.session_id = answers.session_id
    AND replays.rpc_id = answers.rpc_id AND replays.seq < answers.seq
WHERE answers.kind IS DISTINCT FROM 'error'
