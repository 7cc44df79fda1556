-- The journal of bench/bench_scale.py, filled by SQL (generate_series): a history of
-- final runs with their steps, a backlog of pending runs, and a fixed set of live ones.

-- name: scale_history
-- Runs %(first)s..%(last)s of the history: final (3% failed, 2% cancelled, the rest done),
-- one claim each and %(steps)s confirmed steps (a decision and its call), one a second
-- from 2026-01-01 on, so a later run is a more recent one.
WITH made AS (
    INSERT INTO runs (id, status, generation, attempts, failure, created_at, updated_at,
                      progress_at, llm_calls)
    SELECT 'h-' || g,
           CASE WHEN mod(g, 100) < 3 THEN 'failed' WHEN mod(g, 100) < 5 THEN 'cancelled'
                ELSE 'done' END,
           1, 0, CASE WHEN mod(g, 100) < 5 THEN 'bench' END,
           timestamptz '2026-01-01' + make_interval(secs => g),
           timestamptz '2026-01-01' + make_interval(secs => g + 60),
           timestamptz '2026-01-01' + make_interval(secs => g), %(steps)s
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) g
    RETURNING id, created_at
), claimed AS (
    INSERT INTO run_claims (run_id, generation, owner, claimed_at, reason)
    SELECT id, 1, 'bench', created_at, 'first' FROM made
), decided AS (
    INSERT INTO decisions (run_id, seq, tool, args, llm_call, generation, decided_at)
    SELECT id, s, 'create_server', jsonb_build_object('name', 'srv-' || s), s + 1, 1,
           created_at + make_interval(secs => s)
    FROM made, generate_series(0, %(steps)s - 1) s
)
INSERT INTO tool_calls (run_id, seq, idem_key, state, result, remote_status, generation,
                        confirm_generation, intent_at, confirmed_at)
SELECT id, s, id || ':' || s, 'confirmed', jsonb_build_object('id', 'i-' || s), 'created',
       1, 1, created_at + make_interval(secs => s), created_at + make_interval(secs => s)
FROM made, generate_series(0, %(steps)s - 1) s;

-- name: scale_backlog
-- Pending runs %(first)s..%(last)s of the backlog: never claimed, waiting for a worker.
INSERT INTO runs (id, created_at, updated_at, progress_at)
SELECT 'p-' || g, timestamptz '2026-01-01' + make_interval(secs => g),
       timestamptz '2026-01-01' + make_interval(secs => g),
       timestamptz '2026-01-01' + make_interval(secs => g)
FROM generate_series(%(first)s::bigint, %(last)s::bigint) g;

-- name: scale_live
-- The runs in flight, whatever the size: %(n)s running under a live lease with a call in
-- doubt (its intent, not confirmed yet), %(n)s parked (needs_attention) on one, and %(n)s
-- that used up their attempts an hour ago (the give-up's candidates).
WITH made AS (
    INSERT INTO runs (id, status, owner, generation, lease_expires_at, attempts, updated_at,
                      progress_at)
    SELECT 'live-' || k || '-' || g, (ARRAY['running', 'needs_attention', 'running'])[k],
           CASE k WHEN 1 THEN 'w-' || g WHEN 3 THEN 'dead-' || g END, 1,
           CASE k WHEN 1 THEN cr_now() + interval '1 hour'
                  WHEN 3 THEN cr_now() - interval '1 hour' END,
           CASE k WHEN 3 THEN 50 ELSE 1 END, cr_now(), cr_now() - interval '2 hours'
    FROM generate_series(1, 3) k, generate_series(1, %(n)s) g
    RETURNING id, status, attempts
), claimed AS (
    INSERT INTO run_claims (run_id, generation, owner, claimed_at, reason)
    SELECT id, 1, 'bench', cr_now() - interval '2 hours', 'first' FROM made
)
INSERT INTO tool_calls (run_id, seq, idem_key, state, generation)
SELECT id, 0, id || ':0', 'intent', 1 FROM made WHERE attempts < 50;

-- name: scale_sizes
SELECT pg_size_pretty(pg_database_size(current_database())) AS size,
       (SELECT count(*) FROM runs) AS runs;
