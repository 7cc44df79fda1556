-- Migration 0004 (schema 4, commit 15e7b9e): agents with their own tools and models.
-- Runs name their agent (existing runs: the provisioning agent's), take an input and keep
-- the final answer; a run can need attention; model answers are journaled whole; a tool
-- call carries its effect contract, and calls can be redone or fail.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS agent text NOT NULL DEFAULT 'provisioning';
ALTER TABLE runs ADD COLUMN IF NOT EXISTS input text;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS output text;
ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check CHECK (status IN (
    'pending', 'running', 'done', 'failed', 'cancelled', 'needs_attention'));
CREATE INDEX IF NOT EXISTS runs_attention ON runs (updated_at) WHERE status = 'needs_attention';

CREATE TABLE IF NOT EXISTS model_answers (
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    llm_call integer NOT NULL,
    message jsonb NOT NULL,
    usage jsonb,
    generation bigint NOT NULL,
    answered_at timestamptz NOT NULL DEFAULT cr_now(),
    PRIMARY KEY (run_id, llm_call)
);

ALTER TABLE decisions ADD COLUMN IF NOT EXISTS call_id text;

ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS effect text NOT NULL DEFAULT 'keyed'
    CHECK (effect IN ('keyed', 'checked', 'read', 'once'));
ALTER TABLE tool_calls DROP CONSTRAINT IF EXISTS tool_calls_state_check;
ALTER TABLE tool_calls ADD CONSTRAINT tool_calls_state_check CHECK (state IN (
    'intent', 'redo', 'confirmed', 'failed'));
ALTER TABLE tool_calls DROP CONSTRAINT IF EXISTS tool_calls_remote_status_check;
ALTER TABLE tool_calls ADD CONSTRAINT tool_calls_remote_status_check CHECK (remote_status IN (
    'created', 'already_done', 'found', 'read', 'operator', 'failed'));

COMMENT ON TABLE runs IS 'crashresume schema 4';
