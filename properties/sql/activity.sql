-- name: stale_activity
-- Runs whose last activity (updated_at) is a minute or more older than their latest model
-- answer: record_decision refreshes updated_at whenever it is a minute old or more (its
-- throttle), and every other write of it moves it to cr_now(), so none should be.
SELECT r.id, r.updated_at, a.last AS answered_at
FROM runs r
JOIN (SELECT run_id, max(answered_at) AS last FROM model_answers GROUP BY run_id) a
  ON a.run_id = r.id
WHERE r.updated_at <= a.last - interval '60 seconds';
