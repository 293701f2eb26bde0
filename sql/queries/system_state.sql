-- name: SystemStateListByKeys :many
-- The broker-wide switches (maintenance modes), read at boot, by the
-- periodic reconcile and by GET /api/v1/system/maintenance.
SELECT key, value FROM queen.system_state WHERE key = ANY(@keys::text[]);

-- name: SystemStateUpsert :exec
-- Persists one switch; every broker's reconcile picks it up.
INSERT INTO queen.system_state (key, value, updated_at)
VALUES (@key, @value, now())
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now();
