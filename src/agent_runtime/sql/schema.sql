-- crashresume / agent_runtime schema: the current shape of every table, written whole.
--
-- agent_runtime.store.migrate runs this file once, on an empty database, in one transaction under
-- the schema lock, and it stamps the version it is (the last line). A database made by an
-- older version is brought to the same shape by the numbered files in sql/migrations/
-- instead; tests/test_schema_migrations.py builds every historical version, migrates it and
-- compares it with this file (columns, constraints, indexes, comments). Changing the
-- schema = a new migration file + the same change here + the stamp below (ARCHITECTURE.md,
-- "Schema migrations"). Columns appear in the order a migrated database has them: a column
-- added later comes last.

-- The clock seam. Every lease decision reads time through cr_now(), never now():
-- tests (and operators) move the clock of every process at once by setting the skew.
CREATE TABLE cr_clock (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    skew interval NOT NULL DEFAULT interval '0',
    -- NULL: the server's clock runs. Set: time stands still there (plus skew) until moved,
    -- so a test suite's lease arithmetic does not depend on how fast the machine is.
    frozen_at timestamptz
);
INSERT INTO cr_clock (singleton, skew) VALUES (true, interval '0');

-- PL/pgSQL, not SQL: a SQL function that reads a table is never inlined, and PostgreSQL
-- (before 18) plans its body again in every statement that calls it, 40-70 us of server
-- CPU each time; PL/pgSQL keeps the plan for the session. Most fenced writes call it.
CREATE FUNCTION cr_now() RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    moment timestamptz;
BEGIN
    SELECT coalesce(frozen_at, clock_timestamp()) + skew INTO moment FROM cr_clock WHERE singleton;
    RETURN moment;
END
$$;

-- One row per agent run.
CREATE TABLE runs (
    id text PRIMARY KEY,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN (
        'pending',    -- created and never claimed, or put back by an operator's
                      -- retry (then generation > 0)             -> running
        'running',    -- a worker holds (or held) the lease       -> done | failed | cancelled
        'done',       -- the model answered "done"; terminal
        'failed',     -- a permanent error, or the supervisor gave up; final until an
                      -- operator's retry                         -> pending
        'cancelled',  -- an operator stopped it; terminal
        'needs_attention'  -- a call whose effect nothing can tell (a 'once' tool) is in
                      -- doubt: no claim takes the run (no worker, no supervisor, no
                      -- give-up) until an operator's resolve --seq N decides -> pending
    )),
    owner text,                        -- token of the worker holding the lease, NULL when free
    generation bigint NOT NULL DEFAULT 0,  -- bumped by every claim; fences older owners
    lease_expires_at timestamptz,      -- cr_now() past this: the owner is presumed dead;
                                       -- with owner NULL: not claimable before (a backoff)
    llm_calls integer NOT NULL DEFAULT 0,  -- model answers that were journaled
    attempts integer NOT NULL DEFAULT 0,   -- claims since the last progress (a confirm)
    failure text,                      -- why a run is failed (or why the last attempt stopped)
    created_at timestamptz NOT NULL DEFAULT cr_now(),
    updated_at timestamptz NOT NULL DEFAULT cr_now(),
    -- The last progress: the run's creation, a confirm, or an operator's retry. The
    -- supervisor gives up on a run only when max_attempts claims *and* give_up_after
    -- seconds since the first claim after it brought none (give_up_exhausted).
    progress_at timestamptz NOT NULL DEFAULT cr_now(),
    -- Which agent the run belongs to (Agent.name: a worker refuses a run of an agent it
    -- does not have), its task, and its final answer. Runs from before agents existed are
    -- the provisioning agent's, which needs no input.
    agent text NOT NULL DEFAULT 'provisioning',
    input text,                        -- NULL: the agent's own default
    output text                        -- the final answer's text, once done
);
-- The supervisor's sweep (claim_expired) takes the longest idle claimable runs first: in
-- this order, so a backlog of thousands is claimed a few at a time without sorting all of
-- it at every sweep (the planner walks the index and stops at the limit; the live leases
-- it passes on the way are at most the runs in flight).
CREATE INDEX runs_claim_order ON runs (updated_at, id)
    WHERE status IN ('pending', 'running');
-- And every sweep first looks for runs that used up their attempts (give_up_exhausted):
-- through this index it reads those few, not every run that waits. Every update that
-- changes attempts also changes updated_at, so neither index costs an update its HOT.
-- There is no index on lease_expires_at (schema 7 dropped it): a heartbeat's renewal,
-- which changes only that column, rewrites the run row in place (HOT).
CREATE INDEX runs_attempts ON runs (attempts)
    WHERE status IN ('pending', 'running');
