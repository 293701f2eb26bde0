-- Session-level advisory locks: a background job runs on one broker at a
-- time. Both must run on the same pinned connection.

-- name: AdvisoryLockTry :one
SELECT pg_try_advisory_lock(@key::bigint)::boolean;

-- name: AdvisoryUnlock :one
SELECT pg_advisory_unlock(@key::bigint)::boolean;
