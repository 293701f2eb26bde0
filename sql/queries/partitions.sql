-- name: PartitionAllocateMany :many
-- Creates missing partitions and reserves `counts[i]` sequence numbers in each,
-- in one statement. The row lock taken here is held until the push commits,
-- so sequence order equals commit order inside a partition. Callers pass the
-- partitions sorted by (queue_id, name) so concurrent pushes lock in one order.
INSERT INTO queen.partitions AS p (queue_id, name, last_seq, last_message_at)
SELECT q, n, c, now() FROM (SELECT unnest(@queue_ids::uuid[]) AS q, unnest(@names::text[]) AS n, unnest(@counts::bigint[]) AS c) AS v
ON CONFLICT (queue_id, name) DO UPDATE
    SET last_seq = p.last_seq + EXCLUDED.last_seq, last_message_at = now()
RETURNING p.id, p.queue_id, p.name, p.last_seq;

-- name: PartitionEnsure :one
INSERT INTO queen.partitions AS p (queue_id, name) VALUES (@queue_id, @name)
ON CONFLICT (queue_id, name) DO UPDATE SET name = EXCLUDED.name
RETURNING p.id;

-- name: PartitionGetByQueueAndName :one
SELECT p.*, (p.last_message_at IS NOT NULL AND p.last_message_at > now() - make_interval(secs => @window_seconds::integer))::boolean AS window_active
FROM queen.partitions p WHERE p.queue_id = @queue_id AND p.name = @name;

-- name: PartitionGetByID :one
SELECT p.*, q.name AS queue_name FROM queen.partitions p
JOIN queen.queues q ON q.id = p.queue_id
WHERE p.id = @id;

-- name: PartitionListPopCandidates :many
-- Partitions of the given queues that hold messages past the group's cursor,
-- are not leased by the group and are out of their window buffer. Higher queue
-- priority first, then the partition the group served longest ago.
SELECT p.id, p.name, p.queue_id, q.name AS queue_name
FROM queen.partitions p
JOIN queen.queues q ON q.id = p.queue_id
LEFT JOIN queen.partition_consumers pc
       ON pc.partition_id = p.id AND pc.consumer_group = @consumer_group
WHERE p.queue_id = ANY(@queue_ids::uuid[])
  AND p.last_seq > COALESCE(pc.last_seq, 0)
  AND (pc.lease_expires_at IS NULL OR pc.lease_expires_at <= now())
  AND (q.window_buffer = 0 OR p.last_message_at <= now() - make_interval(secs => q.window_buffer))
ORDER BY q.priority DESC, pc.last_consumed_at ASC NULLS FIRST, p.last_message_at ASC
LIMIT @max_candidates;
