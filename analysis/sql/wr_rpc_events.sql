-- wr_rpc_events (internal): the wr_events rows of sessions whose protocol counts JSON-RPC ids
-- separately per direction (ACP, MCP), one fragment per such protocol. wr_rpc pairs their
-- requests and answers.
SELECT * FROM wr_events WHERE false
