-- Named queries of the clock seam (agent_runtime.store.clock). cr_now() is the server's
-- clock plus cr_clock.skew (see schema.sql); moving the skew moves time for every
-- worker and supervisor on the database at once.

-- name: clock_now
SELECT cr_now() AS now;

-- name: clock_skew
SELECT skew FROM cr_clock WHERE singleton;

-- name: clock_frozen_at
SELECT frozen_at FROM cr_clock WHERE singleton;

-- name: clock_set_skew
UPDATE cr_clock SET skew = make_interval(secs => %(seconds)s) WHERE singleton;

-- name: clock_advance
-- Forward by %(seconds)s for everyone. (A RETURNING cr_now() here would still see the
-- old skew: the statement's own snapshot; read clock_now afterwards.)
UPDATE cr_clock SET skew = skew + make_interval(secs => %(seconds)s) WHERE singleton;

-- name: clock_freeze
-- Stop the clock at %(at)s (NULL: at the server's time now); cr_now() moves only by skew.
UPDATE cr_clock SET frozen_at = coalesce(%(at)s, clock_timestamp()), skew = interval '0'
WHERE singleton
RETURNING frozen_at;

-- name: clock_thaw
UPDATE cr_clock SET frozen_at = NULL, skew = interval '0' WHERE singleton;
