-- name: QueueGetByName :one
-- A queue is named within its tenant (migration 0010).
SELECT * FROM queen.queues WHERE tenant_id = @tenant_id AND name = @name;

-- name: QueueListByNames :many
SELECT * FROM queen.queues WHERE tenant_id = @tenant_id AND name = ANY(@names::text[]);

-- name: QueueListByNamespaceTask :many
-- A tenant's queues for a namespace/task pop; an empty argument matches any
-- value.
SELECT * FROM queen.queues
WHERE tenant_id = @tenant_id
  AND (@namespace::text = '' OR namespace = @namespace::text)
  AND (@task::text = '' OR task = @task::text)
ORDER BY priority DESC, name;

-- name: QueueInsertMany :exec
-- Creates queues named by a push that do not exist yet, with default options
-- and tags derived from the name.
INSERT INTO queen.queues (tenant_id, name, namespace, task)
SELECT @tenant_id, n, ns, t FROM (SELECT unnest(@names::text[]) AS n, unnest(@namespaces::text[]) AS ns, unnest(@tasks::text[]) AS t) AS v
ON CONFLICT (tenant_id, name) DO NOTHING;

-- name: QueueUpsertConfig :one
-- configure is a full replace of the options, as in the reference broker.
INSERT INTO queen.queues (
    tenant_id, name, namespace, task, priority, lease_time, retry_limit, retry_delay, ttl, max_queue_size,
    dead_letter_queue, dlq_after_max_retries, delayed_processing, window_buffer,
    retention_seconds, completed_retention_seconds, retention_enabled, encryption_enabled,
    max_wait_time_seconds)
VALUES (
    @tenant_id, @name, @namespace, @task, @priority, @lease_time, @retry_limit, @retry_delay, @ttl, @max_queue_size,
    @dead_letter_queue, @dlq_after_max_retries, @delayed_processing, @window_buffer,
    @retention_seconds, @completed_retention_seconds, @retention_enabled, @encryption_enabled,
    @max_wait_time_seconds)
ON CONFLICT (tenant_id, name) DO UPDATE SET
    namespace = EXCLUDED.namespace,
    task = EXCLUDED.task,
    priority = EXCLUDED.priority,
    lease_time = EXCLUDED.lease_time,
    retry_limit = EXCLUDED.retry_limit,
    retry_delay = EXCLUDED.retry_delay,
    ttl = EXCLUDED.ttl,
    max_queue_size = EXCLUDED.max_queue_size,
    dead_letter_queue = EXCLUDED.dead_letter_queue,
    dlq_after_max_retries = EXCLUDED.dlq_after_max_retries,
    delayed_processing = EXCLUDED.delayed_processing,
    window_buffer = EXCLUDED.window_buffer,
    retention_seconds = EXCLUDED.retention_seconds,
    completed_retention_seconds = EXCLUDED.completed_retention_seconds,
    retention_enabled = EXCLUDED.retention_enabled,
    encryption_enabled = EXCLUDED.encryption_enabled,
    max_wait_time_seconds = EXCLUDED.max_wait_time_seconds,
    updated_at = now()
RETURNING *;

-- name: QueueDeleteByName :execrows
DELETE FROM queen.queues WHERE tenant_id = @tenant_id AND name = @name;

-- name: QueueListPage :many
-- One page of queues for the resources listing, newest first; an empty
-- namespace or task matches any value, a NULL tenant every tenant (the
-- cell-wide stats refresh).
SELECT * FROM queen.queues
WHERE (sqlc.narg(tenant_id)::uuid IS NULL OR tenant_id = sqlc.narg(tenant_id)::uuid)
  AND (@namespace::text = '' OR namespace = @namespace::text)
  AND (@task::text = '' OR task = @task::text)
ORDER BY created_at DESC, name
LIMIT sqlc.narg(row_limit) OFFSET @row_offset;

-- name: QueueCountFiltered :one
SELECT count(*) FROM queen.queues
WHERE tenant_id = @tenant_id
  AND (@namespace::text = '' OR namespace = @namespace::text)
  AND (@task::text = '' OR task = @task::text);

-- name: QueueListExpiring :many
-- Queues the retention and eviction jobs act on.
SELECT * FROM queen.queues
WHERE (retention_enabled AND (retention_seconds > 0 OR completed_retention_seconds > 0))
   OR max_wait_time_seconds > 0
ORDER BY name;

-- name: QueueConsumptionList :many
-- Queues with the messages their consumer groups consumed, by name. Empty
-- filters match everything. A narrow join of the cursors with their
-- partitions' queues; the partition counts come from
-- PartitionCountsByQueue, which the status shares with the other routes.
WITH picked AS (
    SELECT q.id, q.name, q.namespace, q.task FROM queen.queues q
    WHERE (@queue_name::text = '' OR q.name = @queue_name::text)
      AND (@namespace::text = '' OR q.namespace = @namespace::text)
      AND (@task::text = '' OR q.task = @task::text)
)
SELECT q.id, q.name, q.namespace, q.task,
       COALESCE(c.consumed, 0)::bigint AS consumed
FROM picked q
LEFT JOIN (
    SELECT p.queue_id, sum(pc.total_messages_consumed) AS consumed
    FROM queen.partition_consumers pc
    JOIN queen.partitions p ON p.id = pc.partition_id
    WHERE p.queue_id IN (SELECT picked.id FROM picked)
    GROUP BY p.queue_id
) c ON c.queue_id = q.id
ORDER BY q.name;

-- name: QueueNamesFiltered :many
-- Names of the queues matching a namespace and a task; empty matches any.
SELECT name FROM queen.queues
WHERE (@namespace::text = '' OR namespace = @namespace::text)
  AND (@task::text = '' OR task = @task::text)
ORDER BY name;

-- name: QueueListTenants :many
-- Every tenant that owns a queue or a stream query, with how many of each:
-- the tenants of a cell (there is no registry of them).
SELECT t.tenant_id,
       (SELECT count(*) FROM queen.queues q WHERE q.tenant_id = t.tenant_id)::bigint AS queues,
       (SELECT count(*) FROM queen_streams.queries s WHERE s.tenant_id = t.tenant_id)::bigint AS stream_queries
FROM (SELECT q.tenant_id FROM queen.queues q UNION SELECT s.tenant_id FROM queen_streams.queries s) AS t
ORDER BY t.tenant_id;
