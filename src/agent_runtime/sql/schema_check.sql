-- Named queries around schema.sql (agent_runtime.db): is it there, and the lock
-- that makes concurrent appliers take turns.

-- name: schema_present
-- present: the tables and cr_now() exist. up_to_date: so does the newest piece of
-- schema.sql (run_claims.reason); a database made by an older version lacks it.
SELECT to_regclass('run_claims') IS NOT NULL AND to_regprocedure('cr_now()') IS NOT NULL
           AS present,
       EXISTS (
           SELECT 1 FROM pg_attribute
           WHERE attrelid = to_regclass('run_claims') AND attname = 'reason'
             AND NOT attisdropped
       ) AS up_to_date;

-- name: schema_lock
SELECT pg_advisory_xact_lock(%(key)s);
