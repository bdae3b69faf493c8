-- The recorded frame a replay divergence names: the first frame of the divergence's turn (and
-- step) with the expected frame's method (and type, where the protocol has one).
SELECT seq FROM wr_events
WHERE session_id = $sid
  AND ($turn IS NULL OR turn = $turn) AND ($step IS NULL OR step = $step)
  AND method = $method AND ($type IS NULL OR type = $type)
ORDER BY seq LIMIT 1
