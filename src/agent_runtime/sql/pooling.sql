-- What a connection asks once, when it opens, to learn whether a pooler sits in between.

-- name: serving_backend
-- The server process answering this statement. On a direct connection (or through a plain
-- TCP proxy) it is the process whose key the server sent at startup; a pooler such as
-- PgBouncer sends a key of its own and hands each transaction to any server connection.
SELECT pg_backend_pid() AS pid;

-- name: pooling_probe
-- Run inside an explicit transaction: a pooler in statement mode refuses the BEGIN.
SELECT 1 AS ok;
