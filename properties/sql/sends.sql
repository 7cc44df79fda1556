-- name: read_calls_sent
-- Every call of a `read` tool whose row counts more than its first attempt as sent: a
-- read's retries are not journaled (schema.sql, tool_calls.sends), so none is expected
-- (a call the runtime refused is written as a read with 0 sends: never sent at all).
SELECT run_id, seq, sends FROM tool_calls WHERE effect = 'read' AND sends > 1 ORDER BY run_id, seq;
-- name: calls_sends
-- Every call's count of journaled attempts (properties.sends, sends_exact); a call the
-- runtime refused (remote_status 'rejected') is journaled with 0 and never sent.
SELECT run_id, seq, sends FROM tool_calls ORDER BY run_id, seq;
