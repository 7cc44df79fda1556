-- The `race` event's gate (properties/race.py), in the suite's own database only: a write
-- of a call held inside its statement, after its fence read, while a claim goes ahead.
-- Never used by the runtime; no runtime statement names anything here.

-- name: install_race_gate
-- Every row a backend writes to tool_calls (record_intent, record_send, record_confirm,
-- an operator's or a redo's) passes this gate: after the statement's fence read (its owned
-- CTE, which FOR SHARE locks the run row with), before the row is written and committed.
-- A backend the runner armed -- it holds the advisory lock (RACE_CLASS, that backend's pid)
-- -- waits here until the runner lets go; any other takes the shared lock at once (it is
-- gone at its commit: an unarmed write costs one lock in memory). One transaction, and
-- only if missing: several runners may share the suite's database.
DO $install$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'properties_race_gate') THEN
        CREATE OR REPLACE FUNCTION properties_race_gate() RETURNS trigger
        LANGUAGE plpgsql AS $gate$
        BEGIN
            IF NOT pg_try_advisory_xact_lock_shared(31411, pg_backend_pid()) THEN
                PERFORM pg_advisory_xact_lock_shared(31411, pg_backend_pid());
            END IF;
            RETURN NEW;
        END
        $gate$;
        CREATE TRIGGER properties_race_gate BEFORE INSERT OR UPDATE ON tool_calls
            FOR EACH ROW EXECUTE FUNCTION properties_race_gate();
    END IF;
END
$install$;

-- name: install_claim_gate
-- The same gate for claims (the race_claim event): every row inserted into run_claims --
-- the last step of a claim statement, after its update of the run row (locked until its
-- commit) -- waits while the runner holds the advisory lock (RACE_CLASS + 1, 0): every
-- claim, whoever makes it.
DO $install$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'properties_claim_gate') THEN
        CREATE OR REPLACE FUNCTION properties_claim_gate() RETURNS trigger
        LANGUAGE plpgsql AS $gate$
        BEGIN
            IF NOT pg_try_advisory_xact_lock_shared(31412, 0) THEN
                PERFORM pg_advisory_xact_lock_shared(31412, 0);
            END IF;
            RETURN NEW;
        END
        $gate$;
        CREATE TRIGGER properties_claim_gate BEFORE INSERT ON run_claims
            FOR EACH ROW EXECUTE FUNCTION properties_claim_gate();
    END IF;
END
$install$;

-- name: arm_claim_gate
SELECT pg_advisory_lock(31412, 0);

-- name: open_claim_gate
SELECT pg_advisory_unlock(31412, 0) AS held;

-- name: claims_after
-- The claims of run %(run)s after generation %(generation)s, in order.
SELECT generation, owner, previous_owner FROM run_claims
WHERE run_id = %(run)s AND generation > %(generation)s ORDER BY generation;

-- name: task_of
SELECT agent, input FROM runs WHERE id = %(run)s;

-- name: arm_race_gate
-- The backend %(pid)s's next write of a call waits at the gate (RACE_CLASS is 31411).
SELECT pg_advisory_lock(31411, %(pid)s);

-- name: open_race_gate
SELECT pg_advisory_unlock(31411, %(pid)s) AS held;

-- name: backend_waits
-- What backend %(pid)s waits for right now: at the gate ('advisory'), on a row or a
-- transaction another holds ('tuple', 'transactionid'), or nothing (NULL).
SELECT wait_event_type, wait_event FROM pg_stat_activity WHERE pid = %(pid)s;

-- name: race_marks
-- Everything a fenced write of a call can change in run %(run)s: its call rows (an intent,
-- a send, a confirm) and what a confirm's progress writes on the run row.
SELECT r.generation, r.attempts, r.progress_at,
       coalesce((SELECT jsonb_agg(jsonb_build_array(t.seq, t.state, t.generation,
                                                    t.confirm_generation, t.sends, t.lands_by)
                                 ORDER BY t.seq)
                 FROM tool_calls t WHERE t.run_id = r.id), '[]') AS calls
FROM runs r WHERE r.id = %(run)s;
