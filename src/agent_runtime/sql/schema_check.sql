-- Named queries around schema.sql (agent_runtime.db): is it there, and the lock
-- that makes concurrent appliers take turns.

-- name: schema_present
-- present: the tables and cr_now() exist. up_to_date: the runs table carries this
-- version's comment, which schema.sql sets last (a database made by an older version,
-- or a half-applied schema, lacks it).
SELECT to_regclass('run_claims') IS NOT NULL AND to_regprocedure('cr_now()') IS NOT NULL
           AS present,
       obj_description(to_regclass('runs'), 'pg_class') IS NOT DISTINCT FROM %(version)s
           AS up_to_date;

-- name: schema_lock
SELECT pg_advisory_xact_lock(%(key)s);
