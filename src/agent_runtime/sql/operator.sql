-- Named queries of the operator view (agent_runtime.operator).
-- Reads only, except operator_cancel_run, operator_retry_run, operator_end_backoff and
-- operator_resolve_call.
-- Names start with operator_ so they never clash with the runtime's own queries.sql.

-- name: operator_list_runs
-- A page of runs in %(statuses)s (the caller names them all for no filter), most recently
-- active first, after the cursor (%(after_at)s, %(after_id)s: the order key of the last
-- run of the previous page; NULL: the first page), of agent %(agent)s (NULL: any), at most
-- %(limit)s (NULL: all). Each
-- status is one range of runs_activity, read in its order and cut at the limit, then the
-- ranges are merged and cut again: a page reads at most (statuses x limit) index entries
-- and the calls of the runs it shows, whatever the journal's size (migration 0011). The order
-- is runs.updated_at, a run's last change (record_decision keeps it within a minute of the
-- run's last step); "updated_at" shown is the later of that and the run's last intent or
-- confirm, "activity" the order key the next page's cursor carries.
WITH page AS (
    SELECT p.*
    FROM unnest(%(statuses)s::text[]) AS s(status)
    CROSS JOIN LATERAL (
        SELECT r.id, r.status, r.owner, r.generation, r.lease_expires_at, r.llm_calls, r.attempts,
               r.failure, r.created_at, r.updated_at, r.agent
        FROM runs r
        WHERE r.status = s.status
          AND (%(agent)s::text IS NULL OR r.agent = %(agent)s::text)
          AND r.updated_at <= coalesce(%(after_at)s::timestamptz, 'infinity')
          AND (%(after_at)s::timestamptz IS NULL OR r.updated_at < %(after_at)s::timestamptz
               OR r.id > %(after_id)s::text)
        ORDER BY r.updated_at DESC, r.id
        LIMIT %(limit)s::bigint
    ) p
    ORDER BY p.updated_at DESC, p.id
    LIMIT %(limit)s::bigint
)
SELECT p.id, p.status, p.owner, p.generation, p.lease_expires_at, p.llm_calls, p.attempts,
       p.failure, p.created_at, greatest(p.updated_at, c.last_write) AS updated_at, p.agent,
       coalesce(c.confirmed, 0) AS steps, coalesce(c.in_doubt, 0) AS in_doubt,
       c.first_in_doubt, p.updated_at AS activity, cr_now() AS now
FROM page p
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE t.state = 'confirmed') AS confirmed,
           count(*) FILTER (WHERE t.state = 'intent') AS in_doubt,
           min(t.seq) FILTER (WHERE t.state = 'intent') AS first_in_doubt,
           max(greatest(t.intent_at, t.confirmed_at)) AS last_write
    FROM tool_calls t
    WHERE t.run_id = p.id
) c ON true
ORDER BY p.updated_at DESC, p.id;

-- name: operator_list_in_doubt
-- operator_list_runs of the runs holding an intent without a confirm (runs --in-doubt):
-- found from their calls through tool_calls_in_doubt, each run then by its key (the LIMIT
-- keeps the planner from scanning runs to join them), ordered and paged the same way. It
-- reads the calls in doubt, however many runs the journal holds: those of the runs in
-- flight or parked, and of failed or cancelled runs that kept one (until prune).
WITH doubtful AS (
    SELECT DISTINCT t.run_id FROM tool_calls t WHERE t.state = 'intent'
), page AS (
    SELECT p.*
    FROM doubtful d
    CROSS JOIN LATERAL (
        SELECT r.id, r.status, r.owner, r.generation, r.lease_expires_at, r.llm_calls,
               r.attempts, r.failure, r.created_at, r.updated_at, r.agent
        FROM runs r
        WHERE r.id = d.run_id AND r.status = ANY (%(statuses)s::text[])
          AND (%(agent)s::text IS NULL OR r.agent = %(agent)s::text)
          AND r.updated_at <= coalesce(%(after_at)s::timestamptz, 'infinity')
          AND (%(after_at)s::timestamptz IS NULL OR r.updated_at < %(after_at)s::timestamptz
               OR r.id > %(after_id)s::text)
        LIMIT 1
    ) p
    ORDER BY p.updated_at DESC, p.id
    LIMIT %(limit)s::bigint
)
SELECT p.id, p.status, p.owner, p.generation, p.lease_expires_at, p.llm_calls, p.attempts,
       p.failure, p.created_at, greatest(p.updated_at, c.last_write) AS updated_at, p.agent,
       coalesce(c.confirmed, 0) AS steps, coalesce(c.in_doubt, 0) AS in_doubt,
       c.first_in_doubt, p.updated_at AS activity, cr_now() AS now
FROM page p
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE t.state = 'confirmed') AS confirmed,
           count(*) FILTER (WHERE t.state = 'intent') AS in_doubt,
           min(t.seq) FILTER (WHERE t.state = 'intent') AS first_in_doubt,
           max(greatest(t.intent_at, t.confirmed_at)) AS last_write
    FROM tool_calls t
    WHERE t.run_id = p.id
) c ON true
ORDER BY p.updated_at DESC, p.id;

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
