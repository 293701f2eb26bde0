-- name: PartitionEnsure :one
INSERT INTO queen.partitions AS p (queue_id, name) VALUES (@queue_id, @name)
ON CONFLICT (queue_id, name) DO UPDATE SET name = EXCLUDED.name
RETURNING p.id;

-- name: PartitionLockForClear :many
-- Step two of a queue clear: locks the partitions about to go (one, or all
-- of the queue when partition_name is NULL) in the order pushes lock them,
-- by name in byte order (Go's string order, see storeMessages), so a
-- concurrent multi-partition push cannot deadlock with the clear. A push
-- holding one of them commits first; a partition a push is creating right
-- now is not seen and survives.
SELECT p.id FROM queen.partitions p
WHERE p.queue_id = @queue_id
  AND (sqlc.narg(partition_name)::text IS NULL OR p.name = sqlc.narg(partition_name)::text)
ORDER BY p.name COLLATE "C"
FOR UPDATE;

-- name: PartitionDeleteMany :one
-- Step four: deletes the locked partitions; messages, cursors, leases and
-- dead letters go with them by cascade. The messages are counted in the
-- same snapshot, before the cascade runs; no push can add one while the
-- partition rows are locked.
WITH gone AS (
    DELETE FROM queen.partitions WHERE id = ANY(@ids::uuid[]) RETURNING id
)
SELECT (SELECT count(*) FROM gone)::bigint AS partitions_deleted,
       (SELECT count(*) FROM queen.messages m WHERE m.partition_id = ANY(@ids::uuid[]))::bigint AS messages_deleted;

-- name: PartitionGetByQueueAndName :one
SELECT p.*, (p.last_message_at IS NOT NULL AND p.last_message_at > now() - make_interval(secs => @window_seconds::integer))::boolean AS window_active
FROM queen.partitions p WHERE p.queue_id = @queue_id AND p.name = @name;

-- name: PartitionListPopCandidates :many
-- Partitions of a queue that hold messages past the group's cursor, are not
-- leased by the group and are out of their window buffer, oldest newest
-- message first. The walk starts at the group's watermark (see
-- consumer_watermarks) on the (queue_id, last_message_at) index and stops at
-- max_candidates, so consumed partitions below the watermark are never read.
-- The broker's own start hint (hint_from, computed by its scan at hint_at,
-- handlers/broker/watermark.go) raises the start unless a reset came after
-- it. Each row also carries the oldest partition still pending from that
-- start (leased ones included) and the clock, for the next hint, and the
-- partition's last seq as this scan saw it (an autoAck pop passes over a
-- partition whose cursor it knows to be there already, autoack_race.go), and
-- the group's cursor there (-1 without a cursor row), so that the broker can
-- keep for its next pops the partitions with more than a batch to give
-- (handlers/broker/recent_scan.go).
-- The queue, the group, the window and the LIMIT are read through one-row
-- subqueries so that the custom plans cost what the generic plan costs and
-- PostgreSQL keeps the generic one after five calls (see
-- PartitionConsumerClaimAndRead).
WITH s AS (
    SELECT COALESCE(
        (SELECT CASE WHEN sqlc.narg(hint_at)::timestamptz > w.reset_at
                     THEN GREATEST(w.scan_from, sqlc.narg(hint_from)::timestamptz)
                     ELSE w.scan_from END
           FROM queen.consumer_watermarks w
          WHERE w.queue_id = @queue_id AND w.consumer_group = @consumer_group),
        '-infinity'::timestamptz) AS scan_from
),
o AS (
    SELECT p.last_message_at
    FROM queen.partitions p
    LEFT JOIN queen.partition_consumers pc
           ON pc.partition_id = p.id AND pc.consumer_group = (SELECT @consumer_group::text)
    WHERE p.queue_id = (SELECT @queue_id::uuid)
      AND p.last_message_at >= (SELECT s.scan_from FROM s)
      AND p.last_seq > COALESCE(pc.last_seq, 0)
    ORDER BY p.last_message_at
    LIMIT 1
)
SELECT p.id, p.name, (SELECT o.last_message_at FROM o)::timestamptz AS oldest_pending,
       now()::timestamptz AS scanned_at, p.last_seq, COALESCE(pc.last_seq, -1)::bigint AS cursor_seq
