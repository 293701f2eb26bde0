-- name: MessagePush :many
-- Stores a push's messages in one statement: see queen.push_messages
-- (migration 0012) for the arguments and the result.
SELECT r.part::integer AS part, r.ord::integer AS ord, r.id::uuid AS id
FROM queen.push_messages(@queue_ids::uuid[], @names::text[], @counts::bigint[], @part_idx::integer[],
    @seq_offs::bigint[], @ids::uuid[], @transaction_ids::text[], @trace_ids::text[], @payloads::jsonb[],
    @is_encrypted::boolean[], @producer_subs::text[], @check_dups::boolean) AS r (part, ord, id);

-- name: MessageListByTransactionIDs :many
-- Finds stored messages by (tenant, partition, transactionId) keys: the
-- messages acks, transactions and stream cycles refer to. A key whose
-- partition belongs to another tenant finds nothing, so a tenant never acts
-- on another's message even knowing its ids; the check rides on the join
-- the names needed anyway. LATERAL makes every key one probe of the
-- (partition_id, transaction_id) unique index whatever the table's
-- statistics say; a plain join let stale statistics pick a full scan per ack.
SELECT q.tenant_id, m.id, m.partition_id, m.transaction_id, m.seq, m.created_at,
       p.name AS partition_name, q.name AS queue_name
FROM (SELECT unnest(@tenant_ids::uuid[]) AS tenant_id, unnest(@partition_ids::uuid[]) AS partition_id,
             unnest(@transaction_ids::text[]) AS transaction_id) AS k
CROSS JOIN LATERAL (
    SELECT s.id, s.partition_id, s.transaction_id, s.seq, s.created_at FROM queen.messages s
    WHERE s.partition_id = k.partition_id AND s.transaction_id = k.transaction_id
) AS m
JOIN queen.partitions p ON p.id = m.partition_id
JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = k.tenant_id;

-- name: MessageListAckWindow :many
-- The messages a batch ack most likely names, read as ranges instead of one
-- index probe per message: per (tenant, partition, group) key, the next n
-- messages after the group's cursor (a popped batch is exactly those). The
-- caller matches them to its items by transactionId and looks up the rest
-- with MessageListByTransactionIDs. The tenant check is one join per key: a
-- key whose partition belongs to another tenant reads nothing. The cursor is
-- read without a lock; a stale position only makes the window miss.
SELECT q.tenant_id, m.id, m.partition_id, m.transaction_id, m.seq, m.created_at,
       p.name AS partition_name, q.name AS queue_name
FROM (SELECT unnest(@tenant_ids::uuid[]) AS tenant_id, unnest(@partition_ids::uuid[]) AS partition_id,
             unnest(@consumer_groups::text[]) AS consumer_group, unnest(@counts::integer[]) AS n) AS k
JOIN queen.partitions p ON p.id = k.partition_id
JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = k.tenant_id
CROSS JOIN LATERAL (
    SELECT s.id, s.partition_id, s.transaction_id, s.seq, s.created_at FROM queen.messages s
    WHERE s.partition_id = k.partition_id
      AND s.seq > COALESCE((SELECT c.last_seq FROM queen.partition_consumers c
                            WHERE c.partition_id = k.partition_id AND c.consumer_group = k.consumer_group), 0)
    ORDER BY s.seq
    LIMIT k.n
) AS m;

-- name: MessageGetByTransactionID :one
-- A tenant's stored message; another tenant's is not found.
SELECT m.*, p.name AS partition_name, q.name AS queue_name
FROM queen.messages m
JOIN queen.partitions p ON p.id = m.partition_id
JOIN queen.queues q ON q.id = p.queue_id
WHERE m.partition_id = @partition_id AND m.transaction_id = @transaction_id AND q.tenant_id = @tenant_id;

-- name: MessageListPage :many
-- The admin message listing, newest first, with each message's status:
-- dead_letter when a dead-letter row refers to it; on a partition read only
-- by named (bus) groups, completed once every group's cursor passed it, else
-- pending; otherwise completed when the queue-mode cursor passed it,
-- processing when it is among the un-acked messages of a live queue-mode
-- lease, else pending. The status filter applies to that final status.
-- NULL or empty filters match everything. Without a status filter the scan
-- stops once the page is full.
SELECT m.id, m.partition_id, m.seq, m.transaction_id, m.trace_id, m.producer_sub, m.created_at,
       p.name AS partition_name, q.name AS queue_name, q.namespace, q.task, q.priority,
       s.status::text AS status,
       COALESCE(s.consumed_by, 0)::integer AS consumed_by,
       COALESCE(bus.groups, 0)::integer AS bus_groups,
       (qm.last_seq IS NOT NULL)::boolean AS has_queue_mode,
       qm.lease_expires_at
