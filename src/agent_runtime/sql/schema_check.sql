-- Named queries around schema.sql (agent_runtime.db): is it there, and the lock
-- that makes concurrent appliers take turns.

-- name: schema_present
SELECT to_regclass('run_claims') IS NOT NULL AND to_regprocedure('cr_now()') IS NOT NULL AS ok;

-- name: schema_lock
SELECT pg_advisory_xact_lock(%(key)s);
