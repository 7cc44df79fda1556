-- The mock cloud's durable state. Named queries, loaded once by mock_remotes._sql.
-- Every mutating request is one IMMEDIATE transaction: count it, check the fence,
-- look the key up, and (first time only) take an id and store the record.

-- Connection settings are in sqlite.sql.

-- name: schema
CREATE TABLE IF NOT EXISTS records (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT, -- creation order
    key        TEXT NOT NULL UNIQUE,              -- Idempotency-Key: acted on at most once
    run        TEXT NOT NULL,                     -- key.rsplit(':', 1)[0]
    kind       TEXT NOT NULL,                     -- 'server' | 'database' | 'dns_record'
    id         TEXT NOT NULL UNIQUE,              -- i-0000001, db-0000001, dns-0000001
    args       TEXT NOT NULL,                     -- JSON, keys sorted: compared on a repeat
    result     TEXT NOT NULL,                     -- JSON: the first answer, status 'created'
    generation INTEGER,                           -- X-Fencing-Generation of that request
    created_at TEXT NOT NULL                      -- ISO 8601, UTC
);
CREATE INDEX IF NOT EXISTS records_run ON records (run);
CREATE TABLE IF NOT EXISTS counters (
    kind  TEXT PRIMARY KEY,                       -- one id counter per resource kind
    value INTEGER NOT NULL                        -- the last number handed out
);
CREATE TABLE IF NOT EXISTS fences (
    run        TEXT PRIMARY KEY,
    generation INTEGER NOT NULL                   -- highest generation served: lower is stale
);
CREATE TABLE IF NOT EXISTS requests (
    key   TEXT PRIMARY KEY,
    count INTEGER NOT NULL                        -- every mutating request, refused ones too
);
CREATE TABLE IF NOT EXISTS answers (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT, -- the order the cloud answered in
    key        TEXT NOT NULL,                     -- the request's Idempotency-Key
    run        TEXT NOT NULL,                     -- key.rsplit(':', 1)[0]
    generation INTEGER,                           -- its X-Fencing-Generation, if any
    answer     TEXT NOT NULL,                     -- 'created', 'already_done', or the error code
    dropped    INTEGER NOT NULL                   -- 1: drop_after lost this answer on the way
);
CREATE INDEX IF NOT EXISTS answers_run ON answers (run);

-- name: reset
-- One script (executescript): forget everything in one IMMEDIATE transaction.
BEGIN IMMEDIATE;
DELETE FROM records;
DELETE FROM counters;
DELETE FROM fences;
DELETE FROM requests;
DELETE FROM answers;
DELETE FROM sqlite_sequence WHERE name IN ('records', 'answers');
COMMIT;

-- name: count_request
INSERT INTO requests (key, count) VALUES (:key, 1)
ON CONFLICT (key) DO UPDATE SET count = count + 1;

-- name: request_count
SELECT count FROM requests WHERE key = :key;

-- name: fence_get
SELECT generation FROM fences WHERE run = :run;

-- name: fence_raise
INSERT INTO fences (run, generation) VALUES (:run, :generation)
ON CONFLICT (run) DO UPDATE SET generation = max(generation, excluded.generation);

-- name: counter_next
INSERT INTO counters (kind, value) VALUES (:kind, 1)
ON CONFLICT (kind) DO UPDATE SET value = value + 1
RETURNING value;

-- name: record_get
SELECT key, kind, id, args, result, generation, created_at FROM records WHERE key = :key;

-- name: record_insert
INSERT INTO records (key, run, kind, id, args, result, generation, created_at)
VALUES (:key, :run, :kind, :id, :args, :result, :generation, :created_at);

-- name: records_all
SELECT key, kind, id, args, result, generation, created_at FROM records ORDER BY seq;

-- name: records_of_run
SELECT key, kind, id, args, result, generation, created_at FROM records
WHERE run = :run ORDER BY seq;

-- name: answer_insert
INSERT INTO answers (key, run, generation, answer, dropped)
VALUES (:key, :run, :generation, :answer, :dropped);

-- name: answers_all
SELECT seq, key, generation, answer, dropped FROM answers ORDER BY seq;

-- name: answers_of_run
SELECT seq, key, generation, answer, dropped FROM answers WHERE run = :run ORDER BY seq;

-- name: records_after
SELECT seq, key, kind, id, args, result, generation, created_at FROM records
WHERE seq > :after ORDER BY seq;

-- name: answers_after
SELECT seq, key, generation, answer, dropped FROM answers WHERE seq > :after ORDER BY seq;
