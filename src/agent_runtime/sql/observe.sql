-- What the metrics endpoint reads from the journal at every scrape (agent_runtime.observe).

-- name: metrics_journal
-- The journal's counts, in one statement (one snapshot), so that a scrape agrees with the
-- journal exactly: runs by status (needs_attention: the parked runs) and the calls in
-- doubt (an intent without a confirm, as `runs --in-doubt` counts them) by contract. The
-- runs are counted from the index runs_activity (status first); the calls in doubt from
-- tool_calls_in_doubt.
SELECT 'runs' AS kind, status AS label, count(*)::bigint AS n FROM runs GROUP BY status
UNION ALL
SELECT 'in_doubt' AS kind, effect AS label, count(*)::bigint AS n
FROM tool_calls WHERE state = 'intent' GROUP BY effect;
