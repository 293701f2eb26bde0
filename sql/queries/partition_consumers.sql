-- name: PartitionConsumerClaimAndRead :many
-- Takes the group's lease on one partition and reads the next batch in one
-- round trip. No row back means another consumer of the group holds the lease;
-- one row with a NULL message id means the lease was taken but nothing is
-- deliverable. A new cursor row starts at `start_after_time` (a subscription
-- point) when given, else at the beginning of the partition. vacant_seqs is
-- the partition's count of deleted messages in the snapshot the batch was read
-- in: an ack compares it with the count it locks (PartitionConsumerLockMany)
-- to know that what the broker remembers of the batch still holds
-- (handlers/broker/delivered.go).
--
-- Planned once per session, not at every call (docs/benchmarks.md, "Round
-- 6: the claim's plans"). PostgreSQL plans a prepared statement with its
-- arguments five times, then keeps its generic plan while that costs less
-- on paper than the average of those custom plans. Each argument that would
-- change an estimate (the partition, the delay, the subscription start) is
-- read through a one-row subquery, a value the planner does not know even
-- when it plans with the arguments, and the batch is read the same way by
-- an outer LIMIT. The inner LIMIT is always NULL (no limit): a plan made
-- with the arguments folds it away and costs the walk as a tenth of the
-- partition, the generic plan cannot and costs it as a hundredth. So the
-- generic plan stays the cheaper one even when the table has grown tenfold
-- since the custom plans were made (a fresh database filling up), and is
-- kept from the sixth call on. Both are the ordered walk of
-- messages_partition_id_seq_key; the outer LIMIT takes the first rows of
-- that ordered subquery.
--
-- The gate is a try-lock on (partition, group) held until this statement
-- commits: a consumer that finds another one claiming the same partition
-- right now skips it at once instead of queueing on the row lock. A lease
-- that this statement's snapshot already sees live is skipped before the
-- upsert, which would lock the leased row until commit (a commit with a WAL
-- flush) and so hold up the holder's own ack or autoAck update; the upsert's
-- WHERE still decides on the latest row, so a stale look can only skip a
-- partition that was released a moment ago, never claim a leased one.
WITH gate AS (
    SELECT pg_try_advisory_xact_lock(
        hashtextextended(format('%s/%s', @partition_id::uuid, @consumer_group::text), 12648430)) AS open
    WHERE NOT EXISTS (
        SELECT 1 FROM queen.partition_consumers l
        WHERE l.partition_id = @partition_id AND l.consumer_group = @consumer_group AND l.lease_expires_at > now())
),
claim AS (
    INSERT INTO queen.partition_consumers AS pc (
        partition_id, consumer_group, last_seq, lease_id, lease_acquired_at, lease_expires_at,
        batch_size, acked_count)
    SELECT
        @partition_id, @consumer_group,
        CASE WHEN (SELECT sqlc.narg(start_after_time)::timestamptz) IS NULL THEN 0
             ELSE (SELECT COALESCE(max(s.seq), 0) FROM queen.messages s
                   WHERE s.partition_id = (SELECT @partition_id::uuid)
                     AND s.created_at <= (SELECT sqlc.narg(start_after_time)::timestamptz))
        END,
        @lease_id, now(), now() + make_interval(secs => @lease_seconds::integer),
        @batch_size, 0
    FROM gate WHERE gate.open
    ON CONFLICT (partition_id, consumer_group) DO UPDATE SET
        lease_id = EXCLUDED.lease_id,
        lease_acquired_at = EXCLUDED.lease_acquired_at,
        lease_expires_at = EXCLUDED.lease_expires_at,
        batch_size = EXCLUDED.batch_size,
        acked_count = 0
    WHERE pc.lease_expires_at IS NULL OR pc.lease_expires_at <= now()
    RETURNING pc.last_seq, pc.batch_retry_count, pc.lease_expires_at
)
SELECT claim.last_seq AS cursor_seq, claim.batch_retry_count, claim.lease_expires_at::timestamptz AS lease_expires_at,
       COALESCE(m.seq, 0)::bigint AS seq,
       COALESCE(m.id, '00000000-0000-0000-0000-000000000000'::uuid)::uuid AS id,
       COALESCE(m.transaction_id, '')::text AS transaction_id,
       m.trace_id,
       COALESCE(m.payload, 'null'::jsonb)::jsonb AS payload,
       COALESCE(m.is_encrypted, false)::boolean AS is_encrypted,
       m.producer_sub,
       COALESCE(m.created_at, now())::timestamptz AS created_at,
       (SELECT v.vacant_seqs FROM queen.partitions v WHERE v.id = @partition_id)::bigint AS vacant_seqs
FROM claim
LEFT JOIN LATERAL (
    SELECT w.* FROM (
        SELECT s.id, s.seq, s.transaction_id, s.trace_id, s.payload, s.is_encrypted, s.producer_sub, s.created_at
        FROM queen.messages s
        WHERE s.partition_id = (SELECT @partition_id::uuid)
          AND s.seq > claim.last_seq
          AND s.created_at <= (SELECT CASE WHEN @delay_seconds::integer = 0 THEN 'infinity'::timestamptz
                                           ELSE now() - make_interval(secs => @delay_seconds::integer) END)
        ORDER BY s.seq
        LIMIT NULLIF(@batch_size::integer, @batch_size::integer)
    ) w
    LIMIT (SELECT @batch_size::integer)
) m ON true
ORDER BY m.seq;

-- name: PartitionConsumerAutoAckRead :batchmany
-- An autoAck pop of one partition whose cursor row exists: reads the next
-- batch and moves the cursor past it in one statement, so one commit (not a
-- lease write, then a cursor write) makes the delivery final. No lease is
-- taken: with the cursor moved in the same statement there is nothing to
-- release. The cursor row is locked with SKIP LOCKED, so a consumer of the
-- group finding another one's pop of this partition in flight skips it at
-- once instead of queueing behind its commit; a live lease (a pop without
-- autoAck) skips it too. Locking re-reads the latest committed row, so the
-- batch always starts past the cursor another pop just moved. Only columns
-- outside every index change while no lease is set (lease_id stays NULL):
-- the update is HOT. A cursor with nothing past it is not locked at all
-- (a lock is a write: a transaction id and a WAL flush at commit); the
-- probe for a next message is ordered with LIMIT 1, so it stops at the
-- first.
--
-- The first row says whether the cursor row exists: when it does not (a
-- group's first pop of the partition), the caller claims through
-- PartitionConsumerClaimAndRead, which creates it at the subscription's
-- start. One row with seq 0 means nothing was delivered; only then is the
-- cursor row looked up again.
--
-- The batch's rows come back as the batch read them, in seq order, with
-- no sort and no join after it, and the cursor's last message is found by
-- its seq rather than by an ordered aggregate: each sort copied the whole
-- batch, payloads included (docs/benchmarks.md, "Round 7: the autoAck
-- read"). SQL promises no order without an ORDER BY, so the caller checks
-- it (autoAckInOrder).
--
-- The arguments and the two LIMITs are written as in
-- PartitionConsumerClaimAndRead, so that the statement keeps its generic
-- plan after five calls.
--
-- Sent as a pgx batch of one or more claims' reads: the broker's group
-- commit of autoAck reads (read_commit.go) sends the reads of several
-- claims together, which PostgreSQL runs as one implicit transaction (one
-- commit). Each read still takes its own snapshot (READ COMMITTED: per
-- statement) and locks its cursor row with SKIP LOCKED, so it never waits
-- for a row lock and returns what it would alone.
WITH cur AS (
    SELECT pc.last_seq, pc.batch_retry_count
    FROM queen.partition_consumers pc
    WHERE pc.partition_id = @partition_id AND pc.consumer_group = @consumer_group
      AND (pc.lease_expires_at IS NULL OR pc.lease_expires_at <= now())
      AND (SELECT n.seq FROM queen.messages n
           WHERE n.partition_id = (SELECT @partition_id::uuid) AND n.seq > pc.last_seq
             AND n.created_at <= (SELECT CASE WHEN @delay_seconds::integer = 0 THEN 'infinity'::timestamptz
                                              ELSE now() - make_interval(secs => @delay_seconds::integer) END)
           ORDER BY n.seq LIMIT 1) IS NOT NULL
    FOR UPDATE SKIP LOCKED
),
batch AS MATERIALIZED (
    SELECT s.id, s.seq, s.transaction_id, s.trace_id, s.payload, s.is_encrypted, s.producer_sub, s.created_at,
           cur.batch_retry_count
    FROM cur
    CROSS JOIN LATERAL (
        SELECT w.* FROM (
            SELECT m.id, m.seq, m.transaction_id, m.trace_id, m.payload, m.is_encrypted, m.producer_sub, m.created_at
            FROM queen.messages m
            WHERE m.partition_id = (SELECT @partition_id::uuid)
              AND m.seq > cur.last_seq
              AND m.created_at <= (SELECT CASE WHEN @delay_seconds::integer = 0 THEN 'infinity'::timestamptz
                                               ELSE now() - make_interval(secs => @delay_seconds::integer) END)
            ORDER BY m.seq
            LIMIT NULLIF(@batch_size::integer, @batch_size::integer)
        ) w
        LIMIT (SELECT @batch_size::integer)
    ) s
),
moved AS (
    UPDATE queen.partition_consumers pc
    SET last_seq = GREATEST(pc.last_seq, t.last_seq),
        last_consumed_id = (SELECT l.id FROM batch l WHERE l.seq = t.last_seq),
        last_consumed_at = now(),
        total_messages_consumed = pc.total_messages_consumed + t.n,
        total_batches_consumed = pc.total_batches_consumed + 1,
        batch_retry_count = 0,
        lease_id = NULL, lease_acquired_at = NULL, lease_expires_at = NULL, batch_size = 0, acked_count = 0
    FROM (SELECT max(b.seq) AS last_seq, count(*) AS n FROM batch b) t
    WHERE pc.partition_id = @partition_id AND pc.consumer_group = @consumer_group AND t.n > 0
    RETURNING pc.last_seq
)
SELECT true AS cursor_found,
       COALESCE(b.batch_retry_count, 0)::integer AS batch_retry_count,
       COALESCE(b.seq, 0)::bigint AS seq,
       COALESCE(b.id, '00000000-0000-0000-0000-000000000000'::uuid)::uuid AS id,
       COALESCE(b.transaction_id, '')::text AS transaction_id,
       b.trace_id,
       COALESCE(b.payload, 'null'::jsonb)::jsonb AS payload,
       COALESCE(b.is_encrypted, false)::boolean AS is_encrypted,
       b.producer_sub,
       COALESCE(b.created_at, now())::timestamptz AS created_at
FROM batch b
UNION ALL
SELECT EXISTS (SELECT 1 FROM queen.partition_consumers x
               WHERE x.partition_id = @partition_id AND x.consumer_group = @consumer_group),
       0, 0, '00000000-0000-0000-0000-000000000000'::uuid, '', NULL, 'null'::jsonb, false, NULL, now()
WHERE NOT EXISTS (SELECT 1 FROM batch);

-- name: PartitionConsumerAutoAckAdvance :many
-- AutoAck pops served from rows another group's autoAck read of the
-- partition returned a moment ago on this broker (read_share.go): moves
-- each listed (partition, group) cursor from its expected_seq to its
-- last_seq, past the n messages its pop delivers from those rows, without
-- reading them again. The broker's group commit of cursor moves sends the
-- serves of every partition and group that wait together in one statement
-- (one commit). Each cursor row is locked as PartitionConsumerAutoAckRead
-- locks it (SKIP LOCKED, no live lease) and only while its last_seq still
-- equals the expected one: locking re-reads the latest committed row, so a
-- cursor another pop moved meanwhile (or a seek) gives no row, and that
-- claim reads as usual; the other rows move all the same. The rows are
-- locked in no particular order, which cannot deadlock: SKIP LOCKED never
-- waits for a row lock, and the update only writes rows this statement
-- locked, so it waits for no other transaction's row and cannot close a
-- cycle of waits. The columns set are those the read sets (the update is
-- HOT). A row per cursor moved, with the retry count the read would have
-- delivered with the batch. A (partition, group) pair appears once at most
-- (the caller's guarantee).
WITH want AS (
    SELECT unnest(@partition_ids::uuid[]) AS partition_id,
           unnest(@consumer_groups::text[]) AS consumer_group, unnest(@expected_seqs::bigint[]) AS expected_seq,
           unnest(@last_seqs::bigint[]) AS last_seq, unnest(@last_consumed_ids::uuid[]) AS last_consumed_id,
           unnest(@ns::bigint[]) AS n
),
cur AS (
    SELECT pc.partition_id, pc.consumer_group, pc.batch_retry_count, w.last_seq, w.last_consumed_id, w.n
    FROM want w
    JOIN queen.partition_consumers pc ON pc.partition_id = w.partition_id AND pc.consumer_group = w.consumer_group
    WHERE pc.last_seq = w.expected_seq
      AND (pc.lease_expires_at IS NULL OR pc.lease_expires_at <= now())
    FOR UPDATE OF pc SKIP LOCKED
),
moved AS (
    UPDATE queen.partition_consumers pc
    SET last_seq = cur.last_seq,
        last_consumed_id = cur.last_consumed_id,
        last_consumed_at = now(),
        total_messages_consumed = pc.total_messages_consumed + cur.n,
        total_batches_consumed = pc.total_batches_consumed + 1,
        batch_retry_count = 0,
        lease_id = NULL, lease_acquired_at = NULL, lease_expires_at = NULL, batch_size = 0, acked_count = 0
    FROM cur
    WHERE pc.partition_id = cur.partition_id AND pc.consumer_group = cur.consumer_group
    RETURNING pc.consumer_group
)
SELECT cur.partition_id::uuid AS partition_id, cur.consumer_group::text AS consumer_group,
       cur.batch_retry_count::integer AS batch_retry_count
FROM cur;

-- name: PartitionConsumerSetBatchSize :exec
-- Records how many messages a pop delivered, so the lease is released when
-- that many have been acked.
UPDATE queen.partition_consumers SET batch_size = @batch_size
WHERE partition_id = @partition_id AND consumer_group = @consumer_group AND lease_id = @lease_id;

-- name: PartitionConsumerRelease :exec
UPDATE queen.partition_consumers
SET lease_id = NULL, lease_acquired_at = NULL, lease_expires_at = NULL, batch_size = 0, acked_count = 0
WHERE partition_id = @partition_id AND consumer_group = @consumer_group AND lease_id = @lease_id;

-- name: PartitionConsumerAutoAck :exec
-- autoAck: the cursor passes everything just delivered and the lease ends.
UPDATE queen.partition_consumers
SET last_seq = GREATEST(last_seq, @last_seq::bigint),
    last_consumed_id = @last_consumed_id,
    last_consumed_at = now(),
    total_messages_consumed = total_messages_consumed + @consumed::bigint,
    total_batches_consumed = total_batches_consumed + 1,
    batch_retry_count = 0,
    lease_id = NULL, lease_acquired_at = NULL, lease_expires_at = NULL, batch_size = 0, acked_count = 0
WHERE partition_id = @partition_id AND consumer_group = @consumer_group AND lease_id = @lease_id;

-- name: PartitionConsumerLockMany :many
-- Locks the cursor rows an ack batch touches, in key order so concurrent
-- ack batches cannot deadlock. vacant_seqs tells the ack whether messages
-- of the partition were deleted since a pop read them (PartitionConsumerClaimAndRead).
SELECT pc.partition_id, pc.consumer_group, pc.last_seq, pc.lease_id,
       COALESCE(pc.lease_expires_at > now(), false)::boolean AS lease_active,
       pc.batch_size, pc.acked_count, pc.batch_retry_count, q.retry_limit, p.vacant_seqs
FROM queen.partition_consumers pc
JOIN queen.partitions p ON p.id = pc.partition_id
JOIN queen.queues q ON q.id = p.queue_id
JOIN (SELECT unnest(@partition_ids::uuid[]) AS partition_id, unnest(@consumer_groups::text[]) AS consumer_group) AS k
  ON pc.partition_id = k.partition_id AND pc.consumer_group = k.consumer_group
ORDER BY pc.partition_id, pc.consumer_group
FOR UPDATE OF pc;

-- name: PartitionConsumerApplyMany :exec
-- Writes the cursor and lease state an ack batch computed, one row per
-- (partition, group).
UPDATE queen.partition_consumers AS pc SET
    last_seq = v.last_seq,
    last_consumed_id = CASE WHEN v.consumed > 0 THEN v.last_id ELSE pc.last_consumed_id END,
    last_consumed_at = CASE WHEN v.consumed > 0 THEN now() ELSE pc.last_consumed_at END,
    total_messages_consumed = pc.total_messages_consumed + v.consumed,
    total_batches_consumed = pc.total_batches_consumed + v.batches,
    acked_count = v.acked_count,
    batch_retry_count = v.retry_count,
    lease_id = CASE WHEN v.release THEN NULL ELSE pc.lease_id END,
    lease_acquired_at = CASE WHEN v.release THEN NULL ELSE pc.lease_acquired_at END,
    lease_expires_at = CASE WHEN v.release THEN NULL ELSE pc.lease_expires_at END,
    batch_size = CASE WHEN v.release THEN 0 ELSE pc.batch_size END
FROM (SELECT unnest(@partition_ids::uuid[]) AS partition_id, unnest(@consumer_groups::text[]) AS consumer_group,
             unnest(@last_seqs::bigint[]) AS last_seq, unnest(@last_ids::uuid[]) AS last_id,
             unnest(@consumed::bigint[]) AS consumed, unnest(@batches::bigint[]) AS batches,
             unnest(@acked_counts::integer[]) AS acked_count, unnest(@retry_counts::integer[]) AS retry_count,
             unnest(@releases::boolean[]) AS release) AS v
WHERE pc.partition_id = v.partition_id AND pc.consumer_group = v.consumer_group;

-- name: PartitionConsumerAckWholeBatches :many
-- Completes whole leased batches in one statement, all or none: for each
-- (partition, group) the ack names every message of the batch its live
-- lease covers, none acked before, every one past the cursor, and the
-- partition deleted nothing since the pop read them (vacant_seqs). Where
-- every row qualifies, each cursor moves to its batch's last message and
-- the lease ends, as PartitionConsumerLockMany + ApplyMany would move it
-- (handlers/broker/ack_whole.go); where one does not, nothing is written
-- and no row comes back, and the ack takes the general path.
WITH v AS (
    SELECT unnest(@partition_ids::uuid[]) AS partition_id, unnest(@consumer_groups::text[]) AS consumer_group,
           unnest(@lease_ids::text[]) AS lease_id, unnest(@counts::integer[]) AS n,
           unnest(@first_seqs::bigint[]) AS first_seq, unnest(@last_seqs::bigint[]) AS last_seq,
           unnest(@last_ids::uuid[]) AS last_id, unnest(@vacant_seqs::bigint[]) AS vacant_seqs
),
ok AS (
    SELECT pc.partition_id, pc.consumer_group, v.n, v.last_seq, v.last_id
    FROM v
    JOIN queen.partition_consumers pc
      ON pc.partition_id = v.partition_id AND pc.consumer_group = v.consumer_group
    JOIN queen.partitions p ON p.id = pc.partition_id
    WHERE pc.lease_id = v.lease_id AND pc.lease_expires_at > now()
      AND pc.acked_count = 0 AND pc.batch_size = v.n AND pc.last_seq < v.first_seq
      AND p.vacant_seqs = v.vacant_seqs
    ORDER BY pc.partition_id, pc.consumer_group
    FOR UPDATE OF pc
)
UPDATE queen.partition_consumers AS pc SET
    last_seq = ok.last_seq,
    last_consumed_id = ok.last_id,
    last_consumed_at = now(),
    total_messages_consumed = pc.total_messages_consumed + ok.n,
    total_batches_consumed = pc.total_batches_consumed + 1,
    acked_count = ok.n,
    batch_retry_count = 0,
    lease_id = NULL,
    lease_acquired_at = NULL,
    lease_expires_at = NULL,
    batch_size = 0
FROM ok
WHERE pc.partition_id = ok.partition_id AND pc.consumer_group = ok.consumer_group
  AND (SELECT count(*) FROM ok) = cardinality(@partition_ids::uuid[])
RETURNING pc.partition_id, pc.consumer_group;

-- name: PartitionConsumerExtendLease :many
-- Moves the expiry of every live claim of a lease on the tenant's partitions
-- to now + seconds, never earlier than it was; without seconds (NULL), each
-- claim by its queue's lease_time, or default_seconds where that is 0. A lease
-- of another tenant is not found (and not extended): the lease index finds the
-- rows, the join checks their queue's tenant.
UPDATE queen.partition_consumers AS pc
SET lease_expires_at = GREATEST(pc.lease_expires_at, now() + make_interval(secs =>
        COALESCE(sqlc.narg(seconds)::integer, NULLIF(q.lease_time, 0), @default_seconds::integer)))
FROM queen.partitions p
JOIN queen.queues q ON q.id = p.queue_id
WHERE p.id = pc.partition_id AND pc.lease_id = @lease_id AND pc.lease_expires_at > now()
  AND q.tenant_id = @tenant_id
RETURNING pc.lease_expires_at;

-- name: PartitionConsumerLeaseExists :one
SELECT EXISTS (
    SELECT 1 FROM queen.partition_consumers pc
    JOIN queen.partitions p ON p.id = pc.partition_id
    JOIN queen.queues q ON q.id = p.queue_id
    WHERE pc.lease_id = @lease_id AND q.tenant_id = @tenant_id)::boolean;

-- name: PartitionConsumerDeleteByGroup :execrows
-- A group's cursors on every queue of a tenant.
DELETE FROM queen.partition_consumers pc
USING queen.partitions p, queen.queues q
WHERE pc.partition_id = p.id AND p.queue_id = q.id
  AND pc.consumer_group = @consumer_group AND q.tenant_id = @tenant_id;

-- name: PartitionConsumerDeleteByGroupAndQueue :execrows
DELETE FROM queen.partition_consumers pc
USING queen.partitions p, queen.queues q
WHERE pc.partition_id = p.id AND p.queue_id = q.id
  AND pc.consumer_group = @consumer_group AND q.tenant_id = @tenant_id AND q.name = @queue_name;

-- name: PartitionConsumerLockForClear :exec
-- Step one of a queue clear: locks every cursor row on the partitions about
-- to go (one partition, or all of the queue when partition_name is NULL), in
-- the key order ack batches use. Cursors are locked before partitions, as an
-- ack-and-push transaction does, so a clear cannot deadlock with one.
SELECT 1 FROM queen.partition_consumers pc
JOIN queen.partitions p ON p.id = pc.partition_id
WHERE p.queue_id = @queue_id
  AND (sqlc.narg(partition_name)::text IS NULL OR p.name = sqlc.narg(partition_name)::text)
ORDER BY pc.partition_id, pc.consumer_group
FOR UPDATE OF pc;

-- name: PartitionConsumerLockForClearNowait :exec
-- Step three: the cursor rows of the locked partitions again, without
-- waiting. A row created after step one (a first pop of a group) may be held
-- by a transaction that now waits for one of our partitions; waiting for it
-- would deadlock, so the clear fails with lock_not_available and starts over.
SELECT 1 FROM queen.partition_consumers pc
WHERE pc.partition_id = ANY(@partition_ids::uuid[])
ORDER BY pc.partition_id, pc.consumer_group
FOR UPDATE NOWAIT;

-- name: PartitionConsumerSeekQueue :execrows
-- Moves the group's cursor on every partition of a queue: to the newest
-- message (to_end) or to the last message at or before target_time. Creates
-- the cursor rows that do not exist yet, so partitions the group never read
-- move too, and releases any lease.
INSERT INTO queen.partition_consumers AS pc (partition_id, consumer_group, last_seq)
SELECT p.id, @consumer_group,
       CASE WHEN @to_end::boolean THEN p.last_seq
            ELSE (SELECT COALESCE(max(m.seq), 0) FROM queen.messages m
                  WHERE m.partition_id = p.id AND m.created_at <= sqlc.narg(target_time)::timestamptz)
       END
FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE q.tenant_id = @tenant_id AND q.name = @queue_name
  AND (@partition_name::text = '' OR p.name = @partition_name::text)
ON CONFLICT (partition_id, consumer_group) DO UPDATE SET
    last_seq = EXCLUDED.last_seq,
    lease_id = NULL, lease_acquired_at = NULL, lease_expires_at = NULL,
    batch_size = 0, acked_count = 0, batch_retry_count = 0;

-- name: PartitionConsumerListByPartition :many
-- Every consumer group with a cursor on a partition, by name.
SELECT consumer_group, last_seq, lease_expires_at, COALESCE(lease_expires_at > now(), false)::boolean AS lease_active
FROM queen.partition_consumers
WHERE partition_id = @partition_id
ORDER BY consumer_group;

-- name: PartitionConsumerListByGroup :many
-- Every cursor of a group in a tenant, with its queue and partition names.
SELECT q.name AS queue_name, p.name AS partition_name, pc.partition_id, pc.last_consumed_at,
       pc.total_messages_consumed, COALESCE(pc.lease_expires_at > now(), false)::boolean AS lease_active
FROM queen.partition_consumers pc
JOIN queen.partitions p ON p.id = pc.partition_id
JOIN queen.queues q ON q.id = p.queue_id
WHERE pc.consumer_group = @consumer_group AND q.tenant_id = @tenant_id;

-- name: PartitionConsumerCursorTotals :many
-- Per partition, over its consumer groups: messages and batches consumed and
-- the last consumption.
SELECT partition_id,
       COALESCE(sum(total_messages_consumed), 0)::bigint AS consumed,
       COALESCE(sum(total_batches_consumed), 0)::bigint AS batches,
       max(last_consumed_at)::timestamptz AS last_consumed_at
FROM queen.partition_consumers
WHERE partition_id = ANY(@partition_ids::uuid[])
GROUP BY partition_id;

-- name: PartitionConsumerLeaseSummary :one
-- Live leases: how many, on how many partitions, and their batch progress.
SELECT count(*)::bigint AS active,
       count(DISTINCT partition_id)::bigint AS partitions,
       COALESCE(sum(batch_size), 0)::bigint AS batch_size,
       COALESCE(sum(acked_count), 0)::bigint AS acked
FROM queen.partition_consumers
WHERE lease_id IS NOT NULL AND lease_expires_at > now();

-- name: PartitionConsumerSkipMissing :execrows
-- After retention or eviction deleted messages, moves unleased cursors of
-- these partitions over sequence numbers that no longer hold a message (up to
-- just before the next stored one, or the partition's high-water mark), so
-- the partitions stop looking pending. No stored message is skipped.
UPDATE queen.partition_consumers c
SET last_seq = t.target
FROM (
    SELECT c2.partition_id, c2.consumer_group,
           COALESCE((SELECT min(m.seq) FROM queen.messages m
                      WHERE m.partition_id = c2.partition_id AND m.seq > c2.last_seq) - 1,
                    p.last_seq)::bigint AS target
    FROM queen.partition_consumers c2
    JOIN queen.partitions p ON p.id = c2.partition_id
    WHERE c2.partition_id = ANY(@partition_ids::uuid[])
) t
WHERE c.partition_id = t.partition_id AND c.consumer_group = t.consumer_group
  AND t.target > c.last_seq
  AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now());

-- name: PartitionConsumerPassHead :execrows
-- Moves a group's cursor over one message, only when it is the next message
-- the group would receive and the group holds no live lease on the partition
-- (the operator's "move to DLQ"). A group without a cursor gets one.
INSERT INTO queen.partition_consumers AS c (partition_id, consumer_group, last_seq, last_consumed_id, last_consumed_at)
SELECT @partition_id, @consumer_group, @seq, @message_id, now()
WHERE NOT EXISTS (
    SELECT 1 FROM queen.messages m
    WHERE m.partition_id = @partition_id AND m.seq < @seq
      AND m.seq > COALESCE((SELECT x.last_seq FROM queen.partition_consumers x
                            WHERE x.partition_id = @partition_id AND x.consumer_group = @consumer_group), 0))
ON CONFLICT (partition_id, consumer_group) DO UPDATE SET
    last_seq = EXCLUDED.last_seq, last_consumed_id = EXCLUDED.last_consumed_id,
    last_consumed_at = EXCLUDED.last_consumed_at, batch_retry_count = 0
WHERE c.last_seq < EXCLUDED.last_seq
  AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now())
  AND NOT EXISTS (SELECT 1 FROM queen.messages m
                  WHERE m.partition_id = c.partition_id AND m.seq > c.last_seq AND m.seq < EXCLUDED.last_seq);
