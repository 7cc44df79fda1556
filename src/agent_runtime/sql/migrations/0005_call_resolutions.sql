-- Migration 0005 (schema 5, commit 734995b): the operator's decisions on calls in doubt.
CREATE TABLE IF NOT EXISTS call_resolutions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq integer NOT NULL,
    idem_key text NOT NULL,
    effect text NOT NULL,
    choice text NOT NULL CHECK (choice IN ('confirm', 'redo', 'fail')),
    reason text,
    result jsonb,
    generation bigint NOT NULL,
    intent_by bigint NOT NULL,
    intent_at timestamptz NOT NULL,
    parked_reason text,
    parked_at timestamptz NOT NULL,
    resolved_at timestamptz NOT NULL DEFAULT cr_now()
);
CREATE INDEX IF NOT EXISTS call_resolutions_of_run ON call_resolutions (run_id);

COMMENT ON TABLE runs IS 'crashresume schema 5';
