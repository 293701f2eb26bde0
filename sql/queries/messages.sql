-- name: MessageInsertMany :many
-- Inserts a push's messages. A transactionId already stored in the partition
-- is skipped and left out of the result; the caller reports it as duplicate.
INSERT INTO queen.messages (id, partition_id, seq, transaction_id, trace_id, payload, is_encrypted, producer_sub)
SELECT unnest(@ids::uuid[]), unnest(@partition_ids::uuid[]), unnest(@seqs::bigint[]),
       unnest(@transaction_ids::text[]), NULLIF(unnest(@trace_ids::text[]), '')::uuid, unnest(@payloads::jsonb[]),
       unnest(@is_encrypted::boolean[]), NULLIF(unnest(@producer_subs::text[]), '')
ON CONFLICT (partition_id, transaction_id) DO NOTHING
RETURNING id, partition_id, transaction_id;

-- name: MessageListByTransactionIDs :many
-- Finds stored messages by (partition, transactionId) pairs: duplicates on
-- push, and the messages acks refer to.
SELECT m.id, m.partition_id, m.transaction_id, m.seq, m.created_at,
       p.name AS partition_name, q.name AS queue_name
FROM queen.messages m
JOIN queen.partitions p ON p.id = m.partition_id
JOIN queen.queues q ON q.id = p.queue_id
JOIN (SELECT unnest(@partition_ids::uuid[]) AS partition_id, unnest(@transaction_ids::text[]) AS transaction_id) AS k
  ON m.partition_id = k.partition_id AND m.transaction_id = k.transaction_id;

-- name: MessageListAfterSeq :many
-- The next messages of a partition after a cursor, oldest first, leaving out
-- messages younger than the queue's delayedProcessing.
SELECT id, seq, transaction_id, trace_id, payload, is_encrypted, producer_sub, created_at
FROM queen.messages
WHERE partition_id = @partition_id
  AND seq > @after_seq
  AND (@delay_seconds::integer = 0 OR created_at <= now() - make_interval(secs => @delay_seconds::integer))
ORDER BY seq
LIMIT @max_messages;

-- name: MessageLastSeqAtOrBefore :one
-- Where a cursor starts when a group subscribes from a point in time.
SELECT COALESCE(max(seq), 0)::bigint FROM queen.messages
WHERE partition_id = @partition_id AND created_at <= @at;

-- name: MessageGetByTransactionID :one
SELECT m.*, p.name AS partition_name, q.name AS queue_name
FROM queen.messages m
JOIN queen.partitions p ON p.id = m.partition_id
JOIN queen.queues q ON q.id = p.queue_id
WHERE m.partition_id = @partition_id AND m.transaction_id = @transaction_id;
