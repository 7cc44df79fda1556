-- Named queries of the operator view (agent_runtime.operator).
-- Reads only, except operator_cancel_run, operator_retry_run and operator_end_backoff.
-- Names start with operator_ so they never clash with the runtime's own queries.sql.

-- name: operator_list_runs
-- Runs with their step counts, newest activity first. %(statuses)s NULL: every status;
-- %(in_doubt)s: only runs holding an intent without a confirm; %(limit)s NULL: all.
-- "total" counts every matching run, before the limit.
SELECT r.id, r.status, r.owner, r.generation, r.lease_expires_at, r.llm_calls, r.attempts,
       r.failure, r.created_at, r.updated_at,
       coalesce(c.confirmed, 0) AS steps, coalesce(c.in_doubt, 0) AS in_doubt,
       count(*) OVER () AS total, cr_now() AS now
FROM runs r
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE t.state = 'confirmed') AS confirmed,
           count(*) FILTER (WHERE t.state = 'intent') AS in_doubt
    FROM tool_calls t
    WHERE t.run_id = r.id
) c ON true
WHERE (%(statuses)s::text[] IS NULL OR r.status = ANY (%(statuses)s::text[]))
  AND (NOT %(in_doubt)s::boolean OR coalesce(c.in_doubt, 0) > 0)
ORDER BY r.updated_at DESC, r.id
LIMIT %(limit)s::bigint;

-- name: operator_load_claims
-- The audit trail of one run's lease claims, oldest first.
SELECT generation, owner, previous_owner, previous_expired_at, claimed_at, reason
FROM run_claims WHERE run_id = %(run)s ORDER BY generation;

-- name: operator_cancel_run
-- An operator's stop, fenced by nothing: it needs no lease. The run's worker, if
-- any, notices at its next journal write, since every one requires
-- status = 'running' (and its heartbeat's renewal fails the same way).
-- Returns nothing when the run does not exist or is already final.
WITH prev AS (
    SELECT id, status, owner, generation, lease_expires_at
    FROM runs
    WHERE id = %(run)s AND status IN ('pending', 'running')
    FOR UPDATE
)
UPDATE runs r
SET status = 'cancelled', owner = NULL, lease_expires_at = NULL, updated_at = cr_now(),
    failure = %(reason)s
FROM prev
WHERE r.id = prev.id
RETURNING prev.status AS previous_status, prev.owner AS previous_owner,
          prev.generation, prev.lease_expires_at AS previous_lease_expires_at,
          r.updated_at AS cancelled_at;

-- name: operator_load_retries
-- The operator's retries of one run, oldest first: each keeps the failure it cleared.
SELECT generation, previous_status, previous_failure, previous_attempts, previous_since,
       retried_at
FROM run_retries WHERE run_id = %(run)s ORDER BY id;

-- name: operator_retry_run
-- An operator's retry. A failed run goes back to pending; a free run that is not final
-- (never claimed, backing off, or whose worker's lease expired) keeps its status. Either
-- way its attempts, its backoff and its give-up clock start again, runs.failure is
-- cleared and what it said is kept in run_retries. A worker whose lease had expired is
-- fenced like any other (owner cleared). Returns nothing for a run that is done,
-- cancelled or held by a live lease, or does not exist (the caller says which).
WITH prev AS (
    SELECT id, status, failure, attempts, generation, updated_at
    FROM runs
    WHERE id = %(run)s
      AND (status = 'failed'
           OR (status IN ('pending', 'running')
               AND (owner IS NULL OR lease_expires_at <= cr_now())))
    FOR UPDATE
), retried AS (
    UPDATE runs r
    SET status = CASE WHEN prev.status = 'failed' THEN 'pending' ELSE r.status END,
        owner = NULL, lease_expires_at = NULL, attempts = 0, failure = NULL,
        progress_at = cr_now(), updated_at = cr_now()
    FROM prev
    WHERE r.id = prev.id
    RETURNING r.id, r.status, r.updated_at
)
INSERT INTO run_retries (run_id, generation, previous_status, previous_failure,
                         previous_attempts, previous_since, retried_at)
SELECT prev.id, prev.generation, prev.status, prev.failure, prev.attempts, prev.updated_at,
       retried.updated_at
FROM prev JOIN retried USING (id)
RETURNING generation, previous_status, previous_failure, previous_attempts, previous_since,
          retried_at, (SELECT status FROM retried) AS status;

-- name: operator_end_backoff
-- resolve acts now: a free run waiting out a backoff becomes claimable at once (its
-- attempts and its give-up clock are left as they are).
UPDATE runs SET lease_expires_at = cr_now(), updated_at = cr_now()
WHERE id = %(run)s AND status IN ('pending', 'running') AND owner IS NULL
  AND lease_expires_at > cr_now()
RETURNING id;
