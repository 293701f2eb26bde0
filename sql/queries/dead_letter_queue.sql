-- name: DeadLetterInsertMany :exec
INSERT INTO queen.dead_letter_queue (message_id, partition_id, consumer_group, error_message, retry_count, original_created_at)
SELECT unnest(@message_ids::uuid[]), unnest(@partition_ids::uuid[]), unnest(@consumer_groups::text[]),
       unnest(@error_messages::text[]), unnest(@retry_counts::integer[]),
       unnest(@original_created_ats::timestamptz[]);

-- name: DeadLetterList :many
-- Newest failure first, filtered by queue, group, partition and time window.
SELECT d.id AS dlq_id, d.consumer_group, d.error_message, d.retry_count, d.failed_at,
       m.id AS message_id, m.transaction_id, m.trace_id, m.payload, m.is_encrypted, m.producer_sub,
       m.created_at, p.id AS partition_id, p.name AS partition_name, q.name AS queue_name
FROM queen.dead_letter_queue d
JOIN queen.messages m ON m.id = d.message_id
JOIN queen.partitions p ON p.id = d.partition_id
JOIN queen.queues q ON q.id = p.queue_id
WHERE q.tenant_id = @tenant_id
  AND (@queue_name::text = '' OR q.name = @queue_name::text)
  AND (@consumer_group::text = '' OR d.consumer_group = @consumer_group::text)
  AND (@partition_name::text = '' OR p.name = @partition_name::text)
  AND (sqlc.narg(failed_from)::timestamptz IS NULL OR d.failed_at >= sqlc.narg(failed_from)::timestamptz)
  AND (sqlc.narg(failed_to)::timestamptz IS NULL OR d.failed_at <= sqlc.narg(failed_to)::timestamptz)
ORDER BY d.failed_at DESC, d.id
LIMIT @row_limit OFFSET @row_offset;

-- name: DeadLetterCount :one
SELECT count(*) FROM queen.dead_letter_queue d
JOIN queen.partitions p ON p.id = d.partition_id
JOIN queen.queues q ON q.id = p.queue_id
WHERE q.tenant_id = @tenant_id
  AND (@queue_name::text = '' OR q.name = @queue_name::text)
  AND (@consumer_group::text = '' OR d.consumer_group = @consumer_group::text)
  AND (@partition_name::text = '' OR p.name = @partition_name::text)
  AND (sqlc.narg(failed_from)::timestamptz IS NULL OR d.failed_at >= sqlc.narg(failed_from)::timestamptz)
  AND (sqlc.narg(failed_to)::timestamptz IS NULL OR d.failed_at <= sqlc.narg(failed_to)::timestamptz);

-- name: DeadLetterLatestByMessage :one
-- The newest dead-letter row of a message, for the message detail.
SELECT error_message, retry_count, consumer_group, failed_at
FROM queen.dead_letter_queue
WHERE message_id = @message_id
ORDER BY failed_at DESC
LIMIT 1;

-- name: DeadLetterSummary :one
SELECT count(*)::bigint AS total, count(DISTINCT partition_id)::bigint AS partitions
FROM queen.dead_letter_queue;

-- name: DeadLetterTopErrors :many
SELECT COALESCE(error_message, '')::text AS error, count(*)::bigint AS count
FROM queen.dead_letter_queue
GROUP BY 1
ORDER BY 2 DESC, 1
LIMIT @row_limit;

-- name: DeadLetterCountByQueue :many
SELECT q.name AS queue_name, count(*)::bigint AS count
FROM queen.dead_letter_queue d
JOIN queen.partitions p ON p.id = d.partition_id
JOIN queen.queues q ON q.id = p.queue_id
GROUP BY q.name
ORDER BY q.name;

-- name: DeadLetterGetForReplay :one
-- The newest dead-letter row of a message (of one group when given), with
-- what a replay pushes.
SELECT d.id AS dlq_id, d.consumer_group, d.message_id,
       m.transaction_id, m.trace_id, m.payload, m.is_encrypted, m.producer_sub,
       p.id AS partition_id, p.name AS partition_name, q.name AS queue_name
FROM queen.dead_letter_queue d
JOIN queen.messages m ON m.id = d.message_id
JOIN queen.partitions p ON p.id = d.partition_id
JOIN queen.queues q ON q.id = p.queue_id
WHERE d.partition_id = @partition_id AND m.transaction_id = @transaction_id AND q.tenant_id = @tenant_id
  AND (@consumer_group::text = '' OR d.consumer_group = @consumer_group::text)
ORDER BY d.failed_at DESC, d.id
LIMIT 1;

-- name: DeadLetterGetByID :one
-- One dead-letter row of a tenant, with what a replay pushes.
SELECT d.id AS dlq_id, d.consumer_group, d.message_id,
       m.transaction_id, m.trace_id, m.payload, m.is_encrypted, m.producer_sub,
       p.id AS partition_id, p.name AS partition_name, q.name AS queue_name
FROM queen.dead_letter_queue d
JOIN queen.messages m ON m.id = d.message_id
JOIN queen.partitions p ON p.id = d.partition_id
JOIN queen.queues q ON q.id = p.queue_id
WHERE d.id = @id AND q.tenant_id = @tenant_id;

-- name: DeadLetterDeleteByQueue :execrows
-- The bulk purge: every dead-letter row of a queue, or of one group in it.
DELETE FROM queen.dead_letter_queue d
USING queen.partitions p, queen.queues q
WHERE p.id = d.partition_id AND q.id = p.queue_id AND q.tenant_id = @tenant_id AND q.name = @queue_name::text
  AND (@consumer_group::text = '' OR d.consumer_group = @consumer_group::text);

-- name: DeadLetterDeleteByID :execrows
DELETE FROM queen.dead_letter_queue WHERE id = @id;

-- name: DeadLetterExistsForGroup :one
SELECT EXISTS (SELECT 1 FROM queen.dead_letter_queue WHERE message_id = @message_id AND consumer_group = @consumer_group)::boolean;
