-- Queries of the property suite (properties/observe.py, properties/runner.py), by name.
-- They only read the runtime's tables (the runtime's delete_all_runs empties them).

-- name: reset_session
-- A spare in-process connection, before the next worker gets it: no setting a worker
-- left on its session (a leaked synchronous_commit, say) reaches the next schedule.
RESET ALL;

-- name: vacuum_journal
-- Every example deletes what it wrote; the suite's server runs no autovacuum (its
-- commits would flush the WAL on a timer: properties/server.py), so the runner vacuums.
VACUUM runs, decisions, tool_calls, model_answers, run_claims;

-- name: snapshot
-- Everything observable in the journal at one instant, one row per run.
SELECT r.id, r.status, r.owner, r.generation, r.llm_calls, r.failure, r.lease_expires_at,
       r.attempts, r.progress_at, r.output,
       -- the text of the model answer journaled for the run's final decision, if any
       (SELECT a.message->>'content' FROM decisions d
          JOIN model_answers a ON a.run_id = d.run_id AND a.llm_call = d.llm_call
         WHERE d.run_id = r.id AND d.tool = 'done' AND jsonb_typeof(a.message->'content') = 'string'
         ORDER BY d.seq DESC LIMIT 1) AS final_text,
       coalesce((SELECT jsonb_agg(jsonb_build_array(d.seq, d.tool, d.args, d.llm_call,
                                                    d.generation, d.call_id) ORDER BY d.seq)
                 FROM decisions d WHERE d.run_id = r.id), '[]') AS decisions,
       coalesce((SELECT jsonb_agg(jsonb_build_array(
                            a.llm_call,
                            coalesce((SELECT jsonb_agg(tc->>'id' ORDER BY i)
                                      FROM jsonb_array_elements(
                                               CASE jsonb_typeof(a.message->'tool_calls')
                                               WHEN 'array' THEN a.message->'tool_calls'
                                               ELSE '[]' END) WITH ORDINALITY AS x(tc, i)),
                                     '[]')) ORDER BY a.llm_call)
                 FROM model_answers a WHERE a.run_id = r.id), '[]') AS answers,
       coalesce((SELECT jsonb_agg(jsonb_build_array(t.seq, t.idem_key, t.state, t.result,
                                                    t.remote_status, t.generation,
                                                    t.confirm_generation, t.effect, t.sends)
                                 ORDER BY t.seq)
                 FROM tool_calls t WHERE t.run_id = r.id), '[]') AS calls,
       coalesce((SELECT jsonb_agg(jsonb_build_array(c.generation, c.owner, c.previous_owner,
                                                    c.previous_expired_at <= c.claimed_at,
                                                    c.reason) ORDER BY c.generation)
                 FROM run_claims c WHERE c.run_id = r.id), '[]') AS claims
FROM runs r ORDER BY r.id;

-- name: generations
SELECT id, generation FROM runs;

-- name: lease_of
SELECT owner, generation, status, lease_expires_at, attempts, cr_now() AS now
FROM runs WHERE id = %(run)s;

-- name: in_flight_release
-- A worker that stopped with CallInFlight must have left its run free until a checked
-- call's journaled attempt can no longer land, and that moment must still be ahead. The
-- call's key and the generation that wrote its intent say whose attempt that was.
SELECT r.owner IS NULL AND r.lease_expires_at >= max(t.lands_by)
           AND max(t.lands_by) > cr_now() AS explained,
       max(t.idem_key) AS key, max(t.generation) AS generation
FROM runs r
JOIN tool_calls t ON t.run_id = r.id AND t.effect = 'checked' AND t.state = 'intent'
WHERE r.id = %(run)s
GROUP BY r.owner, r.lease_expires_at;

-- name: failed_run
-- How a run stands after its worker stopped with a permanent error, and how many of its
-- model's answers had a call refused (TooManyBadAnswers: more of them than the worker's
-- max_bad_answers).
SELECT r.status, r.owner, r.generation, r.lease_expires_at, r.updated_at, r.failure,
       (SELECT count(DISTINCT d.llm_call) FROM decisions d
        JOIN tool_calls t ON t.run_id = d.run_id AND t.seq = d.seq
        WHERE d.run_id = r.id AND t.remote_status = 'rejected') AS bad_answers
FROM runs r WHERE r.id = %(run)s;

-- name: leases
SELECT id, owner, generation, status, lease_expires_at, updated_at, cr_now() AS now FROM runs;

-- name: generation_of_owner
SELECT max(generation) AS generation FROM run_claims WHERE run_id = %(run)s AND owner = %(owner)s;

-- name: status_of
SELECT status FROM runs WHERE id = %(run)s;

