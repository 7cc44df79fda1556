-- Migration 0003 (schema 3, commit b23a9a5): why each claim took the run; the last
-- progress of a run; the operator's retries.

-- run_claims.reason came with schema 2's merge (fe23732) without a new number: a database
-- stamped 'crashresume schema 2' may have it (and so may one made by 5554cce, unstamped).
-- Older claims keep NULL: reason not recorded.
ALTER TABLE run_claims ADD COLUMN IF NOT EXISTS reason text CHECK (reason IN (
    'first', 'handed_back', 'expired', 'owner_dead', 'forced'));

-- Existing runs count their progress from the upgrade.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS progress_at timestamptz NOT NULL DEFAULT cr_now();

CREATE TABLE IF NOT EXISTS run_retries (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    generation bigint NOT NULL,
    previous_status text NOT NULL CHECK (previous_status IN ('failed', 'pending', 'running')),
    previous_failure text,
    previous_attempts integer NOT NULL,
    previous_since timestamptz NOT NULL,
    retried_at timestamptz NOT NULL DEFAULT cr_now()
);
CREATE INDEX IF NOT EXISTS run_retries_of_run ON run_retries (run_id);

COMMENT ON TABLE runs IS 'crashresume schema 3';
