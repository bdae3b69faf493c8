-- The frames behind one item of the conversation (the frame at $seq): every frame of the tool
-- call it belongs to (those naming the call's id, e.g. call, approval, result), else its
-- JSON-RPC partners (same id), else the frame alone.
WITH f AS (SELECT seq, rpc_id, payload FROM frames WHERE session_id = $sid AND seq = $seq),
call AS (SELECT tc.tool_call_id AS id FROM tool_calls tc, f
         WHERE tc.session_id = $sid AND tc.tool_call_id IS NOT NULL
           AND (tc.seq = f.seq OR contains(f.payload, '"' || tc.tool_call_id || '"'))
         ORDER BY (tc.seq = f.seq) DESC, tc.seq LIMIT 1)
SELECT fr.seq FROM frames fr
WHERE fr.session_id = $sid AND (
  fr.seq = $seq
  OR (fr.direction IN ('c2a', 'a2c') AND (
      fr.rpc_id = (SELECT id FROM call)
      OR contains(fr.payload, '"' || (SELECT id FROM call) || '"')
      OR ((SELECT id FROM call) IS NULL AND fr.rpc_id = (SELECT rpc_id FROM f)))))
ORDER BY fr.seq LIMIT 500
