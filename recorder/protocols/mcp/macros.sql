-- MCP's helpers for its fragments of the analysis views.

-- what a request of the server to the client is about
CREATE OR REPLACE MACRO wr_mcp_subject(method, params) AS CASE
    WHEN method = 'sampling/createMessage'
        THEN json_extract_string(params, '$.messages[#-1].content.text')
    WHEN method = 'elicitation/create' THEN params->>'message'
END;

-- the client's answer in one word: the action of an elicitation, 'answered', 'error' or
-- 'unanswered'
CREATE OR REPLACE MACRO wr_mcp_outcome(method, kind, answer) AS CASE
    WHEN kind = 'error' THEN 'error'
    WHEN kind IS NULL THEN 'unanswered'
    WHEN method = 'elicitation/create' THEN coalesce(answer->>'action', 'invalid')
    ELSE 'answered'
END;
