-- name: TenantRetainedBytes :one
-- The stored size of a tenant's message payloads and how many messages hold
-- them. pg_column_size is the size as stored (after compression; a payload
-- moved out of line is sized from its pointer, not read). One pass over the
-- tenant's messages: queen-proxy's retained-bytes quota polls it once a
-- reconcile interval (docs/proxy.md).
SELECT COALESCE(sum(pg_column_size(m.payload)), 0)::bigint AS retained_bytes,
       count(*)::bigint AS messages
FROM queen.queues q
JOIN queen.partitions p ON p.queue_id = q.id
JOIN queen.messages m ON m.partition_id = p.id
WHERE q.tenant_id = @tenant_id;
