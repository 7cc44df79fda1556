-- Migration 0006 (schema 6, commit 878a3b2): the step tables lose their foreign keys and
-- idem_key its second index (schema.sql says why, above model_answers).
ALTER TABLE model_answers DROP CONSTRAINT IF EXISTS model_answers_run_id_fkey;
ALTER TABLE decisions DROP CONSTRAINT IF EXISTS decisions_run_id_fkey;
ALTER TABLE tool_calls DROP CONSTRAINT IF EXISTS tool_calls_run_id_seq_fkey;
ALTER TABLE tool_calls DROP CONSTRAINT IF EXISTS tool_calls_idem_key_key;

COMMENT ON TABLE runs IS 'crashresume schema 6';