FROM queen.messages m
JOIN queen.partitions p ON p.id = m.partition_id
JOIN queen.queues q ON q.id = p.queue_id
LEFT JOIN LATERAL (
    SELECT c.last_seq, c.lease_expires_at,
           (c.lease_expires_at > now() AND c.batch_size > c.acked_count) AS leased,
           (SELECT n.seq FROM queen.messages n
             WHERE n.partition_id = c.partition_id AND n.seq > c.last_seq
             ORDER BY n.seq OFFSET GREATEST(c.batch_size - c.acked_count, 1) - 1 LIMIT 1) AS inflight_last_seq
    FROM queen.partition_consumers c
    WHERE c.partition_id = p.id AND c.consumer_group = '__QUEUE_MODE__'
) qm ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS groups, array_agg(c.last_seq) AS seqs
    FROM queen.partition_consumers c
    WHERE c.partition_id = p.id AND c.consumer_group <> '__QUEUE_MODE__'
) bus ON true
CROSS JOIN LATERAL (
    SELECT x.consumed_by,
           CASE
               WHEN EXISTS (SELECT 1 FROM queen.dead_letter_queue d WHERE d.message_id = m.id) THEN 'dead_letter'
               WHEN qm.last_seq IS NULL AND bus.groups > 0 THEN
                   CASE WHEN x.consumed_by = bus.groups THEN 'completed' ELSE 'pending' END
               WHEN m.seq <= qm.last_seq THEN 'completed'
               WHEN qm.leased AND (qm.inflight_last_seq IS NULL OR m.seq <= qm.inflight_last_seq) THEN 'processing'
               ELSE 'pending'
           END AS status
    FROM (SELECT (SELECT count(*) FROM unnest(bus.seqs) AS b(seq) WHERE b.seq >= m.seq) AS consumed_by) x
) s
WHERE q.tenant_id = @tenant_id
  AND m.id >= queen.message_id_floor(sqlc.narg(created_from)::timestamptz)
  AND m.id < queen.message_id_ceiling(sqlc.narg(created_before)::timestamptz)
  AND (sqlc.narg(created_from)::timestamptz IS NULL OR m.created_at >= sqlc.narg(created_from)::timestamptz)
  AND (sqlc.narg(created_before)::timestamptz IS NULL OR m.created_at < sqlc.narg(created_before)::timestamptz)
  AND (@queue_name::text = '' OR q.name = @queue_name::text)
  AND (@partition_name::text = '' OR p.name = @partition_name::text)
  AND (@namespace::text = '' OR q.namespace = @namespace::text)
  AND (@task::text = '' OR q.task = @task::text)
  AND (sqlc.narg(partition_id)::uuid IS NULL OR m.partition_id = sqlc.narg(partition_id)::uuid)
  AND (@transaction_id::text = '' OR m.transaction_id = @transaction_id::text)
  AND (@status::text = '' OR s.status = @status::text)
ORDER BY m.id DESC
LIMIT @row_limit OFFSET @row_offset;