-- A run's last activity (updated_at: every write that changes the run row sets it, and
-- record_decision refreshes it when it is a minute old or more, so a step keeps its HOT
-- update): `runs` pages through this index by (updated_at DESC, id), one range per status
-- (needs_attention included), and prune finds the oldest final runs of a status (0011).
CREATE INDEX runs_activity ON runs (status, updated_at DESC, id);
-- The supervisor's look for runs of agents it does not have (unserved_runs): one probe per
-- agent with waiting runs, then the other agents' runs, oldest first.
CREATE INDEX runs_agent_waiting ON runs (agent, updated_at, id)
    WHERE status IN ('pending', 'running');
-- The last version stamped here, before schema_version took over (migration 0010). It
-- stays: a crashresume from before it compares this comment, and on any other text would
-- re-apply its own schema.sql over this one.
COMMENT ON TABLE runs IS 'crashresume schema 9';

-- One row per model answer, whole: the assistant message as the model gave it (tool call
-- ids included) and its token usage, so a replay rebuilds the conversation that happened.
--
-- model_answers, decisions and tool_calls carry no foreign key (schema 6 dropped theirs):
-- every row of theirs is written by a fenced statement that finds the run's row first
-- (owned), and an intent follows its decision in the WAL, so no check is left for a key to
-- make, while each key check cost a row lock -- a WAL record -- on every write of a step.
-- Whoever deletes runs deletes their steps too: delete_all_runs (queries.sql) does, for
-- the test suites' and benchmarks' resets; the runtime never deletes a run.
CREATE TABLE model_answers (
    run_id text NOT NULL,
    llm_call integer NOT NULL,         -- runs.llm_calls counting this answer
    message jsonb NOT NULL,            -- the answer (Chat Completions: the assistant message)
    usage jsonb,                       -- token usage, when the model reports it
    generation bigint NOT NULL,        -- the owner generation that asked
    answered_at timestamptz NOT NULL DEFAULT cr_now(),
    PRIMARY KEY (run_id, llm_call)
);

-- One row per decided step (one tool call of an answer, or its final text), journaled
-- with the answer it came from before anything is acted on.
CREATE TABLE decisions (
    run_id text NOT NULL,
    seq integer NOT NULL CHECK (seq >= 0),
    tool text NOT NULL,                -- a tool name, or 'done' for the final answer
    args jsonb NOT NULL,
    llm_call integer NOT NULL,         -- runs.llm_calls after this answer was journaled
    generation bigint NOT NULL,        -- the owner generation that decided it
    decided_at timestamptz NOT NULL DEFAULT cr_now(),
    call_id text,                      -- the model's id of this call
    PRIMARY KEY (run_id, seq)
);

-- One row per tool call: written as an intent before the request, confirmed after.
CREATE TABLE tool_calls (
    run_id text NOT NULL,
    seq integer NOT NULL,
    idem_key text NOT NULL,            -- '<run_id>:<seq>', sent as the Idempotency-Key header
                                       -- (unique as the primary key is: no index of its own)
    -- Every state:
    state text NOT NULL CHECK (state IN (
        'intent',     -- about to call; the outcome is unknown until confirmed  -> confirmed | failed
        'redo',       -- an operator ordered an in-doubt 'once' call sent again -> confirmed | failed
        'confirmed',  -- the tool's answer is recorded; terminal
        'failed'      -- the call failed for certain (the tool said so, or an operator); its error
                      -- is the result the model sees; terminal
    )),
    result jsonb,                      -- the remote's answer, NULL while 'intent'
    -- How the result came about:
    remote_status text CHECK (remote_status IN (
        'created',      -- this call acted
        'already_done', -- a keyed re-send: the remote answered the result it stored the first time
        'found',        -- a checked call's check found the effect; nothing was sent again
        'read',         -- a read: there is no effect
        'operator',     -- an operator resolved the call by hand (call_resolutions says how):
                        -- state 'confirmed' with the result they gave, or 'failed' with their
                        -- reason
        'failed',       -- the call failed (state 'failed')
        'rejected'      -- the runtime refused the model's call (an unknown tool, invalid
                        -- arguments) and never sent it; state 'failed', written with the
                        -- answer (record_decision), the error its result, shown to the model
    )),
    generation bigint NOT NULL,        -- the owner generation that wrote the intent
    confirm_generation bigint,         -- the owner generation that confirmed it
    intent_at timestamptz NOT NULL DEFAULT cr_now(),
    confirmed_at timestamptz,
    -- The tool's effect contract, journaled with the intent: a restart decides from it what
    -- to do with an intent that has no confirm (agent_runtime.tools.tooldef).
    effect text NOT NULL DEFAULT 'keyed' CHECK (effect IN (
        'keyed',      -- re-send under the same key: the remote answers the first result
        'checked',    -- ask the remote whether the effect exists, act only if not
        'read',       -- no effect: call again
        'once'        -- nothing can tell: never re-send; the run needs attention
    )),
    -- A request can outlive its sender (it may still act at the remote after the caller
    -- timed out, died or retried). Every attempt's start is journaled, durably, before it
    -- leaves: the intent for the first, record_send for each later one. lands_by is the
    -- moment until which the latest of them may still act (its start plus the tool's
    -- in-flight bound, on cr_now()); a checked call's check waits until it has passed
    -- (acting.py).
    lands_by timestamptz,              -- NULL: a row from before schema 8, no bound journaled
    sends integer NOT NULL DEFAULT 1,  -- attempts journaled as sent (a read's not counted)
    PRIMARY KEY (run_id, seq)
);
-- `runs --in-doubt` starts from the calls in doubt (an intent without a confirm), few
-- whatever the journal's size. Its price: a confirm changes state, so its update of
-- tool_calls is not HOT (ARCHITECTURE "A journal of a million runs").
CREATE INDEX tool_calls_in_doubt ON tool_calls (run_id) WHERE state = 'intent';

