-- crashresume / agent_runtime schema.
-- Applied idempotently by the runtime on first use (agent_runtime.db.ensure_schema);
-- every statement must be safe to run again on a database that already has it.

-- The clock seam. Every lease decision reads time through cr_now(), never now():
-- tests (and operators) move the clock of every process at once by setting the skew.
CREATE TABLE IF NOT EXISTS cr_clock (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    skew interval NOT NULL DEFAULT interval '0'
);
-- NULL: the server's clock runs. Set: time stands still there (plus skew) until moved, so
-- a test suite's lease arithmetic does not depend on how fast the machine is.
ALTER TABLE cr_clock ADD COLUMN IF NOT EXISTS frozen_at timestamptz;
INSERT INTO cr_clock (singleton, skew) VALUES (true, interval '0') ON CONFLICT DO NOTHING;

CREATE OR REPLACE FUNCTION cr_now() RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT coalesce(frozen_at, clock_timestamp()) + skew FROM cr_clock WHERE singleton
$$;

-- One row per agent run.
CREATE TABLE IF NOT EXISTS runs (
    id text PRIMARY KEY,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN (
        'pending',    -- created and never claimed, or put back by an operator's
                      -- retry (then generation > 0)             -> running
        'running',    -- a worker holds (or held) the lease       -> done | failed | cancelled
        'done',       -- the model answered "done"; terminal
        'failed',     -- a permanent error, or the supervisor gave up; final until an
                      -- operator's retry                         -> pending
        'cancelled'   -- an operator stopped it; terminal
    )),
    owner text,                        -- token of the worker holding the lease, NULL when free
    generation bigint NOT NULL DEFAULT 0,  -- bumped by every claim; fences older owners
    lease_expires_at timestamptz,      -- cr_now() past this: the owner is presumed dead;
                                       -- with owner NULL: not claimable before (a backoff)
    llm_calls integer NOT NULL DEFAULT 0,  -- model answers that were journaled
    attempts integer NOT NULL DEFAULT 0,   -- claims since the last progress (a confirm)
    failure text,                      -- why a run is failed (or why the last attempt stopped)
    created_at timestamptz NOT NULL DEFAULT cr_now(),
    updated_at timestamptz NOT NULL DEFAULT cr_now()
);
CREATE INDEX IF NOT EXISTS runs_claimable ON runs (lease_expires_at)
    WHERE status IN ('pending', 'running');
-- The last progress: the run's creation, a confirm, or an operator's retry. The supervisor
-- gives up on a run only when max_attempts claims *and* give_up_after seconds since the
-- first claim after it brought none (give_up_exhausted). Added by ALTER for older databases
-- (their runs count from the upgrade).
ALTER TABLE runs ADD COLUMN IF NOT EXISTS progress_at timestamptz NOT NULL DEFAULT cr_now();

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

-- Audit trail of lease claims, for the operator view: who took a run over, when, and why.
CREATE TABLE IF NOT EXISTS run_claims (
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    generation bigint NOT NULL,
    owner text NOT NULL,
    previous_owner text,               -- NULL for a first claim or a claim of a released run
    previous_expired_at timestamptz,   -- the previous owner's lease expiry, when it had one
    claimed_at timestamptz NOT NULL DEFAULT cr_now(),
    PRIMARY KEY (run_id, generation)
);
-- Why the claim could take the run. Every claim statement writes it (claim_run,
-- claim_expired; adopt_lease keeps it). Added by ALTER so that a database made by an
-- older schema.sql gets it too; its older claims keep NULL: reason not recorded.
ALTER TABLE run_claims ADD COLUMN IF NOT EXISTS reason text CHECK (reason IN (
    'first',        -- nobody had ever held the run: its first claim
    'handed_back',  -- nobody held it: its last owner released it (a clean stop, resolve), or
                    -- a supervisor freed it when it saw its own child exit (expire_lease_of)
    'expired',      -- the previous owner's lease had run out by cr_now(): presumed dead
    'owner_dead',   -- the lease still ran, but the owner's process was proved gone on the
                    -- claimer's host (pid gone, or a zombie)
    'forced'        -- the lease still ran and nobody proved the owner dead: an operator's
                    -- resolve --takeover or an in-process restart; fencing stops the old owner
                    -- at its next write
));

-- One row per operator's retry (python -m agent_runtime retry RUN): what the run was
-- before, so its history keeps the failure that the retry cleared.
CREATE TABLE IF NOT EXISTS run_retries (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- in the order they happened
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    generation bigint NOT NULL,        -- the run's generation when retried (a claim bumps it)
    previous_status text NOT NULL CHECK (previous_status IN (
        'failed',     -- put back to pending; attempts, backoff and give-up clock reset
        'pending',    -- free but not final (never claimed, or backing off): attempts,
        'running'     -- backoff and give-up clock reset, the status kept
    )),
    previous_failure text,             -- runs.failure before the retry (then cleared)
    previous_attempts integer NOT NULL,
    previous_since timestamptz NOT NULL,  -- runs.updated_at before: when it failed or stopped
    retried_at timestamptz NOT NULL DEFAULT cr_now()
);
CREATE INDEX IF NOT EXISTS run_retries_of_run ON run_retries (run_id);

-- The version ensure_schema compares (agent_runtime.db.SCHEMA_VERSION): set last, so a
-- half-applied schema is applied again.
COMMENT ON TABLE runs IS 'crashresume schema 3';
