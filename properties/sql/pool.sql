-- Queries of the property suite's pool mode (properties/pool_runner.py), by name.

-- name: pool_run_state
-- How a pool worker's run stands once its worker is done with it: the kind of ending.
SELECT status, owner, generation, failure FROM runs WHERE id = %(run)s;

-- name: pool_claimable
-- Runs a sweep may claim now (claim_expired's predicate, without claiming): free past
-- their backoff, or with a lease that ran out.
SELECT id, lease_expires_at, cr_now() AS now FROM runs
WHERE status IN ('pending', 'running')
  AND (lease_expires_at IS NULL OR lease_expires_at <= cr_now())
ORDER BY id;

-- name: pool_live_owners
-- Every run held now (running, a live lease), with its owner token (host:pid:nonce).
SELECT id, owner, generation FROM runs
WHERE status = 'running' AND owner IS NOT NULL AND lease_expires_at > cr_now()
ORDER BY id;

-- name: busy_sessions
-- Sessions not idle, but this one: what a silent worker's database was doing when the
-- runner gave up waiting (properties/silence.py).
SELECT pid, application_name, state, wait_event_type, wait_event, coalesce(query, '') AS query
FROM pg_stat_activity
WHERE backend_type = 'client backend' AND state <> 'idle' AND pid <> pg_backend_pid()
ORDER BY pid;