-- Audit trail of lease claims, for the operator view: who took a run over, when, and why.
CREATE TABLE run_claims (
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    generation bigint NOT NULL,
    owner text NOT NULL,
    previous_owner text,               -- NULL for a first claim or a claim of a released run
    previous_expired_at timestamptz,   -- the previous owner's lease expiry, when it had one
    claimed_at timestamptz NOT NULL DEFAULT cr_now(),
    -- Why the claim could take the run. Every claim statement writes it (claim_run,
    -- claim_expired; adopt_lease keeps it). NULL: a claim from before schema 3, reason not
    -- recorded.
    reason text CHECK (reason IN (
        'first',        -- nobody had ever held the run: its first claim
        'handed_back',  -- nobody held it: its last owner released it (a clean stop, resolve),
                        -- or a supervisor freed it when it saw its own child exit
                        -- (expire_lease_of)
        'expired',      -- the previous owner's lease had run out by cr_now(): presumed dead
        'owner_dead',   -- the lease still ran, but the owner's process was proved gone on the
                        -- claimer's host (pid gone, or a zombie)
        'forced'        -- the lease still ran and nobody proved the owner dead: an operator's
                        -- resolve --takeover or an in-process restart; fencing stops the old
                        -- owner at its next write
    )),
    PRIMARY KEY (run_id, generation)
);

-- One row per operator's retry (python -m agent_runtime retry RUN): what the run was
-- before, so its history keeps the failure that the retry cleared.
CREATE TABLE run_retries (
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
CREATE INDEX run_retries_of_run ON run_retries (run_id);

-- One row per operator's decision on a call in doubt (python -m agent_runtime resolve RUN
-- --seq N --confirm JSON | --redo | --fail): what they chose and why, and what the parked
-- run said, so the history keeps it after the run moved on. Written by the same statement
-- that resolves the call and puts the run back to pending (operator_resolve_call).
CREATE TABLE call_resolutions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- in the order they happened
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq integer NOT NULL,              -- the call in doubt
    idem_key text NOT NULL,            -- its key
    effect text NOT NULL,              -- its contract (tool_calls.effect): 'once' as a rule
    choice text NOT NULL CHECK (choice IN (
        'confirm',    -- it acted: the operator's JSON is its result (state confirmed,
                      -- remote_status operator); the model sees that result
        'redo',       -- it did not act: state redo, the next worker sends it once more
        'fail'        -- give it up: state failed (remote_status operator), the model sees
                      -- an error naming the reason
    )),
    reason text,                       -- the operator's --reason, if any
    result jsonb,                      -- what the call's result became (NULL for redo)
    generation bigint NOT NULL,        -- the run's generation (the worker that parked it)
    intent_by bigint NOT NULL,         -- the generation that wrote the intent in doubt, and
    intent_at timestamptz NOT NULL,    -- when (a redo makes the call an intent anew)
    parked_reason text,                -- runs.failure of the parked (or failed) run: why it
                                       -- stopped
    parked_at timestamptz NOT NULL,    -- runs.updated_at of that run: when it stopped
    resolved_at timestamptz NOT NULL DEFAULT cr_now()
);
CREATE INDEX call_resolutions_of_run ON call_resolutions (run_id);

-- Which schema versions this database went through, and how (agent_runtime.store.migrate): its
-- version is the highest. A version is the number of a file in sql/migrations/.
CREATE TABLE schema_version (
    version integer PRIMARY KEY CHECK (version > 0),
    how text NOT NULL CHECK (how IN (
        'created',    -- schema.sql made the database whole, at this version
        'adopted',    -- made by an older schema.sql, before this table existed: recognised
                      -- at this version by the comment on runs ('crashresume schema N')
        'migrated'    -- the migration file of this number ran
    )),
    applied_at timestamptz NOT NULL DEFAULT now()
);
-- The version this file is: the number of the last file in sql/migrations/.
INSERT INTO schema_version (version, how) VALUES (11, 'created');