FROM queen.partitions p
LEFT JOIN queen.partition_consumers pc
       ON pc.partition_id = p.id AND pc.consumer_group = (SELECT @consumer_group::text)
WHERE p.queue_id = (SELECT @queue_id::uuid)
  AND p.last_message_at >= (SELECT s.scan_from FROM s)
  AND p.last_message_at <= (SELECT CASE WHEN @window_seconds::integer = 0 THEN 'infinity'::timestamptz
                                        ELSE now() - make_interval(secs => @window_seconds::integer) END)
  AND p.last_seq > COALESCE(pc.last_seq, 0)
  AND (pc.lease_expires_at IS NULL OR pc.lease_expires_at <= now())
ORDER BY p.last_message_at
LIMIT (SELECT @max_candidates::integer);

-- name: PartitionPollReady :many
-- The shared re-poll of parked long-polls (handlers/broker/repoll.go): of the
-- keys given, one per (tenant, queue or namespace/task, partition, consumer
-- group) with pops parked, those where a pop could claim something now. It
-- sees what no wake-up announces: a lease that expired, a delayed message
-- that came due, a window buffer that closed, and what a broker without a
-- notifier link committed. Read-only, one statement
-- for many keys. A queue key uses the (tenant_id, name) index, a partition
-- key the (queue_id, name) one, the others walk the queue from the group's
-- watermark like PartitionListPopCandidates; each ready partition costs one
-- probe for its first message past the cursor (a delayed one must be due).
WITH k AS (
    SELECT unnest(@tenant_ids::uuid[]) AS tenant_id, unnest(@queue_names::text[]) AS queue_name,
           unnest(@namespaces::text[]) AS namespace, unnest(@tasks::text[]) AS task,
           unnest(@partition_names::text[]) AS partition_name, unnest(@consumer_groups::text[]) AS consumer_group
),
kq AS (
    SELECT k.*, q.id AS queue_id, q.window_buffer, q.delayed_processing
    FROM k JOIN queen.queues q ON q.tenant_id = k.tenant_id AND q.name = k.queue_name
    WHERE k.queue_name <> ''
    UNION ALL
    SELECT k.*, q.id, q.window_buffer, q.delayed_processing
    FROM k JOIN queen.queues q ON q.tenant_id = k.tenant_id
    WHERE k.queue_name = ''
      AND (k.namespace = '' OR q.namespace = k.namespace)
      AND (k.task = '' OR q.task = k.task)
),
kp AS (
    SELECT kq.tenant_id, kq.queue_name, kq.namespace, kq.task, kq.partition_name, kq.consumer_group,
           kq.window_buffer, kq.delayed_processing, p.id AS partition_id, p.last_seq, p.last_message_at
    FROM kq JOIN queen.partitions p ON p.queue_id = kq.queue_id AND p.name = kq.partition_name
    WHERE kq.partition_name <> ''
    UNION ALL
    SELECT kq.tenant_id, kq.queue_name, kq.namespace, kq.task, kq.partition_name, kq.consumer_group,
           kq.window_buffer, kq.delayed_processing, p.id, p.last_seq, p.last_message_at
    FROM kq JOIN queen.partitions p ON p.queue_id = kq.queue_id
    WHERE kq.partition_name = ''
      AND p.last_message_at >= COALESCE(
            (SELECT w.scan_from FROM queen.consumer_watermarks w
              WHERE w.queue_id = kq.queue_id AND w.consumer_group = kq.consumer_group), '-infinity')
)
SELECT DISTINCT kp.tenant_id::uuid AS tenant_id, kp.queue_name::text AS queue_name,
       kp.namespace::text AS namespace, kp.task::text AS task,
       kp.partition_name::text AS partition_name, kp.consumer_group::text AS consumer_group
FROM kp
LEFT JOIN queen.partition_consumers pc
       ON pc.partition_id = kp.partition_id AND pc.consumer_group = kp.consumer_group
