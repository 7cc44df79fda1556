-- Queries of the deliberately broken runtime variants (properties/variants/).
-- Never used by the real runtime: each one drops a guarantee on purpose, so that
-- the property suite can show it notices.

-- == no_fencing: the journal's writes check the run, not who owns it ==

-- name: unfenced_check_owner
SELECT 1 FROM runs WHERE id = %(run)s AND status = 'running';

-- name: unfenced_renew_lease
UPDATE runs SET lease_expires_at = cr_now() + make_interval(secs => %(seconds)s)
WHERE id = %(run)s AND status = 'running'
RETURNING lease_expires_at;

-- name: unfenced_record_decision
WITH owned AS (
    UPDATE runs SET llm_calls = llm_calls + 1, updated_at = cr_now()
    WHERE id = %(run)s AND status = 'running'
    RETURNING id, llm_calls
)
INSERT INTO decisions (run_id, seq, tool, args, llm_call, generation)
SELECT id, %(seq)s, %(tool)s, %(args)s, llm_calls, %(generation)s FROM owned
RETURNING llm_call, decided_at;

-- name: unfenced_record_intent
WITH owned AS (
    UPDATE runs SET updated_at = cr_now() WHERE id = %(run)s AND status = 'running'
    RETURNING id
)
INSERT INTO tool_calls (run_id, seq, idem_key, state, generation)
SELECT id, %(seq)s, %(key)s, 'intent', %(generation)s FROM owned
RETURNING intent_at;

-- name: unfenced_record_confirm
WITH owned AS (
    UPDATE runs SET updated_at = cr_now(), attempts = 0
    WHERE id = %(run)s AND status = 'running'
    RETURNING id
)
UPDATE tool_calls t
SET state = 'confirmed', result = %(result)s, remote_status = %(remote)s,
    confirm_generation = %(generation)s, confirmed_at = cr_now()
FROM owned
WHERE t.run_id = owned.id AND t.seq = %(seq)s AND t.state = 'intent'
RETURNING t.confirmed_at;

-- name: unfenced_finish_run
UPDATE runs
SET status = 'done', owner = NULL, lease_expires_at = NULL, failure = NULL, attempts = 0,
    updated_at = cr_now()
WHERE id = %(run)s AND status = 'running'
RETURNING id;

-- name: unfenced_fail_run
UPDATE runs
SET status = 'failed', owner = NULL, lease_expires_at = NULL, failure = %(reason)s,
    updated_at = cr_now()
WHERE id = %(run)s AND status = 'running'
RETURNING id;

-- == no_decision_replay: a re-asked step overwrites the journaled decision ==

-- name: overwrite_decision
WITH owned AS (
    UPDATE runs SET llm_calls = llm_calls + 1, updated_at = cr_now()
    WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s
      AND status = 'running'
    RETURNING id, llm_calls
)
INSERT INTO decisions (run_id, seq, tool, args, llm_call, generation)
SELECT id, %(seq)s, %(tool)s, %(args)s, llm_calls, %(generation)s FROM owned
ON CONFLICT (run_id, seq) DO UPDATE
SET tool = excluded.tool, args = excluded.args, llm_call = excluded.llm_call,
    generation = excluded.generation, decided_at = cr_now()
RETURNING llm_call, decided_at;

-- name: overwrite_intent
WITH owned AS (
    UPDATE runs SET updated_at = cr_now()
    WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s
      AND status = 'running'
    RETURNING id
)
INSERT INTO tool_calls (run_id, seq, idem_key, state, generation)
SELECT id, %(seq)s, %(key)s, 'intent', %(generation)s FROM owned
ON CONFLICT (run_id, seq) DO UPDATE
SET state = 'intent', result = NULL, remote_status = NULL, generation = excluded.generation,
    intent_at = cr_now(), confirmed_at = NULL, confirm_generation = NULL
RETURNING intent_at;

-- == fresh_key_per_attempt: a re-sent intent gets a new idempotency key ==

-- name: rekey_intent
WITH owned AS (
    SELECT id FROM runs
    WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s
      AND status = 'running'
)
UPDATE tool_calls t SET idem_key = %(key)s
FROM owned
WHERE t.run_id = owned.id AND t.seq = %(seq)s AND t.state = 'intent'
RETURNING t.intent_at;

-- == confirm_before_call: the confirm is written first, the result patched in later ==

-- name: patch_result
WITH owned AS (
    SELECT id FROM runs
    WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s
      AND status = 'running'
)
UPDATE tool_calls t SET result = %(result)s, remote_status = %(remote)s
FROM owned
WHERE t.run_id = owned.id AND t.seq = %(seq)s
RETURNING t.confirmed_at;

