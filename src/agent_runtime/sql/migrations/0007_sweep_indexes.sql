-- Migration 0007 (schema 7, commits 68b6b62 and d3aa012): the sweep walks an index instead
-- of sorting the backlog; cr_now() becomes PL/pgSQL so that it stops costing a plan per
-- statement; the index on lease_expires_at goes, so that a renewal is HOT.
CREATE OR REPLACE FUNCTION cr_now() RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    moment timestamptz;
BEGIN
    SELECT coalesce(frozen_at, clock_timestamp()) + skew INTO moment FROM cr_clock WHERE singleton;
    RETURN moment;
END
$$;

CREATE INDEX IF NOT EXISTS runs_claim_order ON runs (updated_at, id)
    WHERE status IN ('pending', 'running');
CREATE INDEX IF NOT EXISTS runs_attempts ON runs (attempts)
    WHERE status IN ('pending', 'running');
DROP INDEX IF EXISTS runs_claimable;

COMMENT ON TABLE runs IS 'crashresume schema 7';
