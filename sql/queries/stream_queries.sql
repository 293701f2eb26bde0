-- name: StreamQueryLockByName :one
-- The tenant's query of this name, locked for a registration that may change
-- its config hash or wipe its state. The lock waits for cycles in flight
-- (they hold the row FOR KEY SHARE), so a reset never interleaves with one.
SELECT * FROM queen_streams.queries
WHERE tenant_id = @tenant_id AND name = @name
FOR UPDATE;

-- name: StreamQueryInsert :one
-- Registers a new query. No row back means a concurrent registration of the
-- same name won; the caller reads that one.
INSERT INTO queen_streams.queries (tenant_id, name, source_queue, sink_queue, config_hash)
VALUES (@tenant_id, @name, @source_queue, sqlc.narg(sink_queue), @config_hash)
ON CONFLICT (tenant_id, name) DO NOTHING
RETURNING *;

-- name: StreamQueryUpdate :exec
-- A resumed query: queues may change; config_hash changes only with a reset.
UPDATE queen_streams.queries
SET source_queue = @source_queue, sink_queue = sqlc.narg(sink_queue), config_hash = @config_hash, updated_at = now()
WHERE id = @id;

-- name: StreamQueryGetByID :one
SELECT * FROM queen_streams.queries WHERE tenant_id = @tenant_id AND id = @id;

-- name: StreamQueryShareByID :one
-- The query a cycle writes state for, held FOR KEY SHARE until the cycle
-- commits: concurrent cycles do not block each other, a reset waits. It
-- also tells whether the cycle's source partition belongs to another tenant
-- (a partition that no longer exists is nobody's: the state of a deleted
-- queue's partition can still be flushed).
SELECT EXISTS (
    SELECT 1 FROM queen.partitions p JOIN queen.queues qq ON qq.id = p.queue_id
    WHERE p.id = @partition_id AND qq.tenant_id <> @tenant_id)::boolean AS partition_foreign
FROM queen_streams.queries q WHERE q.tenant_id = @tenant_id AND q.id = @id
FOR KEY SHARE OF q;
