-- name: TraceInsert :one
INSERT INTO queen.message_traces (message_id, partition_id, transaction_id, consumer_group, event_type, data, worker_id)
VALUES (@message_id, @partition_id, @transaction_id, @consumer_group, @event_type, @data, sqlc.narg(worker_id))
RETURNING id;

-- name: TraceNameInsertMany :exec
INSERT INTO queen.message_trace_names (trace_id, trace_name)
SELECT @trace_id, n FROM unnest(@names::text[]) AS n
ON CONFLICT DO NOTHING;

-- name: TraceListByMessage :many
-- The events recorded on one message of a tenant, oldest first, with their
-- names; a partition of another tenant has none.
SELECT t.id, t.event_type, t.data, t.consumer_group, t.worker_id, t.created_at,
       COALESCE((SELECT array_agg(n.trace_name ORDER BY n.trace_name)
                 FROM queen.message_trace_names n WHERE n.trace_id = t.id), '{}')::text[] AS trace_names
FROM queen.message_traces t
WHERE t.partition_id = @partition_id AND t.transaction_id = @transaction_id
  AND EXISTS (SELECT 1 FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
              WHERE p.id = @partition_id AND q.tenant_id = @tenant_id)
ORDER BY t.created_at, t.id;

-- name: TraceListByName :many
-- One page of the events carrying a name, oldest first, with the message's
-- queue, partition and payload.
SELECT t.id, t.transaction_id, t.partition_id, t.event_type, t.data, t.consumer_group, t.worker_id, t.created_at,
       q.name AS queue_name, p.name AS partition_name, m.payload AS message_payload, m.is_encrypted,
       COALESCE((SELECT array_agg(n2.trace_name ORDER BY n2.trace_name)
                 FROM queen.message_trace_names n2 WHERE n2.trace_id = t.id), '{}')::text[] AS trace_names
FROM queen.message_trace_names n
JOIN queen.message_traces t ON t.id = n.trace_id
JOIN queen.messages m ON m.id = t.message_id
JOIN queen.partitions p ON p.id = m.partition_id
JOIN queen.queues q ON q.id = p.queue_id
WHERE n.trace_name = @trace_name AND q.tenant_id = @tenant_id
ORDER BY t.created_at, t.id
LIMIT @row_limit OFFSET @row_offset;

-- name: TraceCountByName :one
SELECT count(*) FROM queen.message_trace_names n
JOIN queen.message_traces t ON t.id = n.trace_id
JOIN queen.partitions p ON p.id = t.partition_id
JOIN queen.queues q ON q.id = p.queue_id
WHERE n.trace_name = @trace_name AND q.tenant_id = @tenant_id;

-- name: TraceNameList :many
-- A tenant's trace names with how many events and messages carry them, most
-- recently used first.
SELECT n.trace_name, count(*)::bigint AS trace_count, count(DISTINCT t.message_id)::bigint AS message_count,
       max(t.created_at)::timestamptz AS last_seen
FROM queen.message_trace_names n
JOIN queen.message_traces t ON t.id = n.trace_id
JOIN queen.partitions p ON p.id = t.partition_id
JOIN queen.queues q ON q.id = p.queue_id
WHERE q.tenant_id = @tenant_id
GROUP BY n.trace_name
ORDER BY last_seen DESC, n.trace_name
LIMIT @row_limit OFFSET @row_offset;

-- name: TraceNameCount :one
SELECT count(DISTINCT n.trace_name) FROM queen.message_trace_names n
JOIN queen.message_traces t ON t.id = n.trace_id
JOIN queen.partitions p ON p.id = t.partition_id
JOIN queen.queues q ON q.id = p.queue_id
WHERE q.tenant_id = @tenant_id;
