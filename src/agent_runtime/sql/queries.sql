-- Named queries of the runtime. Every write that belongs to a run is fenced:
-- it only happens while (owner, generation) still hold the run, which the
-- "owned" CTE checks and locks in the same statement as the write itself.

-- name: create_run
-- A run of %(agent)s with its task; an existing run keeps its own agent and input.
INSERT INTO runs (id, agent, input) VALUES (%(run)s, %(agent)s, %(input)s)
ON CONFLICT (id) DO NOTHING;

-- name: get_run
SELECT id, status, owner, generation, lease_expires_at, llm_calls, attempts, failure,
       created_at, updated_at, progress_at, agent, input, output, cr_now() AS now
FROM runs WHERE id = %(run)s;

-- name: claim_run
-- Take one run: free (and past its backoff), expired, or held by %(dead_owner)s at
-- %(dead_generation)s, an owner the caller proved dead (%(forced)s false) or fences out
-- without proof (true). A free run's lease_expires_at is its backoff: a run released on a
-- resumable error is not claimable before it, by this claim or the supervisor's.
-- The claim's reason (schema.sql, run_claims.reason) says which.
WITH prev AS (
    SELECT id, owner, generation, lease_expires_at,
           lease_expires_at <= cr_now() AS lapsed
    FROM runs
    WHERE id = %(run)s
      AND status IN ('pending', 'running')
      AND ((owner IS NULL AND lease_expires_at IS NULL)
           OR lease_expires_at <= cr_now()
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

-- name: claim_expired
-- The supervisor's sweep: up to %(limit)s claimable runs of %(agents)s (the agents it has;
-- NULL: any)
-- that nobody else is claiming: free
-- and past their backoff, or expired. It never touches a live lease, so its reasons are
-- first, handed_back or expired. How many attempts a run already had does not matter
-- here: give_up_exhausted, which runs first in every sweep, decides when to stop.
WITH prev AS (
    SELECT id, owner, generation, lease_expires_at, updated_at
    FROM runs
    WHERE status IN ('pending', 'running')
      AND (lease_expires_at IS NULL OR lease_expires_at <= cr_now())
      AND (%(agents)s::text[] IS NULL OR agent = ANY(%(agents)s::text[]))
    ORDER BY updated_at, id  -- the longest idle first; the id makes the order total
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE runs r
    SET owner = %(owner)s || ':' || r.id, generation = r.generation + 1, status = 'running',
        lease_expires_at = cr_now() + make_interval(secs => %(lease)s),
        attempts = r.attempts + 1, updated_at = cr_now()
    FROM prev
    WHERE r.id = prev.id
    RETURNING r.id, r.owner, r.generation, r.agent, r.input, prev.updated_at AS idle_since,
              prev.owner AS previous_owner,
              CASE WHEN prev.owner IS NOT NULL THEN prev.lease_expires_at END AS previous_expired_at,
              CASE WHEN prev.owner IS NULL AND prev.generation = 0 THEN 'first'
                   WHEN prev.owner IS NULL THEN 'handed_back'
                   ELSE 'expired' END AS reason
), logged AS (
    INSERT INTO run_claims (run_id, generation, owner, previous_owner, previous_expired_at, reason)
    SELECT id, generation, owner, previous_owner, previous_expired_at, reason FROM claimed
)
-- agent and input go to the worker with the lease (records.RunTask): it need not read them;
-- the reason to the supervisor's metrics (agent_runtime_claims_total).
-- In claim order: an UPDATE returns its rows in the order of its join, which the table's
-- layout decides, and the supervisor hands the runs out in the order they come.
SELECT id, owner, generation, agent, input, reason FROM claimed ORDER BY idle_since, id;

-- name: give_up_exhausted
-- Runs that kept failing, marked failed instead of retried forever (an operator's retry
-- revives one): %(max_attempts)s claims since the last progress, *and* %(give_up_after)s
-- seconds since the first of them. A short outage burns attempts fast; it must not fail
-- a run that only had to wait.
WITH tried AS (
    SELECT r.id, r.attempts,
           (SELECT min(c.claimed_at) FROM run_claims c
            WHERE c.run_id = r.id AND c.claimed_at >= r.progress_at) AS trying_since
    FROM runs r
    WHERE r.status IN ('pending', 'running')
      AND (r.owner IS NULL OR r.lease_expires_at <= cr_now())
      AND r.attempts >= %(max_attempts)s
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE runs r
SET status = 'failed', owner = NULL, lease_expires_at = NULL, updated_at = cr_now(),
    failure = 'gave up after ' || tried.attempts || ' attempts in '
              || round(extract(epoch FROM cr_now() - tried.trying_since))
              || ' s without progress: ' || coalesce(r.failure, 'no reason recorded')
FROM tried
WHERE r.id = tried.id
  AND tried.trying_since <= cr_now() - make_interval(secs => %(give_up_after)s)
RETURNING r.id, r.failure;

-- name: renew_lease
UPDATE runs
SET lease_expires_at = cr_now() + make_interval(secs => %(seconds)s)
WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s AND status = 'running'
RETURNING lease_expires_at;

-- name: check_owner
SELECT 1 FROM runs
WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s AND status = 'running';

-- name: release_run
-- A clean stop that did not finish: free the run now, say why, let it be claimed again
-- once cr_now() passes the given delay (its backoff; every claim statement honours it).
UPDATE runs
SET owner = NULL, lease_expires_at = cr_now() + make_interval(secs => %(delay)s),
    failure = %(reason)s, updated_at = cr_now()
WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s AND status = 'running'
RETURNING id;

-- name: fail_run
UPDATE runs
SET status = 'failed', owner = NULL, lease_expires_at = NULL, failure = %(reason)s,
    updated_at = cr_now()
WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s AND status = 'running'
RETURNING id;

-- name: finish_run
UPDATE runs
SET status = 'done', owner = NULL, lease_expires_at = NULL, failure = NULL, attempts = 0,
    output = %(output)s, updated_at = cr_now()
WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s AND status = 'running'
RETURNING id;

-- name: record_decision
-- One model answer, whole (model_answers), and the decisions it makes: one per tool call
-- (%(decisions)s: [{"seq", "tool", "args", "call_id", "key", "rejected"}, ...]), or one
-- 'done'. A call the runtime refused (an unknown tool, invalid arguments: "rejected" holds
-- the error) gets its tool_calls row here too, already resolved: failed, remote_status
-- 'rejected', never sent; the error is the result the model is shown. One statement,
-- so the answer and its calls are journaled together or not at all. It commits without
-- waiting for the WAL flush (SET LOCAL, this transaction only): nothing is acted on before
-- the intent's durable commit, which flushes this one too (WAL is sequential). A database
-- crash before that costs one model call asked again; a process crash loses nothing (an
-- asynchronous commit is visible at once). The run row changes by llm_calls, a column no
-- index holds, and by updated_at (its last activity, the order of `runs`) only when that
-- is a minute old or more: an update that leaves every indexed column as it was stays HOT,
-- so a run's steps pay the index writes of one update a minute at most (migration 0011;
-- refreshed at every step, or every second with steps of a second or more, none is HOT:
-- ARCHITECTURE.md, "A journal of a million runs").
WITH relaxed AS (
    SELECT set_config('synchronous_commit', 'off', true) AS setting
), owned AS (
    UPDATE runs SET llm_calls = llm_calls + 1,
        updated_at = CASE WHEN updated_at <= cr_now() - interval '60 seconds' THEN cr_now()
                          ELSE updated_at END
    WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s
      AND status = 'running' AND (SELECT setting FROM relaxed) = 'off'
    RETURNING id, llm_calls
), answer AS (
    INSERT INTO model_answers (run_id, llm_call, message, usage, generation)
    SELECT id, llm_calls, %(message)s, %(usage)s, %(generation)s FROM owned
    RETURNING run_id, llm_call, answered_at
), refused AS (
    INSERT INTO tool_calls (run_id, seq, idem_key, state, result, remote_status, generation,
                            confirm_generation, intent_at, confirmed_at, effect, sends)
    SELECT a.run_id, r.seq, r.key, 'failed', r.rejected, 'rejected', %(generation)s,
           %(generation)s, a.answered_at, a.answered_at, 'read', 0
    FROM answer a, jsonb_to_recordset(%(decisions)s) AS r(seq integer, key text, rejected jsonb)
    WHERE r.rejected IS NOT NULL
)
INSERT INTO decisions (run_id, seq, tool, args, llm_call, generation, call_id, decided_at)
SELECT a.run_id, d.seq, d.tool, d.args, a.llm_call, %(generation)s, d.call_id, a.answered_at
FROM answer a, jsonb_to_recordset(%(decisions)s) AS d(seq integer, tool text, args jsonb,
                                                     call_id text)
RETURNING seq, llm_call, decided_at;

-- name: record_intent
-- Durable: the call goes out only after this commit, which also flushes the decision
-- before it. The run row is locked (FOR SHARE: a claim waits, and a claim that came first
-- leaves nothing to lock), not rewritten. The intent is the first attempt's start:
-- lands_by, until when that request may still act at the remote (%(in_flight)s seconds on,
-- NULL when the caller gave no bound).
WITH owned AS (
    SELECT id FROM runs
    WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s
      AND status = 'running'
    FOR SHARE
)
INSERT INTO tool_calls (run_id, seq, idem_key, state, generation, effect, lands_by)
SELECT id, %(seq)s, %(key)s, 'intent', %(generation)s, %(effect)s,
       cr_now() + make_interval(secs => %(in_flight)s::double precision)
FROM owned
RETURNING intent_at, lands_by;

-- name: record_send
-- One more attempt of a call in doubt is about to leave (a retry, or a restart's re-send):
-- its start, durably, before it is sent, so that whoever checks the call later waits out
-- this request too. lands_by never moves back. Fenced like the intent (the run row
-- locked FOR SHARE, not rewritten); the call is named by its key's values.
WITH owned AS (
    SELECT id FROM runs
    WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s
      AND status = 'running'
    FOR SHARE
)
UPDATE tool_calls t
SET sends = t.sends + 1,
    lands_by = GREATEST(t.lands_by, cr_now() + make_interval(secs => %(in_flight)s::double precision))
FROM owned
WHERE t.run_id = %(run)s AND t.seq = %(seq)s AND t.state = 'intent'
RETURNING t.lands_by, t.sends;

-- name: landing_wait
-- Seconds until every journaled attempt of the call can no longer act (0 once lands_by has
-- passed, or when none was journaled), read only while this owner holds the run: no row
-- means the run is no longer ours (it doubles as the ownership check before a check).
SELECT GREATEST(0, COALESCE(EXTRACT(EPOCH FROM t.lands_by - cr_now()), 0))::double precision
           AS seconds,
       t.lands_by
FROM runs r
JOIN tool_calls t ON t.run_id = %(run)s AND t.seq = %(seq)s
WHERE r.id = %(run)s AND r.owner = %(owner)s AND r.generation = %(generation)s
  AND r.status = 'running';

-- name: record_confirm
-- The call's answer, committed as %(commit)s says: 'off' (not waiting for the WAL flush)
-- where a lost confirm only costs the contract's own recovery (a keyed re-send answered
-- already_done, a checked call's check, a read again), 'on' for a 'once' call, whose lost
-- confirm would park the run for an operator. Progress (attempts 0, progress_at) is
-- written only on the first confirm after a claim: later ones would change nothing a
-- reader uses, so the run row is locked, not rewritten. The call is named by its key's
-- values, the fence joined beside: through owned.id alone, the plan a connection keeps
-- from a small journal scans tool_calls (tests/test_plans.py).
WITH relaxed AS (
    SELECT set_config('synchronous_commit', %(commit)s, true) AS setting
), owned AS (
    SELECT id, attempts FROM runs
    WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s
      AND status = 'running' AND (SELECT setting FROM relaxed) = %(commit)s
    FOR SHARE
), progress AS (
    UPDATE runs r SET attempts = 0, progress_at = cr_now(), updated_at = cr_now()
    FROM owned
    WHERE r.id = owned.id AND owned.attempts <> 0
)
UPDATE tool_calls t
SET state = %(state)s, result = %(result)s, remote_status = %(remote)s,
    confirm_generation = %(generation)s, confirmed_at = cr_now()
FROM owned
WHERE t.run_id = %(run)s AND t.seq = %(seq)s AND t.state IN ('intent', 'redo')
RETURNING t.confirmed_at;

-- name: redo_intent
-- An operator ordered an in-doubt 'once' call sent again (state redo): before sending it,
-- the worker makes it an intent of its own generation again, durably, so that a crash after
-- this send finds an intent in doubt (and parks the run) instead of a redo to send once more.
-- The call is named by its key's values, as in record_confirm.
WITH owned AS (
    UPDATE runs SET updated_at = cr_now()
    WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s
      AND status = 'running'
    RETURNING id
)
UPDATE tool_calls t
SET state = 'intent', generation = %(generation)s, intent_at = cr_now(), sends = t.sends + 1,
    lands_by = GREATEST(t.lands_by, cr_now() + make_interval(secs => %(in_flight)s::double precision))
FROM owned
WHERE t.run_id = %(run)s AND t.seq = %(seq)s AND t.state = 'redo'
RETURNING t.intent_at, t.lands_by, t.sends;

-- name: load_decisions
SELECT seq, tool, args, llm_call, generation, decided_at, call_id
FROM decisions WHERE run_id = %(run)s ORDER BY seq;

-- name: load_tool_calls
SELECT seq, idem_key, state, result, remote_status, generation, confirm_generation,
       intent_at, confirmed_at, effect, lands_by, sends
FROM tool_calls WHERE run_id = %(run)s ORDER BY seq;

-- name: load_history
-- A run's history in one statement, what a (re)start reads before it acts: every decision
-- in step order with its call (if any) and the answer it came from (if journaled), each
-- row found through a primary key (decisions_pkey, tool_calls_pkey, model_answers_pkey).
-- The calls of one answer repeat its message; that is the one redundancy.
SELECT d.seq, d.tool, d.args, d.llm_call, d.generation, d.decided_at, d.call_id,
       t.idem_key, t.state, t.result, t.remote_status, t.generation AS call_generation,
       t.confirm_generation, t.intent_at, t.confirmed_at, t.effect, t.lands_by, t.sends,
       a.message, a.usage, a.generation AS answer_generation, a.answered_at
FROM decisions d
LEFT JOIN tool_calls t ON t.run_id = d.run_id AND t.seq = d.seq
LEFT JOIN model_answers a ON a.run_id = d.run_id AND a.llm_call = d.llm_call
WHERE d.run_id = %(run)s
ORDER BY d.seq;

-- name: park_run
-- A call nothing can tell the outcome of (a 'once' tool's intent without a confirm): the
-- run stops as needs_attention and no claim takes it until an operator resolves the call.
UPDATE runs
SET status = 'needs_attention', owner = NULL, lease_expires_at = NULL, failure = %(reason)s,
    updated_at = cr_now()
WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s AND status = 'running'
RETURNING id;

-- name: expire_lease_of
-- The supervisor saw its own child exit: whoever holds this generation is dead for
-- certain (the child may have adopted the lease under its own token; a newer claim
-- would have bumped the generation). A run the worker released itself keeps the
-- release's own reason and delay. The run is free afterwards, claimable once cr_now()
-- passes the delay (a backoff after repeated deaths); %(reason)s, when given, says why
-- it stopped. The next claim's reason is handed_back.
UPDATE runs
SET owner = NULL, lease_expires_at = cr_now() + make_interval(secs => %(delay)s),
    failure = coalesce(%(reason)s, failure), updated_at = cr_now()
WHERE id = %(run)s AND generation = %(generation)s AND status = 'running'
  AND owner IS NOT NULL
RETURNING id, lease_expires_at;

-- name: adopt_lease
-- A worker started on a lease claimed for it (by a supervisor) puts its own token on
-- it, so "is the owner's process alive?" asks about the worker, not its parent.
-- Same generation: nothing it or its parent wrote is fenced by the swap, and the
-- claim keeps its reason (the supervisor's claim is still why the run was taken).
-- has_steps: whether the run has any decision yet. From here on only this worker can
-- write one (every older generation is fenced out), so without any, there is no history
-- to read: a run's first worker starts at once.
WITH owned AS (
    UPDATE runs SET owner = %(new_owner)s
    WHERE id = %(run)s AND owner = %(owner)s AND generation = %(generation)s
      AND status = 'running'
    RETURNING id
)
UPDATE run_claims c SET owner = %(new_owner)s
FROM owned
WHERE c.run_id = owned.id AND c.generation = %(generation)s
RETURNING c.generation,
          EXISTS (SELECT 1 FROM decisions d WHERE d.run_id = c.run_id) AS has_steps;

-- name: confirmed_steps_under
-- The confirmed tools and arguments of every run whose id starts with a prefix
-- (agent_runtime.conformance: one conform scenario's runs).
SELECT d.run_id, d.tool, d.args
FROM decisions d JOIN tool_calls t USING (run_id, seq)
WHERE starts_with(d.run_id, %(prefix)s) AND t.state = 'confirmed'
ORDER BY d.run_id, d.seq;

-- name: delete_all_runs
-- Every run and all of it: its claims, retries and resolutions by cascade, its steps by
-- hand (the step tables have no foreign key: schema.sql says why). The runtime never runs
-- it; the test suites' and benchmarks' resets do, so a table added later is emptied here.
WITH calls AS (DELETE FROM tool_calls), decided AS (DELETE FROM decisions),
     answered AS (DELETE FROM model_answers)
DELETE FROM runs;

-- name: held_runs
-- The supervisor's watch over its busy workers (agent_runtime.supervisor.takeback): each run in
-- %(runs)s, the ones its workers hold, found by primary key, with what says whether its
-- worker still works on it: the generation that holds it (NULL: free, ended or gone),
-- seconds since its lease ran out (negative: live), and seconds since its last progress,
-- the latest of its claim (or a later write of the row), its latest model answer, and its
-- latest call's intent or confirm. Never a scan: the answer's key is (run_id, llm_calls),
-- the latest call the last entry of tool_calls_pkey under the run. A heartbeat's renewal
-- is not progress.
SELECT h.id, cr_now() AS now,
       CASE WHEN r.status = 'running' AND r.owner IS NOT NULL THEN r.generation END AS held_at,
       extract(epoch FROM cr_now() - r.lease_expires_at)::float8 AS expired_ago,
       extract(epoch FROM cr_now() - greatest(r.updated_at, a.answered_at, t.intent_at,
                                              t.confirmed_at))::float8 AS idle_for
FROM unnest(%(runs)s::text[]) AS h(id)
LEFT JOIN runs r ON r.id = h.id
LEFT JOIN model_answers a ON a.run_id = r.id AND a.llm_call = r.llm_calls
LEFT JOIN LATERAL (
    SELECT c.intent_at, c.confirmed_at FROM tool_calls c
    WHERE c.run_id = r.id ORDER BY c.seq DESC LIMIT 1
) t ON true;

-- name: unserved_runs
-- The supervisor's look at what it will not take (agent_runtime.supervisor.unserved): up to %(limit)s
-- runs waiting for a worker -- pending or running, free past any backoff or with an expired
-- lease, as claim_expired would take them -- whose agent is not one of %(agents)s, the
-- agents this supervisor has, and that have waited at least %(after)s seconds since they
-- became claimable (their lease's end, else their last change): a supervisor that serves
-- the agent would have taken them by then. The longest waiting first. Flat in the backlog
-- (migration 0011): the agents that have runs waiting are found one index probe each (a loose
-- scan of runs_agent_waiting), and only the others' runs are read, in that index's order,
-- at most %(limit)s each; a backlog of a million runs of its own agents costs one probe.
WITH RECURSIVE waiting AS (
    (SELECT agent FROM runs WHERE status IN ('pending', 'running') ORDER BY agent LIMIT 1)
    UNION ALL
    SELECT (SELECT r.agent FROM runs r
            WHERE r.status IN ('pending', 'running') AND r.agent > w.agent
            ORDER BY r.agent LIMIT 1)
    FROM waiting w
    WHERE w.agent IS NOT NULL
)
SELECT u.id, u.agent, u.status,
       extract(epoch FROM cr_now() - u.since)::float8 AS waited
FROM waiting w
CROSS JOIN LATERAL (
    SELECT r.id, r.agent, r.status, coalesce(r.lease_expires_at, r.updated_at) AS since
    FROM runs r
    WHERE r.agent = w.agent AND r.status IN ('pending', 'running')
      AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= cr_now())
      AND coalesce(r.lease_expires_at, r.updated_at)
          <= cr_now() - make_interval(secs => %(after)s)
    ORDER BY r.updated_at, r.id
    LIMIT %(limit)s
) u
WHERE w.agent IS NOT NULL AND NOT (w.agent = ANY (%(agents)s::text[]))
ORDER BY u.since, u.id
LIMIT %(limit)s;
