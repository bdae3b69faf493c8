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

-- an agent's stderr line that says something failed (case-insensitive)
CREATE OR REPLACE MACRO wr_says_failed(line) AS regexp_matches(line,
    '(?i)error|exception|traceback|fatal|panic|fail|critical|denied|refused|cannot|could not|unable to|segmentation');