-- name: MessageModeSummary :one
-- Which kinds of consumers read the partitions a message listing covers:
-- whether the queue-mode group does, and how many named (bus) groups.
-- Without a queue named, each group (a skip scan of the group index: one
-- probe per group) is checked by walking its cursors until one is on a
-- partition the filters match, which on a tenant's whole set of queues is
-- the first; joining every partition to its cursors instead cost seconds
-- at 100,000 partitions (docs/benchmarks.md, "Performance round 2: deep
-- backlog"). With a queue named, that queue's partitions are joined to
-- their cursors.
WITH RECURSIVE g AS (
    (SELECT c.consumer_group FROM queen.partition_consumers c ORDER BY c.consumer_group LIMIT 1)
    UNION ALL
    SELECT (SELECT c.consumer_group FROM queen.partition_consumers c
             WHERE c.consumer_group > g.consumer_group ORDER BY c.consumer_group LIMIT 1)
    FROM g WHERE g.consumer_group IS NOT NULL
),
f AS (
    SELECT g.consumer_group
    FROM g
    CROSS JOIN LATERAL (
        SELECT 1 FROM queen.partition_consumers c
        JOIN queen.partitions p ON p.id = c.partition_id
        JOIN queen.queues q ON q.id = p.queue_id
        WHERE c.consumer_group = g.consumer_group
          AND q.tenant_id = @tenant_id
          AND (@partition_name::text = '' OR p.name = @partition_name::text)
          AND (@namespace::text = '' OR q.namespace = @namespace::text)
          AND (@task::text = '' OR q.task = @task::text)
          AND (sqlc.narg(partition_id)::uuid IS NULL OR p.id = sqlc.narg(partition_id)::uuid)
        LIMIT 1) x
    WHERE @queue_name::text = '' AND g.consumer_group IS NOT NULL
    UNION
    SELECT c.consumer_group
    FROM queen.partition_consumers c
    JOIN queen.partitions p ON p.id = c.partition_id
    JOIN queen.queues q ON q.id = p.queue_id
    WHERE @queue_name::text <> '' AND q.tenant_id = @tenant_id AND q.name = @queue_name::text
      AND (@partition_name::text = '' OR p.name = @partition_name::text)
      AND (@namespace::text = '' OR q.namespace = @namespace::text)
      AND (@task::text = '' OR q.task = @task::text)
      AND (sqlc.narg(partition_id)::uuid IS NULL OR p.id = sqlc.narg(partition_id)::uuid)
)
SELECT COALESCE(bool_or(f.consumer_group = '__QUEUE_MODE__'), false)::boolean AS has_queue_mode,
       count(*) FILTER (WHERE f.consumer_group <> '__QUEUE_MODE__')::integer AS bus_groups
FROM f;

-- name: MessageDeleteByTransactionID :execrows
-- Deletes a tenant's stored message; its dead-letter and trace rows go with
-- it, and its sequence number counts as vacant (and raises vacant_top,
-- migration 0021). A partition of another
-- tenant locks nothing and deletes nothing. The partition row is locked
-- before the message goes: a push holding that lock may be waiting on the
-- message (a duplicate transactionId), so taking it afterwards could
-- deadlock.
WITH locked AS (
    SELECT p.id FROM queen.partitions p
    JOIN queen.queues q ON q.id = p.queue_id
    WHERE p.id = @partition_id AND q.tenant_id = @tenant_id
    FOR NO KEY UPDATE OF p
), gone AS (
    DELETE FROM queen.messages
    WHERE partition_id = (SELECT locked.id FROM locked) AND transaction_id = @transaction_id
    RETURNING partition_id, seq
)
UPDATE queen.partitions p SET vacant_seqs = p.vacant_seqs + 1, vacant_top = GREATEST(p.vacant_top, gone.seq)
FROM gone WHERE p.id = gone.partition_id;

-- name: MessageCountCreatedSince :one
-- Messages stored since a time, of one tenant, or of all when the tenant
-- is NULL: a broker without tenancy counts without the join (run it with
-- custom plans, which drop the EXISTS for a NULL tenant). The time is the
-- id's (UUIDv7, the storing broker's clock): an index-only range of the
-- primary key (migration 0013).
SELECT count(*) FROM queen.messages m
WHERE m.id >= queen.uuid_v7_from_ms(extract(epoch FROM @since::timestamptz) * 1000)
  AND (sqlc.narg(tenant_id)::uuid IS NULL OR EXISTS (
      SELECT 1 FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
      WHERE p.id = m.partition_id AND q.tenant_id = sqlc.narg(tenant_id)::uuid));

-- name: MessageDeleteExpired :many
-- Retention: deletes up to @batch_size messages of a queue stored before
-- @cutoff, whatever their state. Driven by the primary key, whose UUIDv7
-- ids are in time order (migration 0013), so idle partitions cost nothing.
-- Returns the partitions and how many messages each lost, and counts those
-- numbers as vacant in the same statement (migration 0008), raising
-- vacant_top to the highest of them (migration 0021). The partition rows are locked before any message goes, in the
-- order pushes lock them (queue id, then name, bytewise): a push holding a
-- partition's lock may wait on a message being deleted (a duplicate
-- transactionId), so locking after the delete, or in another order, could
-- deadlock.
WITH victims AS MATERIALIZED (
    SELECT m.id, m.partition_id FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
    WHERE p.queue_id = @queue_id AND m.id < queen.message_id_ceiling(@cutoff) AND m.created_at < @cutoff
    LIMIT @batch_size
), locked AS (
    SELECT p.id FROM queen.partitions p
    WHERE p.id IN (SELECT victims.partition_id FROM victims)
    ORDER BY p.queue_id, p.name COLLATE "C"
    FOR NO KEY UPDATE
), gone AS (
    DELETE FROM queen.messages m
    WHERE m.id IN (SELECT victims.id FROM victims)
      AND m.partition_id IN (SELECT locked.id FROM locked)
    RETURNING m.partition_id, m.seq
), counted AS (
    SELECT gone.partition_id, count(*) AS n, max(gone.seq) AS top FROM gone GROUP BY gone.partition_id
)
UPDATE queen.partitions p SET vacant_seqs = p.vacant_seqs + c.n, vacant_top = GREATEST(p.vacant_top, c.top)
FROM counted c
WHERE p.id = c.partition_id
RETURNING p.id AS partition_id, c.n::bigint AS deleted;

