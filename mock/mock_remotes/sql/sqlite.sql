-- Connection settings every mock's SQLite file is opened with (mock_remotes._store).
-- PRAGMAs take no parameters: one fixed statement per setting.

-- name: journal_wal
PRAGMA journal_mode=WAL;

-- name: busy_timeout
-- Milliseconds SQLite waits for another writer.
PRAGMA busy_timeout=5000;

-- name: synchronous_full
-- Survives a power cut (the default).
PRAGMA synchronous=FULL;

-- name: synchronous_normal
PRAGMA synchronous=NORMAL;

-- name: synchronous_off
-- NORMAL and OFF still survive a crash of the mock process.
PRAGMA synchronous=OFF;
