-- Named queries of the operator view (agent_runtime.operator).
-- Reads only, except operator_cancel_run, operator_retry_run, operator_end_backoff and
-- operator_resolve_call.
-- Names start with operator_ so they never clash with the runtime's own queries.sql.

-- name: operator_list_runs
-- Runs with their step counts, newest activity first. %(statuses)s NULL: every status;
-- %(in_doubt)s: only runs holding an intent without a confirm; %(limit)s NULL: all.
-- "total" counts every matching run, before the limit. Its activity (updated_at here) is
-- the later of the run row's last change (a claim, a stop, a status change) and its last
-- intent or confirm: a step does not rewrite the run row (queries.sql, record_intent).
SELECT r.id, r.status, r.owner, r.generation, r.lease_expires_at, r.llm_calls, r.attempts,
       r.failure, r.created_at, greatest(r.updated_at, c.last_write) AS updated_at, r.agent,
       coalesce(c.confirmed, 0) AS steps, coalesce(c.in_doubt, 0) AS in_doubt,
       c.first_in_doubt,
       count(*) OVER () AS total, cr_now() AS now
FROM runs r
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE t.state = 'confirmed') AS confirmed,
           count(*) FILTER (WHERE t.state = 'intent') AS in_doubt,
           min(t.seq) FILTER (WHERE t.state = 'intent') AS first_in_doubt,
           max(greatest(t.intent_at, t.confirmed_at)) AS last_write
    FROM tool_calls t
    WHERE t.run_id = r.id
) c ON true
WHERE (%(statuses)s::text[] IS NULL OR r.status = ANY (%(statuses)s::text[]))
  AND (NOT %(in_doubt)s::boolean OR coalesce(c.in_doubt, 0) > 0)
ORDER BY greatest(r.updated_at, c.last_write) DESC, r.id
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

-- name: operator_resolve_call
-- An operator's decision on call %(seq)s of a run that needs attention, or of a failed run,
-- fenced by nothing (neither has an owner): only while the call is still an intent without
-- a confirm, and, for 'redo' and 'fail', only once no request of it can still land
-- (lands_by passed or unknown) unless %(in_flight_ok)s: a request still under way may yet
-- act, which would make a redo act twice and a fail a lie. %(choice)s 'confirm': the call
-- is confirmed with %(result)s (remote_status operator); 'fail': confirmed as failed with
-- %(result)s (the error the model sees); 'redo': the intent becomes redo, the next worker
-- sends it once more. A parked run goes back to pending, claimable at once, its attempts
-- and give-up clock started again; a failed run stays failed (its failure and its times
-- kept) until the operator's retry, whose next worker finds the call settled. Either way
-- call_resolutions keeps the decision and what the run said. One statement: all of it, or
-- (a wrong status, no such call, already resolved, may still land) nothing; the caller
-- says which.
WITH target AS (
    SELECT r.id, r.status, r.generation, r.failure, r.updated_at, t.seq, t.idem_key,
           t.effect, t.generation AS intent_by, t.intent_at
    FROM runs r JOIN tool_calls t ON t.run_id = r.id
    WHERE r.id = %(run)s AND r.status IN ('needs_attention', 'failed')
      AND t.seq = %(seq)s AND t.state = 'intent'
      AND (%(choice)s::text = 'confirm' OR %(in_flight_ok)s::boolean
           OR t.lands_by IS NULL OR t.lands_by <= cr_now())
    FOR UPDATE OF r, t
), resolved AS (
    UPDATE tool_calls t
    SET state = CASE %(choice)s::text WHEN 'confirm' THEN 'confirmed'
                                      WHEN 'fail' THEN 'failed'
                                      ELSE 'redo' END,
        result = CASE WHEN %(choice)s::text = 'redo' THEN NULL ELSE %(result)s::jsonb END,
        remote_status = CASE WHEN %(choice)s::text = 'redo' THEN NULL ELSE 'operator' END,
        confirm_generation = NULL,
        confirmed_at = CASE WHEN %(choice)s::text = 'redo' THEN NULL ELSE cr_now() END
    FROM target
    WHERE t.run_id = target.id AND t.seq = target.seq
    RETURNING t.state
), resumed AS (
    UPDATE runs r
    SET status = 'pending', owner = NULL, lease_expires_at = NULL, failure = NULL,
        attempts = 0, progress_at = cr_now(), updated_at = cr_now()
    FROM target
    WHERE r.id = target.id AND target.status = 'needs_attention'
    RETURNING r.id, r.updated_at
)
INSERT INTO call_resolutions (run_id, seq, idem_key, effect, choice, reason, result,
                              generation, intent_by, intent_at, parked_reason, parked_at,
                              resolved_at)
SELECT target.id, target.seq, target.idem_key, target.effect, %(choice)s::text,
       %(reason)s::text,
       CASE WHEN %(choice)s::text = 'redo' THEN NULL ELSE %(result)s::jsonb END,
       target.generation, target.intent_by, target.intent_at, target.failure,
       target.updated_at, coalesce((SELECT updated_at FROM resumed), cr_now())
FROM target
RETURNING seq, idem_key, effect, choice, reason, result, generation, intent_by, intent_at,
          parked_reason, parked_at, resolved_at, (SELECT state FROM resolved) AS state,
          (SELECT CASE WHEN target.status = 'failed' THEN 'failed' ELSE 'pending' END
           FROM target) AS run_status;

-- name: operator_load_resolutions
-- The operator's decisions on one run's calls in doubt, oldest first.
SELECT seq, idem_key, effect, choice, reason, result, generation, intent_by, intent_at,
       parked_reason, parked_at, resolved_at
FROM call_resolutions WHERE run_id = %(run)s ORDER BY id;
