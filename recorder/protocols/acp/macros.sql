-- ACP's helpers for its fragments of the analysis views.

-- ACP has no tool names: kimi's titles are "Shell: echo hi", other agents' often "`ls`" with a
-- kind ("execute"). The leading "Name:" of the title, else the kind, else the title.
CREATE OR REPLACE MACRO wr_acp_tool_name(title, kind) AS
    coalesce(nullif(regexp_extract(title, '^([^:\s]+): ', 1), ''), kind, title);

-- A tool call's name from its first title, then its later one: Kimi Code 2.x names the tool in
-- the first `tool_call` ("Bash", "Read") and later retitles it ("Running: echo hi", "Reading
-- notes.txt"), so a first title that is one bare word is the name.
CREATE OR REPLACE MACRO wr_acp_call_name(first_title, last_title, kind) AS coalesce(
    nullif(regexp_extract(first_title, '^([^:\s]+): ', 1), ''),
    CASE WHEN regexp_full_match(first_title, '[A-Za-z_][A-Za-z0-9_.-]*') THEN first_title END,
    wr_acp_tool_name(last_title, kind));

-- A file the agent reads only to see whether it exists (Kimi Code probes AGENTS.md after a
-- Read): the client's "not found" is expected, not an error.
CREATE OR REPLACE MACRO wr_acp_probe(method, params) AS
    method = 'fs/read_text_file'
    AND regexp_matches(coalesce(params->>'path', ''), '(^|/)(AGENTS|agents)\.md$');

-- what a request of the agent to the client is about
CREATE OR REPLACE MACRO wr_acp_subject(method, params) AS CASE
    WHEN method = 'session/request_permission' THEN params->>'$.toolCall.title'
    WHEN method IN ('fs/read_text_file', 'fs/write_text_file') THEN params->>'path'
    WHEN method = 'terminal/create' THEN concat_ws(' ', params->>'command',
        nullif(array_to_string(json_extract_string(params, '$.args[*]'), ' '), ''))
    WHEN method LIKE 'terminal/%' THEN params->>'terminalId'
END;

-- the client's answer in one word: the chosen option of a permission, 'answered', 'error',
-- 'expected_miss' (a probe's "not found") or 'unanswered'
CREATE OR REPLACE MACRO wr_acp_outcome(method, kind, answer, params) AS CASE
    WHEN kind = 'error' AND coalesce(wr_acp_probe(method, params), false) THEN 'expected_miss'
    WHEN kind = 'error' THEN 'error'
    WHEN kind IS NULL THEN 'unanswered'
    WHEN method = 'session/request_permission' THEN
        CASE WHEN (answer->>'$.outcome.outcome') = 'selected'
             THEN coalesce(answer->>'$.outcome.optionId', 'selected')
             ELSE coalesce(answer->>'$.outcome.outcome', 'invalid') END
    ELSE 'answered'
END;
