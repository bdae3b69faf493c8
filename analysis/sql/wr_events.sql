-- wr_events: one row per JSON-RPC frame of either direction except streamed text (the bulk of
-- a session). Internal, but documented: handy for ad-hoc questions ("which events happened in
-- step 3?"). A frame belongs to the turn of the last turn anchor before it and to the step of
-- the last step anchor after that (wr_anchors), history to history (wr_history: `history`,
-- `history_seq` = the request that asked for it). A Wire SubagentEvent is unpacked (its nested
-- type and payload) and keeps the turn and step of its parent's frame.
WITH protos AS (
    SELECT session_id, any_value(protocol) AS protocol FROM sessions GROUP BY session_id
), anchors_in AS (
    -- anchors re-sent as history count among themselves: a replayed TurnBegin starts history
    -- turn 1, 2, ... of its span (block = the span's start), live ones live turns (block 0)
    SELECT wr_anchors.*,
        CASE WHEN wr_anchors.seq < coalesce(hist.end_seq, 9223372036854775807)
             THEN hist.start_seq ELSE 0 END AS block
    FROM wr_anchors ASOF LEFT JOIN wr_history hist ON wr_anchors.session_id = hist.session_id
        AND wr_anchors.seq > hist.start_seq
), anchors AS (
    SELECT session_id, seq, step_seq, step, block,
        sum(CASE WHEN is_turn THEN 1 ELSE 0 END) OVER w AS turn0,
        max(CASE WHEN is_turn THEN seq END) OVER w AS turn_seq
    FROM anchors_in
    WINDOW w AS (PARTITION BY session_id, coalesce(block, 0) ORDER BY seq
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), rpc_frames AS (
    SELECT frames.session_id, frames.seq, frames.ts, frames.mono_ns, frames.direction,
        frames.kind, frames.method, frames.rpc_id, frames.msg_type, frames.payload,
        -- inside a history span: what the agent sends on its own, and the client's answers
        CASE WHEN frames.seq < coalesce(hist.end_seq, 9223372036854775807)
                  AND ((frames.direction = 'a2c' AND frames.kind IN ('request', 'notification'))
                       OR (frames.direction = 'c2a' AND frames.kind IN ('response', 'error')))
             THEN hist.start_seq ELSE 0 END AS block
    FROM frames
    ASOF LEFT JOIN wr_history hist ON frames.session_id = hist.session_id
        AND frames.seq > hist.start_seq
    WHERE frames.direction IN ('a2c', 'c2a')
      AND frames.kind IN ('request', 'notification', 'response', 'error')
      -- streamed text: Wire ContentParts, ACP message and thought chunks
      AND (frames.msg_type IS NULL OR frames.msg_type NOT IN (
          'ContentPart', 'agent_message_chunk', 'agent_thought_chunk', 'user_message_chunk'))
), main AS (
    SELECT rpc_frames.session_id, protos.protocol, rpc_frames.seq, rpc_frames.ts,
        rpc_frames.mono_ns, rpc_frames.direction, rpc_frames.kind, rpc_frames.method,
        rpc_frames.rpc_id, rpc_frames.msg_type, rpc_frames.payload, rpc_frames.block,
        anchors.turn0, anchors.turn_seq, anchors.step_seq, anchors.step
    FROM rpc_frames
    ASOF LEFT JOIN anchors ON rpc_frames.session_id = anchors.session_id
        AND coalesce(rpc_frames.block, 0) = coalesce(anchors.block, 0)
        AND rpc_frames.seq >= anchors.seq
    LEFT JOIN protos ON protos.session_id = rpc_frames.session_id
), unpacked AS (
    SELECT session_id, protocol, seq, ts, mono_ns, direction, kind, method, rpc_id,
        nullif(turn0, 0)::INTEGER AS turn, turn_seq, step, step_seq,
        nullif(coalesce(block, 0), 0) AS history_seq,
        msg_type = 'SubagentEvent' AS sub,
        CASE WHEN msg_type = 'SubagentEvent' THEN payload->>'agent_id' END AS agent_id,
        CASE WHEN msg_type = 'SubagentEvent' THEN payload->>'subagent_type' END AS subagent_type,
        CASE WHEN msg_type = 'SubagentEvent' THEN payload->>'parent_tool_call_id' END
            AS parent_tool_call_id,
        CASE WHEN msg_type = 'SubagentEvent' THEN payload->>'$.event.type'
             WHEN msg_type = 'ApprovalRequestResolved' THEN 'ApprovalResponse'
             ELSE msg_type END AS type,
        CASE WHEN msg_type = 'SubagentEvent' THEN payload->'$.event.payload' ELSE payload END
            AS payload
    FROM main
)
SELECT session_id, protocol, seq, ts, mono_ns, direction, kind, method, turn, turn_seq, step,
    step_seq, history_seq IS NOT NULL AS history, history_seq, agent_id, subagent_type,
    parent_tool_call_id, type,
    (direction = 'a2c' AND method = 'request' AND NOT coalesce(sub, false)) AS is_request,
    CASE WHEN NOT coalesce(sub, false) THEN rpc_id END AS rpc_id, payload,
    -- a Wire StatusUpdate's numbers, parsed once here
    CASE WHEN type = 'StatusUpdate' THEN from_json(payload, '{
        "message_id": "VARCHAR", "context_usage": "DOUBLE", "context_tokens": "BIGINT",
        "max_context_tokens": "BIGINT",
        "token_usage": {"input_other": "BIGINT", "output": "BIGINT",
                        "input_cache_read": "BIGINT", "input_cache_creation": "BIGINT"}}') END
        AS status
FROM unpacked
