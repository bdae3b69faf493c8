-- ACP's helpers for its fragments of the analysis views.

-- ACP has no tool names: kimi's titles are "Shell: echo hi", other agents' often "`ls`" with a
-- kind ("execute"). The leading "Name:" of the title, else the kind, else the title.
CREATE OR REPLACE MACRO wr_acp_tool_name(title, kind) AS
    coalesce(nullif(regexp_extract(title, '^([^:\s]+): ', 1), ''), kind, title);

-- what a request of the agent to the client is about
CREATE OR REPLACE MACRO wr_acp_subject(method, params) AS CASE
    WHEN method = 'session/request_permission' THEN params->>'$.toolCall.title'
    WHEN method IN ('fs/read_text_file', 'fs/write_text_file') THEN params->>'path'
    WHEN method = 'terminal/create' THEN concat_ws(' ', params->>'command',
        nullif(array_to_string(json_extract_string(params, '$.args[*]'), ' '), ''))
    WHEN method LIKE 'terminal/%' THEN params->>'terminalId'
END;

-- the client's answer in one word: the chosen option of a permission, 'answered', 'error' or
-- 'unanswered'
CREATE OR REPLACE MACRO wr_acp_outcome(method, kind, answer) AS CASE
    WHEN kind = 'error' THEN 'error'
    WHEN kind IS NULL THEN 'unanswered'
    WHEN method = 'session/request_permission' THEN
        CASE WHEN (answer->>'$.outcome.outcome') = 'selected'
             THEN coalesce(answer->>'$.outcome.optionId', 'selected')
             ELSE coalesce(answer->>'$.outcome.outcome', 'invalid') END
    ELSE 'answered'
END;
