-- The mock support desk's durable state. Named queries, loaded once by mock_remotes._sql.
-- Connection settings are in sqlite.sql. Tickets are keyed (filed at most once per
-- Idempotency-Key); deliveries are not (sending twice delivers twice); every request
-- to an operation is logged in `answers`, in order.

-- name: schema
CREATE TABLE IF NOT EXISTS tickets (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT, -- filing order
    key        TEXT NOT NULL UNIQUE,              -- Idempotency-Key: filed at most once
    run        TEXT NOT NULL,                     -- key.rsplit(':', 1)[0]
    id         TEXT NOT NULL UNIQUE,              -- T-0000001, T-0000002, ...
    args       TEXT NOT NULL,                     -- JSON, keys sorted: compared on a repeat
    result     TEXT NOT NULL,                     -- JSON: the first answer, status 'created'
    created_at TEXT NOT NULL                      -- ISO 8601, UTC
);
CREATE INDEX IF NOT EXISTS tickets_run ON tickets (run);
CREATE TABLE IF NOT EXISTS deliveries (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT, -- delivery order
    id           TEXT NOT NULL UNIQUE,              -- M-0000001, one per delivery
    message_id   TEXT NOT NULL,                     -- the sender's id: NOT unique, a resend delivers again
    run          TEXT NOT NULL,                     -- message_id.rsplit(':', 1)[0]
    recipient    TEXT NOT NULL,                     -- the "to" address
    subject      TEXT NOT NULL,
    body         TEXT NOT NULL,
    delivered_at TEXT NOT NULL                      -- ISO 8601, UTC
);
CREATE INDEX IF NOT EXISTS deliveries_message ON deliveries (message_id);
CREATE INDEX IF NOT EXISTS deliveries_run ON deliveries (run);
CREATE TABLE IF NOT EXISTS counters (
    kind  TEXT PRIMARY KEY,                       -- 'ticket' | 'message'
    value INTEGER NOT NULL                        -- the last number handed out
);
CREATE TABLE IF NOT EXISTS answers (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,    -- the order the desk answered in
    op      TEXT NOT NULL,                        -- lookup_order | file_ticket | send_email | check_message
    ref     TEXT NOT NULL,                        -- the order id, Idempotency-Key or message_id
    answer  TEXT NOT NULL,                        -- found | created | already_done | delivered
                                                  -- | present | absent | the refusal's error code
    dropped INTEGER NOT NULL,                     -- 1: drop_after lost this answer on the way
    generation INTEGER                            -- the request's X-Fencing-Generation, if sent
                                                  -- (recorded, not enforced: the desk fences nothing)
);

-- name: reset
-- One script (executescript): forget everything in one IMMEDIATE transaction.
BEGIN IMMEDIATE;
DELETE FROM tickets;
DELETE FROM deliveries;
DELETE FROM counters;
DELETE FROM answers;
DELETE FROM sqlite_sequence WHERE name IN ('tickets', 'deliveries', 'answers');
COMMIT;

-- name: counter_next
INSERT INTO counters (kind, value) VALUES (:kind, 1)
ON CONFLICT (kind) DO UPDATE SET value = value + 1
RETURNING value;

-- name: ticket_get
SELECT key, id, args, result, created_at FROM tickets WHERE key = :key;

-- name: ticket_insert
INSERT INTO tickets (key, run, id, args, result, created_at)
VALUES (:key, :run, :id, :args, :result, :created_at);

-- name: tickets_all
SELECT key, id, args, result, created_at FROM tickets ORDER BY seq;

-- name: tickets_of_run
SELECT key, id, args, result, created_at FROM tickets WHERE run = :run ORDER BY seq;

-- name: delivery_insert
INSERT INTO deliveries (id, message_id, run, recipient, subject, body, delivered_at)
VALUES (:id, :message_id, :run, :recipient, :subject, :body, :delivered_at);

-- name: deliveries_all
SELECT id, message_id, recipient, subject, body, delivered_at FROM deliveries ORDER BY seq;

-- name: deliveries_of_message
SELECT id, message_id, recipient, subject, body, delivered_at FROM deliveries
WHERE message_id = :message_id ORDER BY seq;

-- name: deliveries_of_run
SELECT id, message_id, recipient, subject, body, delivered_at FROM deliveries
WHERE run = :run ORDER BY seq;

-- name: answer_insert
INSERT INTO answers (op, ref, answer, dropped, generation)
VALUES (:op, :ref, :answer, :dropped, :generation);

-- name: answers_all
SELECT seq, op, ref, answer, dropped, generation FROM answers ORDER BY seq;