-- == claim_ignores_lease: the supervisor's sweep claims without looking at the lease ==

-- name: careless_claim_expired
-- claim_expired without its lease predicate: a live lease is claimed (and called expired).
WITH prev AS (
    SELECT id, owner, generation, lease_expires_at
    FROM runs
    WHERE status IN ('pending', 'running')
      AND attempts < %(max_attempts)s
    ORDER BY updated_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE runs r
    SET owner = %(owner)s || ':' || r.id, generation = r.generation + 1, status = 'running',
        lease_expires_at = cr_now() + make_interval(secs => %(lease)s),
        attempts = r.attempts + 1, updated_at = cr_now()
    FROM prev
    WHERE r.id = prev.id
    RETURNING r.id, r.owner, r.generation, prev.owner AS previous_owner,
              CASE WHEN prev.owner IS NOT NULL THEN prev.lease_expires_at END AS previous_expired_at,
              CASE WHEN prev.owner IS NULL AND prev.generation = 0 THEN 'first'
                   WHEN prev.owner IS NULL THEN 'handed_back'
                   ELSE 'expired' END AS reason
), logged AS (
    INSERT INTO run_claims (run_id, generation, owner, previous_owner, previous_expired_at, reason)
    SELECT id, generation, owner, previous_owner, previous_expired_at, reason FROM claimed
)
SELECT id, owner, generation FROM claimed;

-- == claim_run_flipped: a claim that takes live leases and leaves expired ones ==

-- name: flipped_claim_run
-- claim_run with its lease comparison turned round: it takes a live lease from anyone
-- (recorded as a proved death) and refuses an expired one.
WITH prev AS (
    SELECT id, owner, generation, lease_expires_at,
           lease_expires_at <= cr_now() AS lapsed
    FROM runs
    WHERE id = %(run)s
      AND status IN ('pending', 'running')
      AND (owner IS NULL
           OR lease_expires_at > cr_now()
           OR (owner = %(dead_owner)s AND generation = %(dead_generation)s))
    FOR UPDATE
), claimed AS (
    UPDATE runs r
    SET owner = %(owner)s, generation = r.generation + 1, status = 'running',
        lease_expires_at = cr_now() + make_interval(secs => %(lease)s),
        attempts = r.attempts + 1, updated_at = cr_now()
    FROM prev
    WHERE r.id = prev.id
    RETURNING r.id, r.generation, r.lease_expires_at, prev.owner AS previous_owner,
              CASE WHEN prev.owner IS NOT NULL THEN prev.lease_expires_at END AS previous_expired_at,
              CASE WHEN prev.owner IS NULL AND prev.generation = 0 THEN 'first'
                   WHEN prev.owner IS NULL THEN 'handed_back'
                   WHEN prev.lapsed THEN 'expired'
                   WHEN %(forced)s::boolean THEN 'forced'
                   ELSE 'owner_dead' END AS reason
)
INSERT INTO run_claims (run_id, generation, owner, previous_owner, previous_expired_at, reason)
SELECT id, generation, %(owner)s, previous_owner, previous_expired_at, reason FROM claimed
RETURNING generation;

-- == async_intent: the intent commits without waiting for the WAL flush ==

-- name: relaxed_record_intent
WITH relaxed AS (
    SELECT set_config('synchronous_commit', 'off', true) AS setting
), owned AS (
    UPDATE runs SET updated_at = cr_now()
    WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s
      AND status = 'running' AND (SELECT setting FROM relaxed) = 'off'
    RETURNING id
)
INSERT INTO tool_calls (run_id, seq, idem_key, state, generation)
SELECT id, %(seq)s, %(key)s, 'intent', %(generation)s FROM owned
RETURNING intent_at;

-- == release_unfenced: a clean stop that frees the run whoever holds it now ==

-- name: unfenced_release_run
UPDATE runs
SET owner = NULL, lease_expires_at = cr_now() + make_interval(secs => %(delay)s),
    failure = %(reason)s, updated_at = cr_now()
WHERE id = %(run)s AND status = 'running'
RETURNING id;

-- == history_join_any_run: the restart reads its history with a join that lost a column ==

-- name: joined_history
SELECT d.seq, d.tool, d.args, d.llm_call, d.generation, d.decided_at,
       t.idem_key, t.state, t.result, t.remote_status, t.generation AS call_generation,
       t.confirm_generation, t.intent_at, t.confirmed_at
FROM decisions d LEFT JOIN tool_calls t ON t.seq = d.seq
WHERE d.run_id = %(run)s
ORDER BY d.seq, t.intent_at;
