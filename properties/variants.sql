-- Queries of the deliberately broken runtime variants (properties/variants.py).
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
