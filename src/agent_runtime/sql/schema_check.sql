-- Named queries of agent_runtime.store.migrate: what a database's schema is, the lock that makes
-- concurrent migrators take turns, and the record of what was applied.

-- name: schema_state
-- versioned: schema_version exists (migration 0010 or a schema.sql from then on made it).
-- has_runs / runs_comment: else, a database made by an older schema.sql is recognised by
-- the comment it left on runs ('crashresume schema N'; none at all: the first release).
-- pg_class is read, not to_regclass(): this runs again right after the schema lock was
-- granted, in a transaction begun before the wait, and to_regclass() answers from this
-- session's catalog cache, which may not have heard yet of a table another migrator has
-- just created; a query of pg_class sees every commit up to its own start.
SELECT EXISTS (SELECT FROM pg_class
               WHERE relname = 'schema_version' AND pg_table_is_visible(oid)) AS versioned,
       EXISTS (SELECT FROM pg_class WHERE relname = 'runs' AND pg_table_is_visible(oid))
           AS has_runs,
       (SELECT obj_description(oid, 'pg_class') FROM pg_class
        WHERE relname = 'runs' AND pg_table_is_visible(oid)) AS runs_comment;

-- name: schema_versions
-- Only once schema_state said versioned: every version the database went through.
SELECT version, how, applied_at FROM schema_version ORDER BY version;

-- name: schema_version_record
INSERT INTO schema_version (version, how) VALUES (%(version)s, %(how)s);

-- name: schema_lock
-- A transaction lock, released by the commit (or rollback) of the step it guards: no
-- session state, so it holds behind PgBouncer in transaction mode too (pooling.py).
SELECT pg_advisory_xact_lock(%(key)s);
