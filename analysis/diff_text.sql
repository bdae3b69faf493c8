-- wire-diff: the agent's notifications of one session (the model's streamed text and thinking
-- are among them: recorder.redact_stream.piece_of tells which), each with the turn and step of
-- the last frame `wr_events` places at or before it
SELECT f.seq, f.raw, e.turn, e.step, coalesce(e.history, false) AS history
FROM (SELECT session_id, seq, raw FROM frames
      WHERE session_id = $session AND direction = 'a2c' AND kind = 'notification') f
ASOF LEFT JOIN (SELECT session_id, seq, turn, step, history FROM wr_events
                WHERE session_id = $session) e
    ON f.session_id = e.session_id AND f.seq >= e.seq
ORDER BY f.seq
