-- Migration 0008 (schema 8, commit d147187): a request can outlive its sender; every
-- attempt's start is journaled, and until when it may still act.

-- Schema 7 first shipped (68b6b62) still creating runs_claimable, under the same number.
DROP INDEX IF EXISTS runs_claimable;

ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS lands_by timestamptz;
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS sends integer NOT NULL DEFAULT 1;

COMMENT ON TABLE runs IS 'crashresume schema 8';
