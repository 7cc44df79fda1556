-- Migration 0011 (issue 24): a journal of a million runs. The operator's reads and the
-- supervisor's claims read through indexes in exactly their order, so a page of `runs` or
-- a claim costs the same with ten thousand runs or a million; prune removes final runs.
CREATE INDEX IF NOT EXISTS runs_activity ON runs (status, updated_at DESC, id);
CREATE INDEX IF NOT EXISTS tool_calls_in_doubt ON tool_calls (run_id) WHERE state = 'intent';
-- runs_activity serves needs_attention's order too.
DROP INDEX IF EXISTS runs_attention;
CREATE INDEX IF NOT EXISTS runs_agent_waiting ON runs (agent, updated_at, id)
    WHERE status IN ('pending', 'running');