-- name: statuses
SELECT id, status FROM runs;

-- name: terminate_backend
SELECT pg_terminate_backend(%(pid)s) AS terminated;

-- name: backend_alive
SELECT 1 AS alive FROM pg_stat_activity WHERE pid = %(pid)s;

-- name: calls_in_doubt
SELECT seq FROM tool_calls WHERE run_id = %(run)s AND state = 'intent' ORDER BY seq;

-- name: wal_writer
-- The WAL writer's process and what it waits for (properties/server.py holds it).
SELECT pid, wait_event FROM pg_stat_activity WHERE backend_type = 'walwriter';

-- name: checkpoint
CHECKPOINT;

-- name: journaled_answers
-- Every journaled model answer, whole: the teardown's ``asked`` check holds each to an
-- answer the model gave (its message and its token usage).
SELECT run_id, llm_call, message, usage FROM model_answers ORDER BY run_id, llm_call;

-- name: remade_decisions
-- Every decision whose answer the journal keeps without an assistant message (the seed's
-- decide protocol keeps its answer as it came: a tool and its arguments), in run and step
-- order: the teardown's ``asked`` check holds a Chat Completions question's remade
-- answers to them.
SELECT d.run_id, d.seq, d.tool, d.args, d.llm_call, d.call_id
FROM decisions d
LEFT JOIN model_answers a ON a.run_id = d.run_id AND a.llm_call = d.llm_call
WHERE a.run_id IS NULL OR a.message->>'role' IS DISTINCT FROM 'assistant'
ORDER BY d.run_id, d.seq;

-- name: resolved_call
-- One call as an operator's resolution left it, with its run's status (the suite holds
-- the resolution's report to them).
SELECT t.state, t.result, t.remote_status, t.confirmed_at, r.status
FROM tool_calls t JOIN runs r ON r.id = t.run_id
WHERE t.run_id = %(run)s AND t.seq = %(seq)s;

-- name: given_up
-- The runs a supervisor gave up (give_up_exhausted): failed for good, as it must.
SELECT id FROM runs WHERE status = 'failed' AND starts_with(failure, 'gave up after ');

-- name: age_run
-- A pending run as one claimed many times already (its generation past the small ints a
-- Python interpreter shares: an identity test of two equal generations fails there).
UPDATE runs SET generation = %(generation)s WHERE id = %(run)s AND status = 'pending';

-- name: age_answers
-- A pending run as one whose model answered many times already (its answers' numbers past
-- the small ints a Python interpreter shares: an identity test of two equal answer numbers
-- fails there).
UPDATE runs SET llm_calls = %(answers)s WHERE id = %(run)s AND status = 'pending';

-- name: forget_answers
-- A run's journal as one begun before schema 4 left it: decisions without a kept model
-- answer or a call id (migration 0004 made both, and could not know the earlier ones).
WITH forgotten AS (
    DELETE FROM model_answers WHERE run_id = %(run)s
)
UPDATE decisions SET call_id = NULL WHERE run_id = %(run)s
RETURNING seq;

-- name: decided_steps
-- A run's decisions, in step order, with the state of each one's call.
SELECT d.seq, d.tool, t.state
FROM decisions d LEFT JOIN tool_calls t ON t.run_id = d.run_id AND t.seq = d.seq
WHERE d.run_id = %(run)s
ORDER BY d.seq;

-- name: refuse_adoption
-- A database that refuses one write with an error no worker expects (an operator's
-- trigger, a constraint added under live workers): a run named 'unheld...' changing owner
-- within its generation -- a pool worker adopting the supervisor's claim -- raises.
CREATE OR REPLACE FUNCTION properties_refuse_adoption() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF starts_with(NEW.id, 'unheld') AND OLD.owner IS NOT NULL AND NEW.owner IS NOT NULL
       AND NEW.owner <> OLD.owner AND NEW.generation = OLD.generation THEN
        RAISE EXCEPTION 'the adoption of run %% is refused by a trigger', NEW.id;  -- %% for psycopg
    END IF;
    RETURN NEW;
END $$;

-- name: refuse_adoption_on
CREATE OR REPLACE TRIGGER properties_refuse_adoption BEFORE UPDATE ON runs
FOR EACH ROW EXECUTE FUNCTION properties_refuse_adoption();

-- name: refuse_adoption_off
DROP TRIGGER IF EXISTS properties_refuse_adoption ON runs;

-- name: lock_run
-- A run's row locked, as another supervisor's claim of it holds it until it commits.
SELECT id FROM runs WHERE id = %(run)s FOR UPDATE;

-- name: lock_timeout
-- How long this session's statements may wait for a lock before they fail.
SELECT set_config('lock_timeout', %(wait)s, false);
