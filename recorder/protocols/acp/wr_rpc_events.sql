-- ACP ids count per direction: its requests and answers are paired in wr_rpc
SELECT * FROM wr_events WHERE protocol = 'acp'
