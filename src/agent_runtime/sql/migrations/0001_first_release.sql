-- Migration 0001: the first release's schema (commit e35a0ae), whole. A database made by
-- it has no comment on runs; agent_runtime.store.migrate recognises it as version 1. Never run on
-- a database that has anything: migrate creates an empty one from schema.sql instead; the
-- tests run this file to prove that the migrations alone build what schema.sql builds.
--
-- Every migration is one step, run in one transaction (with its schema_version row, from
-- 0010 on) under the schema lock. 0002-0009 keep the IF [NOT] EXISTS of the schema.sql
-- they come from: a version number then stood for more than one shape (see 0003, 0008).

-- The clock seam. Every lease decision reads time through cr_now(), never now():
-- tests (and operators) move the clock of every process at once by setting the skew.
CREATE TABLE IF NOT EXISTS cr_clock (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    skew interval NOT NULL DEFAULT interval '0'
);
INSERT INTO cr_clock (singleton, skew) VALUES (true, interval '0') ON CONFLICT DO NOTHING;

CREATE OR REPLACE FUNCTION cr_now() RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT clock_timestamp() + (SELECT skew FROM cr_clock WHERE singleton)
$$;

-- One row per agent run.
CREATE TABLE IF NOT EXISTS runs (
    id text PRIMARY KEY,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN (
        'pending',    -- created, never claimed                  -> running
        'running',    -- a worker holds (or held) the lease       -> done | failed | cancelled
        'done',       -- the model answered "done"; terminal
        'failed',     -- gave up after a permanent error or too many attempts; terminal
        'cancelled'   -- an operator stopped it; terminal
    )),
    owner text,                        -- token of the worker holding the lease, NULL when free
    generation bigint NOT NULL DEFAULT 0,  -- bumped by every claim; fences older owners
    lease_expires_at timestamptz,      -- cr_now() past this: the owner is presumed dead
    llm_calls integer NOT NULL DEFAULT 0,  -- model answers that were journaled
    attempts integer NOT NULL DEFAULT 0,   -- claims that ended without finishing the run
    failure text,                      -- why a run is failed (or why the last attempt stopped)
    created_at timestamptz NOT NULL DEFAULT cr_now(),
    updated_at timestamptz NOT NULL DEFAULT cr_now()
);
CREATE INDEX IF NOT EXISTS runs_claimable ON runs (lease_expires_at)
    WHERE status IN ('pending', 'running');

-- One row per decided step: the model's answer, journaled before it is acted on.
CREATE TABLE IF NOT EXISTS decisions (
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq integer NOT NULL CHECK (seq >= 0),
    tool text NOT NULL,                -- a tool name, or 'done' for the final answer
    args jsonb NOT NULL,
    llm_call integer NOT NULL,         -- runs.llm_calls after this answer was journaled
    generation bigint NOT NULL,        -- the owner generation that decided it
    decided_at timestamptz NOT NULL DEFAULT cr_now(),
    PRIMARY KEY (run_id, seq)
);

-- One row per tool call: written as an intent before the request, confirmed after.
CREATE TABLE IF NOT EXISTS tool_calls (
    run_id text NOT NULL,
    seq integer NOT NULL,
    idem_key text NOT NULL UNIQUE,     -- '<run_id>:<seq>', sent as the Idempotency-Key header
    state text NOT NULL CHECK (state IN (
        'intent',     -- about to call; the outcome is unknown until confirmed -> confirmed
        'confirmed'   -- the remote's answer is recorded; terminal
    )),
    result jsonb,                      -- the remote's answer, NULL while 'intent'
    remote_status text CHECK (remote_status IN ('created', 'already_done')),
    generation bigint NOT NULL,        -- the owner generation that wrote the intent
    confirm_generation bigint,         -- the owner generation that confirmed it
    intent_at timestamptz NOT NULL DEFAULT cr_now(),
    confirmed_at timestamptz,
    PRIMARY KEY (run_id, seq),
    FOREIGN KEY (run_id, seq) REFERENCES decisions (run_id, seq) ON DELETE CASCADE
);

-- Audit trail of lease claims, for the operator view: who took a run over, and when.
CREATE TABLE IF NOT EXISTS run_claims (
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    generation bigint NOT NULL,
    owner text NOT NULL,
    previous_owner text,               -- NULL for a first claim or a claim of a released run
    previous_expired_at timestamptz,   -- the lease that had run out, when it was a takeover
    claimed_at timestamptz NOT NULL DEFAULT cr_now(),
    PRIMARY KEY (run_id, generation)
);