CROSS JOIN LATERAL (
    SELECT m.created_at FROM queen.messages m
    WHERE m.partition_id = kp.partition_id AND m.seq > COALESCE(pc.last_seq, 0)
    ORDER BY m.seq
    LIMIT 1
) f
WHERE kp.last_seq > COALESCE(pc.last_seq, 0)
  AND (pc.lease_expires_at IS NULL OR pc.lease_expires_at <= now())
  AND (kp.window_buffer = 0 OR kp.last_message_at <= now() - make_interval(secs => kp.window_buffer))
  AND (kp.delayed_processing = 0 OR f.created_at <= now() - make_interval(secs => kp.delayed_processing));

-- name: PartitionOldestPending :one
-- After a scan: the newest-message time of the oldest partition still
-- holding anything for the group (leased or in its window buffer included),
-- NULL when none, and the database clock. It starts where
-- PartitionListPopCandidates does (the watermark, or the broker's hint).
SELECT now()::timestamptz AS scanned_at,
       (SELECT p.last_message_at
          FROM queen.partitions p
          LEFT JOIN queen.partition_consumers pc
                 ON pc.partition_id = p.id AND pc.consumer_group = @consumer_group
         WHERE p.queue_id = @queue_id
           AND p.last_message_at >= COALESCE(
                 (SELECT CASE WHEN sqlc.narg(hint_at)::timestamptz > w.reset_at
                              THEN GREATEST(w.scan_from, sqlc.narg(hint_from)::timestamptz)
                              ELSE w.scan_from END
                    FROM queen.consumer_watermarks w
                   WHERE w.queue_id = @queue_id AND w.consumer_group = @consumer_group), '-infinity')
           AND p.last_seq > COALESCE(pc.last_seq, 0)
         ORDER BY p.last_message_at
         LIMIT 1)::timestamptz AS oldest_pending;

-- name: PartitionStatsList :many
-- Live counts of the given partitions, measured against the queue-mode
-- cursor. total is what the partition stores: last_seq - vacant_seqs, kept
-- exact by the deleters (migration 0008). pending is what is stored past
-- the cursor (in-flight ones included): with no cursor (or one at 0) all of
-- total; with the cursor at or above vacant_top (migration 0021: no number
-- above it is vacant) last_seq - cursor, the first of them number cursor +
-- 1; below it, as before 0021, the sequence span from the first stored
-- message past the cursor to the newest stored one, at most total (exact
-- unless a number inside that span holds no message). Only that last case
-- costs two probes of the messages; the oldest pending message's time costs
-- one where it is not the partition's creation (migration 0021 says why
-- that is the first message's time). leased is the un-acked part of a live
-- queue-mode lease; observed_at is the database clock that ages are
-- measured with.
SELECT p.id, p.name, p.queue_id, p.created_at, p.last_message_at,
       q.name AS queue_name, q.namespace, q.task,
       GREATEST(p.last_seq - p.vacant_seqs, 0)::bigint AS total,
       (CASE WHEN p.last_seq <= COALESCE(qm.last_seq, 0) THEN 0
             WHEN COALESCE(qm.last_seq, 0) = 0 THEN p.last_seq - p.vacant_seqs
             WHEN qm.last_seq >= p.vacant_top THEN p.last_seq - qm.last_seq
             WHEN f.seq IS NULL THEN 0
             ELSE LEAST(f.newest - f.seq + 1, p.last_seq - p.vacant_seqs) END)::bigint AS pending,
       (CASE WHEN qm.lease_expires_at > now() THEN GREATEST(qm.batch_size - qm.acked_count, 0) ELSE 0 END)::bigint AS leased,
       (SELECT count(*) FROM queen.dead_letter_queue d WHERE d.partition_id = p.id)::bigint AS dead_letter,
       (CASE WHEN p.last_seq <= COALESCE(qm.last_seq, 0) THEN NULL
             WHEN COALESCE(qm.last_seq, 0) = 0 AND p.vacant_top = 0 THEN p.created_at
             WHEN qm.last_seq >= p.vacant_top THEN
                 (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = p.id AND m.seq = qm.last_seq + 1)
             ELSE f.created_at END)::timestamptz AS oldest_pending_at,
       now()::timestamptz AS observed_at
FROM queen.partitions p
JOIN queen.queues q ON q.id = p.queue_id
LEFT JOIN queen.partition_consumers qm ON qm.partition_id = p.id AND qm.consumer_group = '__QUEUE_MODE__'
LEFT JOIN LATERAL (
    SELECT m.seq, m.created_at,
           (SELECT n.seq FROM queen.messages n WHERE n.partition_id = p.id ORDER BY n.seq DESC LIMIT 1) AS newest
    FROM queen.messages m
    WHERE p.last_seq > COALESCE(qm.last_seq, 0)
      AND (COALESCE(qm.last_seq, 0) < p.vacant_top)
      AND m.partition_id = p.id AND m.seq > COALESCE(qm.last_seq, 0)
    ORDER BY m.seq LIMIT 1
) f ON true
WHERE p.id = ANY(@ids::uuid[])
ORDER BY q.name, p.name;

-- name: PartitionCountsByQueue :many
-- Live counts per queue, summed over its partitions as PartitionStatsList
-- counts them; stored_in is how many partitions store something, pushed
-- the sum of last_seq (what the queue ever took);
-- processing is the un-acked part of live queue-mode leases, per partition
-- at most its pending. NULL queue_ids reads every queue; queues without
-- partitions are left out. The dead letters are counted apart
-- (PartitionDeadLetterCounts): joining them here would hash every partition
-- once more.
--
-- Two parts, so that the pass over every partition is a plain aggregate
-- (docs/benchmarks.md, "Round 4: the dashboard's first computation": a
-- join and a pending expression per partition cost it two thirds more):
-- parts sums the partitions as if the queue-mode group had no cursor on
-- any (each pends what it stores: total), and cur walks the queue-mode
-- cursors alone, adding for each the difference between its partition's
-- real pending and what it stores, and its lease. Only a cursor below its
-- partition's vacant_top (migration 0021) costs a probe of the messages.
WITH parts AS (
    SELECT p.queue_id, count(*) AS partitions,
           sum(GREATEST(p.last_seq - p.vacant_seqs, 0)) AS total,
           count(*) FILTER (WHERE p.last_seq > p.vacant_seqs) AS stored_in,
           sum(p.last_seq) AS pushed
    FROM queen.partitions p
    WHERE sqlc.narg(queue_ids)::uuid[] IS NULL OR p.queue_id = ANY(sqlc.narg(queue_ids)::uuid[])
    GROUP BY p.queue_id
), cur AS (
    SELECT t.queue_id, sum(t.pending - t.uncursored) AS pending, sum(LEAST(t.leased, t.pending)) AS processing
    FROM (
        SELECT p.queue_id,
               GREATEST(p.last_seq - p.vacant_seqs, 0) AS uncursored,
               CASE WHEN qm.lease_id IS NOT NULL AND qm.lease_expires_at > now()
                    THEN GREATEST(qm.batch_size - qm.acked_count, 0) ELSE 0 END AS leased,
               CASE WHEN p.last_seq <= qm.last_seq THEN 0
                    WHEN qm.last_seq = 0 THEN p.last_seq - p.vacant_seqs
                    WHEN qm.last_seq >= p.vacant_top THEN p.last_seq - qm.last_seq
                    ELSE COALESCE((
                        SELECT LEAST((SELECT n.seq FROM queen.messages n WHERE n.partition_id = p.id
                                       ORDER BY n.seq DESC LIMIT 1) - m.seq + 1, p.last_seq - p.vacant_seqs)
                        FROM queen.messages m
                        WHERE m.partition_id = p.id AND m.seq > qm.last_seq
                        ORDER BY m.seq LIMIT 1), 0) END AS pending
        FROM queen.partition_consumers qm
        JOIN queen.partitions p ON p.id = qm.partition_id
        WHERE qm.consumer_group = '__QUEUE_MODE__'
          AND (sqlc.narg(queue_ids)::uuid[] IS NULL OR p.queue_id = ANY(sqlc.narg(queue_ids)::uuid[]))
        OFFSET 0 -- evaluates pending once per cursor, not once per use above
    ) t
    GROUP BY t.queue_id
)
SELECT a.queue_id, a.partitions::bigint AS partitions, a.total::bigint AS total,
       a.stored_in::bigint AS stored_in, a.pushed::bigint AS pushed,
       (a.total + COALESCE(c.pending, 0))::bigint AS pending,
       COALESCE(c.processing, 0)::bigint AS processing
FROM parts a
LEFT JOIN cur c ON c.queue_id = a.queue_id;

-- name: PartitionDeadLetterCounts :many
-- Dead letters per queue (NULL queue_ids: every queue): one probe of the
-- partitions per dead letter, no pass over the partitions.
SELECT p.queue_id, count(*)::bigint AS dead_letter
FROM queen.dead_letter_queue d
JOIN queen.partitions p ON p.id = d.partition_id
WHERE sqlc.narg(queue_ids)::uuid[] IS NULL OR p.queue_id = ANY(sqlc.narg(queue_ids)::uuid[])
GROUP BY p.queue_id;

-- name: PartitionListPage :many
-- One page of a tenant's partition ids, by queue then partition name (one
-- queue's: PartitionIDsByQueue).
SELECT p.id FROM queen.partitions p
JOIN queen.queues q ON q.id = p.queue_id
WHERE q.tenant_id = @tenant_id
ORDER BY q.name, p.name
LIMIT @row_limit OFFSET @row_offset;

-- name: PartitionCountFiltered :one
-- A NULL tenant counts in every tenant (the cell-wide stats refresh).
SELECT count(*) FROM queen.partitions p
JOIN queen.queues q ON q.id = p.queue_id
WHERE (sqlc.narg(tenant_id)::uuid IS NULL OR q.tenant_id = sqlc.narg(tenant_id)::uuid)
  AND (@queue_name::text = '' OR q.name = @queue_name::text);

-- name: PartitionMessageBounds :many
-- When the oldest and the newest stored message of each partition was stored.
SELECT p.id,
       (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = p.id ORDER BY m.seq LIMIT 1)::timestamptz AS oldest_at,
       (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = p.id ORDER BY m.seq DESC LIMIT 1)::timestamptz AS newest_at
FROM queen.partitions p
WHERE p.id = ANY(@ids::uuid[]);

-- name: PartitionIDsByQueue :many
-- One page of a queue's partition ids, by name (the queue detail route):
-- a range of the (queue_id, name) index.
SELECT p.id FROM queen.partitions p
WHERE p.queue_id = @queue_id
ORDER BY p.name
LIMIT @row_limit OFFSET @row_offset;

-- name: PartitionCreatedSeries :many
-- Partitions created per bucket of bucket_seconds (aligned on the epoch) and
-- queue, oldest first. An empty queue name matches every queue. The
-- partitions are grouped by bucket and queue id as they are read (date_bin
-- is timestamp arithmetic; the epoch's numeric arithmetic cost a backlog's
-- 100,000 partitions four times as much) and named after.
SELECT c.bucket_start::timestamptz AS bucket_start, q.name AS queue_name, sum(c.created)::bigint AS created
FROM (
    SELECT date_bin(make_interval(secs => @bucket_seconds::integer), p.created_at, TIMESTAMPTZ '1970-01-01 00:00:00+00') AS bucket_start,
           p.queue_id, count(*) AS created
    FROM queen.partitions p
    WHERE p.created_at >= @from_time AND p.created_at <= @to_time
    GROUP BY 1, 2
) c
JOIN queen.queues q ON q.id = c.queue_id
WHERE @queue_name::text = '' OR q.name = @queue_name::text
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: PartitionDeleteEmptyBefore :execrows
-- Deletes up to batch_size partitions that store no message (last_seq =
-- vacant_seqs, migration 0008) and received none since `before`, with their
-- cursors. Rows are locked in the order pushes lock them, and a partition a
-- push holds right now is skipped: that push is about to store a message.
-- A later push to the same name creates the partition again, numbering from
-- 1, and its groups start there like on any new partition.
DELETE FROM queen.partitions p
WHERE p.id IN (
    SELECT c.id FROM queen.partitions c
    WHERE c.last_seq = c.vacant_seqs
      AND COALESCE(c.last_message_at, c.created_at) < @before::timestamptz
    ORDER BY c.queue_id, c.name COLLATE "C"
    LIMIT @batch_size
    FOR UPDATE SKIP LOCKED
);
