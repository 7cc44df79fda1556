-- Statements of the deliberately broken runtime variants (properties/variants/) that are
-- not an edit of a runtime statement (those are made in properties/variants/mutations.py
-- from the runtime's own, so they never drift from it). Never used by the real runtime.

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

-- == history_join_any_run: the restart reads its history with a join that lost a column ==

-- name: joined_history
SELECT d.seq, d.tool, d.args, d.llm_call, d.generation, d.decided_at, d.call_id,
       t.idem_key, t.state, t.result, t.remote_status, t.generation AS call_generation,
       t.confirm_generation, t.intent_at, t.confirmed_at, t.effect
FROM decisions d LEFT JOIN tool_calls t ON t.seq = d.seq
WHERE d.run_id = %(run)s
ORDER BY d.seq, t.intent_at;

-- == async_intent: the session gives up waiting for the flush, around one statement ==

-- name: session_relaxed_commit
SET synchronous_commit = off;

-- name: session_durable_commit
SET synchronous_commit = on;

-- == test_operators.py: an operator's retry that revives a cancelled run ==

-- name: revive_cancelled
UPDATE runs SET status = 'pending', owner = NULL, lease_expires_at = NULL
WHERE id = %(run)s AND status = 'cancelled'
RETURNING id;
