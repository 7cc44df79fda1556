-- Named queries of agent_runtime.migrate: what a database's schema is, the lock that makes
-- concurrent migrators take turns, and the record of what was applied.

-- name: schema_state
-- versioned: schema_version exists (migration 0010 or a schema.sql from then on made it).
-- has_runs / runs_comment: else, a database made by an older schema.sql is recognised by
-- the comment it left on runs ('crashresume schema N'; none at all: the first release).
SELECT to_regclass('schema_version') IS NOT NULL AS versioned,
       to_regclass('runs') IS NOT NULL AS has_runs,
       obj_description(to_regclass('runs'), 'pg_class') AS runs_comment;

-- name: schema_versions
-- Only once schema_state said versioned: every version the database went through.
SELECT version, how, applied_at FROM schema_version ORDER BY version;

-- name: schema_version_record
INSERT INTO schema_version (version, how) VALUES (%(version)s, %(how)s);

-- name: schema_lock
-- A session lock, taken before the step's transaction begins: a transaction that began
-- before the wait would still see the catalog as it was (a table another process created
-- meanwhile unknown to to_regclass).
SELECT pg_advisory_lock(%(key)s);

-- name: schema_unlock
SELECT pg_advisory_unlock(%(key)s);
