-- Statements of the benchmarks (bench/*.py), loaded by name (agent_runtime.queries).

-- name: server_settings
-- What the figures depend on: durability settings first, then where and what.
SELECT name, setting FROM pg_settings
WHERE name IN ('server_version', 'fsync', 'synchronous_commit', 'wal_sync_method',
               'full_page_writes', 'wal_level', 'commit_delay', 'wal_writer_delay',
               'shared_buffers', 'data_directory')
ORDER BY name;

-- name: raw_table
-- The raw durable commit's table: one row per commit, a primary key like the journal's.
CREATE TABLE IF NOT EXISTS bench_raw (id bigserial PRIMARY KEY, v text NOT NULL);

-- name: raw_commit
-- One raw durable single-row commit (autocommit: the statement is its own transaction).
INSERT INTO bench_raw (v) VALUES (%(v)s);

-- name: raw_truncate
TRUNCATE bench_raw;

-- name: raw_drop
DROP TABLE IF EXISTS bench_raw;

-- name: force_flush
-- Have this backend publish its pending statistics at the end of this statement
-- (PostgreSQL 15: otherwise at most once a second), so a delta read next is exact.
SELECT pg_stat_force_next_flush();

-- name: wal_counters
-- Cluster-wide WAL counters, the insert position (bytes since 0/0) and the database's
-- transactions, read from another database so the reading itself is not counted (and
-- reads write no WAL).
SELECT w.wal_records, w.wal_fpi, w.wal_bytes::bigint AS wal_bytes, w.wal_write, w.wal_sync,
       pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint AS lsn_bytes,
       (SELECT xact_commit + xact_rollback FROM pg_stat_database
        WHERE datname = %(dbname)s) AS xacts
FROM pg_stat_wal w;

-- name: reset_clock
UPDATE cr_clock SET skew = interval '0', frozen_at = NULL;
