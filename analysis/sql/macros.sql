-- Helpers shared by the views and by the protocols' fragments. Each statement is a
-- `CREATE OR REPLACE MACRO`; a workspace over read-only files gets them as TEMP macros.

-- a duration in milliseconds from two monotonic-clock readings, never negative (an answer
-- recorded just before its request would give a small negative gap)
CREATE OR REPLACE MACRO wr_wait_ms(start_mono, end_mono) AS
    greatest(end_mono - start_mono, 0) / 1e6;

-- the four token counters of a Wire StatusUpdate (`wr_events.status`), 0 when absent
CREATE OR REPLACE MACRO wr_tokens(status) AS
    coalesce(status['token_usage']['input_other'], 0) + coalesce(status['token_usage']['output'], 0)
    + coalesce(status['token_usage']['input_cache_read'], 0)
    + coalesce(status['token_usage']['input_cache_creation'], 0);

-- agent stderr text that says something failed (case-insensitive); URLs do not count (a
-- pydantic dump ends with `https://errors.pydantic.dev/...`)
CREATE OR REPLACE MACRO wr_says_failed(line) AS regexp_matches(
    regexp_replace(line, '[A-Za-z][A-Za-z0-9+.-]*://[^[:space:]]*', '', 'g'),
    '(?i)error|exception|traceback|fatal|panic|fail|critical|denied|refused|cannot|could not|unable to|segmentation');
