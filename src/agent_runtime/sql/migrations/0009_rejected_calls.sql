-- Migration 0009 (schema 9, commit 55665c0): a model's call the runtime refused is
-- journaled, never sent: remote_status 'rejected'.
ALTER TABLE tool_calls DROP CONSTRAINT IF EXISTS tool_calls_remote_status_check;
ALTER TABLE tool_calls ADD CONSTRAINT tool_calls_remote_status_check CHECK (remote_status IN (
    'created', 'already_done', 'found', 'read', 'operator', 'failed', 'rejected'));

COMMENT ON TABLE runs IS 'crashresume schema 9';