-- name: MessageDeleteCompleted :many
-- Completed retention: deletes up to @batch_size messages of a queue stored
-- before @cutoff that every consumer cursor of their partition has passed.
-- Dead-lettered messages stay (their DLQ rows would go with them).
-- Returns and counts as MessageDeleteExpired does.
WITH victims AS MATERIALIZED (
    SELECT m.id, m.partition_id FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
    WHERE p.queue_id = @queue_id AND m.id < queen.message_id_ceiling(@cutoff) AND m.created_at < @cutoff
      AND m.seq <= (SELECT min(c.last_seq) FROM queen.partition_consumers c WHERE c.partition_id = m.partition_id)
      AND NOT EXISTS (SELECT 1 FROM queen.dead_letter_queue d WHERE d.message_id = m.id)
    LIMIT @batch_size
), locked AS (
    SELECT p.id FROM queen.partitions p
    WHERE p.id IN (SELECT victims.partition_id FROM victims)
    ORDER BY p.queue_id, p.name COLLATE "C"
    FOR NO KEY UPDATE
), gone AS (
    DELETE FROM queen.messages m
    WHERE m.id IN (SELECT victims.id FROM victims)
      AND m.partition_id IN (SELECT locked.id FROM locked)
    RETURNING m.partition_id, m.seq
), counted AS (
    SELECT gone.partition_id, count(*) AS n, max(gone.seq) AS top FROM gone GROUP BY gone.partition_id
)
UPDATE queen.partitions p SET vacant_seqs = p.vacant_seqs + c.n, vacant_top = GREATEST(p.vacant_top, c.top)
FROM counted c
WHERE p.id = c.partition_id
RETURNING p.id AS partition_id, c.n::bigint AS deleted;

-- name: MessageDeleteWaitExpired :many
-- maxWaitTimeSeconds eviction: deletes up to @batch_size messages of a queue
-- stored before @cutoff that some consumer cursor of their partition has not
-- passed (or that no consumer ever read). Partitions under a live lease are
-- left for the next run, so a delivered batch is never pulled away from its
-- consumer.
-- Returns and counts as MessageDeleteExpired does.
WITH victims AS MATERIALIZED (
    SELECT m.id, m.partition_id FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
    WHERE p.queue_id = @queue_id AND m.id < queen.message_id_ceiling(@cutoff) AND m.created_at < @cutoff
      AND m.seq > COALESCE((SELECT min(c.last_seq) FROM queen.partition_consumers c WHERE c.partition_id = m.partition_id), 0)
      AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers c
                      WHERE c.partition_id = m.partition_id AND c.lease_expires_at > now())
    LIMIT @batch_size
), locked AS (
    SELECT p.id FROM queen.partitions p
    WHERE p.id IN (SELECT victims.partition_id FROM victims)
    ORDER BY p.queue_id, p.name COLLATE "C"
    FOR NO KEY UPDATE
), gone AS (
    DELETE FROM queen.messages m
    WHERE m.id IN (SELECT victims.id FROM victims)
      AND m.partition_id IN (SELECT locked.id FROM locked)
    RETURNING m.partition_id, m.seq
), counted AS (
    SELECT gone.partition_id, count(*) AS n, max(gone.seq) AS top FROM gone GROUP BY gone.partition_id
)
UPDATE queen.partitions p SET vacant_seqs = p.vacant_seqs + c.n, vacant_top = GREATEST(p.vacant_top, c.top)
FROM counted c
WHERE p.id = c.partition_id
RETURNING p.id AS partition_id, c.n::bigint AS deleted;
