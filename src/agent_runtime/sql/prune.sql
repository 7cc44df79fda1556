-- Named queries of retention (agent_runtime.store.prune): the removal of final runs.

-- name: prune_batch
-- Up to %(batch)s runs in status %(status)s (done, failed or cancelled: the caller never
-- names another) whose last change is more than %(age)s seconds old, the oldest first
-- (runs_activity), with everything journaled for them: their model answers, decisions and
-- tool calls here (those tables have no foreign key), their claims, retries and
-- resolutions by cascade. One short transaction. SKIP LOCKED: a run someone holds a lock
-- on right now (an operator's retry of a failed run) is left for a later batch, and the
-- status is checked again on the locked row, so a run that stopped being final is never
-- removed. Each table is reached by its key (run_id = ANY: an index scan per table, never
-- a join the planner might make by scanning a whole table). No worker ever waits on these
-- rows: every worker's write finds its run by status 'running' first, which a final run is
-- not. Returns the ids removed.
WITH doomed AS (
    SELECT id FROM runs
    WHERE status = %(status)s AND status IN ('done', 'failed', 'cancelled')
      AND updated_at < cr_now() - make_interval(secs => %(age)s)
    ORDER BY updated_at, id DESC  -- runs_activity read backwards: no sort
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), batch AS (
    SELECT array_agg(id) AS ids FROM doomed
), calls AS (
    DELETE FROM tool_calls WHERE run_id = ANY ((SELECT ids FROM batch)::text[])
), decided AS (
    DELETE FROM decisions WHERE run_id = ANY ((SELECT ids FROM batch)::text[])
), answered AS (
    DELETE FROM model_answers WHERE run_id = ANY ((SELECT ids FROM batch)::text[])
)
DELETE FROM runs WHERE id = ANY ((SELECT ids FROM batch)::text[])
RETURNING id;
