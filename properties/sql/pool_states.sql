-- Queries of the pool mode's checks of the supervisor's states (properties/pool_watch.py,
-- properties/pool_states.py), by name.

-- name: pool_idle_for
-- Seconds since each run in %(runs)s last made progress, as the supervisor's design defines
-- it (agent_runtime.supervisor.takeback): the latest write of its row (its claim, say), of
-- a model answer, of a call's intent or confirm. A heartbeat's renewal is not progress.
SELECT r.id,
       extract(epoch FROM cr_now() - greatest(
           r.updated_at,
           (SELECT max(a.answered_at) FROM model_answers a WHERE a.run_id = r.id),
           (SELECT max(greatest(c.intent_at, c.confirmed_at)) FROM tool_calls c
            WHERE c.run_id = r.id)
       ))::float8 AS idle_for
FROM runs r
WHERE r.id = ANY(%(runs)s::text[]);

-- name: pool_claims_of
-- Every claim of a run, oldest first: who took it, at which generation.
SELECT generation, owner, reason FROM run_claims WHERE run_id = %(run)s ORDER BY generation;
