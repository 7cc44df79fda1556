-- Migration 0002 (schema 2, commit 7b9702b): a clock that can stand still.
-- NULL: the server's clock runs. Set: time stands still there (plus skew) until moved.
ALTER TABLE cr_clock ADD COLUMN IF NOT EXISTS frozen_at timestamptz;

CREATE OR REPLACE FUNCTION cr_now() RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT coalesce(frozen_at, clock_timestamp()) + skew FROM cr_clock WHERE singleton
$$;

COMMENT ON TABLE runs IS 'crashresume schema 2';
