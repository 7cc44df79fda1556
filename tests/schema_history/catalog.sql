-- What tests/test_schema_migrations.py compares between a migrated database and one
-- schema.sql made: one named query a part of the catalog, each in a stable order.

-- name: columns
SELECT table_name, ordinal_position, column_name, data_type, is_nullable, column_default,
       is_identity, identity_generation
FROM information_schema.columns
WHERE table_schema = current_schema()
ORDER BY table_name, ordinal_position;

-- name: constraints
SELECT conrelid::regclass::text AS table_name, conname, contype,
       pg_get_constraintdef(oid) AS definition
FROM pg_constraint
WHERE connamespace = to_regnamespace(current_schema())
ORDER BY 1, 2;

-- name: indexes
SELECT tablename, indexname, indexdef
FROM pg_indexes
WHERE schemaname = current_schema()
ORDER BY 1, 2;

-- name: comments
SELECT c.relname, d.objsubid, d.description
FROM pg_description d
JOIN pg_class c ON d.classoid = 'pg_class'::regclass AND d.objoid = c.oid
WHERE c.relnamespace = to_regnamespace(current_schema())
ORDER BY 1, 2;

-- name: functions
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS arguments,
       l.lanname, p.provolatile, p.prosrc
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = to_regnamespace(current_schema())
ORDER BY 1, 2;

-- name: clock
SELECT singleton, skew, frozen_at FROM cr_clock;
