-- The agent's own name and version, from its answer to the client's initialize (ACP
-- agentInfo, MCP serverInfo, Wire server): a node or python command line does not say which
-- agent ran (Kimi Code 2.x is `node .../main.mjs acp`), nor which version.
SELECT coalesce(answer->>'$.agentInfo.name', answer->>'$.serverInfo.name',
                answer->>'$.server.name') AS name,
    coalesce(answer->>'$.agentInfo.version', answer->>'$.serverInfo.version',
             answer->>'$.server.version') AS version
FROM wr_rpc
WHERE session_id = $sid AND direction = 'c2a' AND method = 'initialize' AND answer_kind = 'response'
ORDER BY seq LIMIT 1
