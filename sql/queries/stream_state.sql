-- name: StreamStateLockShard :exec
-- Serialises the cycles of one (query, source partition) state shard until
-- the transaction ends: a cycle and an idle flush of the same shard never
-- interleave (the flush could otherwise delete a window the cycle extends).
SELECT pg_advisory_xact_lock(hashtextextended(CAST(@query_id::uuid AS text) || ':' || CAST(@partition_id::uuid AS text), 0));

-- name: StreamStateTryLockShard :one
-- StreamStateLockShard without the wait: false when another cycle of the
-- shard holds it. An idle flush that finds it taken is skipped, since that
-- cycle may be changing the rows the flush read (docs/streams.md).
SELECT pg_try_advisory_xact_lock(hashtextextended(CAST(@query_id::uuid AS text) || ':' || CAST(@partition_id::uuid AS text), 0)) AS locked;

-- name: StreamStateCountKeys :one
-- How many of the given keys the shard stores.
SELECT count(*) FROM queen_streams.state
WHERE query_id = @query_id AND partition_id = @partition_id AND key = ANY(@keys::text[]);

-- name: StreamStateUpsertMany :exec
-- Writes the final value of each key a cycle upserts. Keys are distinct.
INSERT INTO queen_streams.state (query_id, partition_id, key, value, updated_at)
SELECT @query_id::uuid, @partition_id::uuid, k, v, now()
FROM (SELECT unnest(@keys::text[]) AS k, unnest(@vals::jsonb[]) AS v) AS ops
ON CONFLICT (query_id, partition_id, key) DO UPDATE
    SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at;

-- name: StreamStateDeleteMany :exec
DELETE FROM queen_streams.state
WHERE query_id = @query_id AND partition_id = @partition_id AND key = ANY(@keys::text[]);

-- name: StreamStateDeleteByQuery :execrows
-- A reset: the state of every partition of the query.
DELETE FROM queen_streams.state WHERE query_id = @query_id;

-- name: StreamStateList :many
-- One shard's rows, by key. Filters are ANDed: keys (empty matches every
-- key), a key prefix (empty matches every key; taken literally, no LIKE
-- wildcards) and ripe_at_or_before (only rows whose value has a numeric
-- windowEnd at or before it; NULL skips the filter).
SELECT key, value, updated_at
FROM queen_streams.state
WHERE query_id = @query_id AND partition_id = @partition_id
  AND (cardinality(@keys::text[]) = 0 OR key = ANY(@keys::text[]))
  AND starts_with(key, @key_prefix::text)
  AND (sqlc.narg(ripe_at_or_before)::float8 IS NULL
       OR CASE WHEN jsonb_typeof(value -> 'windowEnd') = 'number'
               THEN (value -> 'windowEnd')::float8 <= sqlc.narg(ripe_at_or_before)::float8
               ELSE false END)
ORDER BY key COLLATE "C";
