-- Live message counts without reading every partition's messages
-- (docs/observability.md, "Scale: 100,000 partitions").

-- vacant_seqs: how many sequence numbers up to last_seq hold no message.
-- Numbers go vacant when a message is deleted (retention, eviction, the
-- admin delete) and when a push reserved a number for an item that turned
-- out to be a duplicate. A partition therefore stores exactly
-- last_seq - vacant_seqs messages. Only those deleters and a push that met a
-- duplicate write it, each in the statement that makes the change: a plain
-- push, pop or ack never touches it.
ALTER TABLE queen.partitions ADD COLUMN vacant_seqs bigint NOT NULL DEFAULT 0;

-- Backfill from the stored messages. The ALTER above keeps pushes out until
-- commit; the lock keeps deletes out while counting.
LOCK TABLE queen.messages IN SHARE MODE;
UPDATE queen.partitions p SET vacant_seqs = v.vacant
FROM (SELECT p2.id, p2.last_seq - count(m.seq) AS vacant
      FROM queen.partitions p2
      LEFT JOIN queen.messages m ON m.partition_id = p2.id
      GROUP BY p2.id) v
WHERE v.id = p.id AND v.vacant <> 0;

-- consumer_lag: consumer-group lag, for the consumer-group routes and the
-- overview (sql/queries/consumer_lag.sql). A group reads a queue when it
-- holds a cursor on one of its partitions or has a subscription for it.
-- Rows of two kinds:
--
--   partition_id NULL: one per (group, queue) the group reads: how many
--   partitions the queue has, on how many the group holds a cursor, and
--   whether it ever consumed there.
--
--   partition_id set: one per partition of such a queue where the group has
--   something past its cursor (last_seq above it), or holds no cursor, with
--   the lag there. A partition whose cursor is at its last_seq has no row of
--   its own: its lag is 0.
--
-- A partition the group has no cursor on yet counts from where the group
-- would start there: its subscription time (the partition's own
-- subscription before the queue's), else the beginning. offset_lag is the
-- sequence span from the first stored message past that point to the newest
-- stored one, at most what the partition stores; oldest_unconsumed_at is
-- that first message's time, NULL when there is none. Names, cursor times
-- and leases are left to the queries that need them.
--
-- Cost: one hash join of the cursors with their partitions, grouped per
-- (group, queue) as it goes and carrying along only the cursors that are
-- behind, then two index probes per such cursor. Partitions without a
-- cursor are looked for only in queues where the group holds fewer cursors
-- than there are partitions.
CREATE VIEW queen.consumer_lag AS
WITH cursor_reads AS MATERIALIZED (
    SELECT pc.consumer_group, p.queue_id, count(*) AS cursors,
           bool_or(pc.total_messages_consumed > 0) AS consumed,
           array_agg(p.id) FILTER (WHERE p.last_seq > pc.last_seq) AS behind,
           array_agg(pc.last_seq) FILTER (WHERE p.last_seq > pc.last_seq) AS behind_cursor,
           array_agg(p.last_seq - p.vacant_seqs) FILTER (WHERE p.last_seq > pc.last_seq) AS behind_stored
    FROM queen.partition_consumers pc
    JOIN queen.partitions p ON p.id = pc.partition_id
    GROUP BY pc.consumer_group, p.queue_id
), reads AS MATERIALIZED (
    SELECT r.consumer_group, r.queue_id, r.cursors, r.consumed, r.behind, r.behind_cursor, r.behind_stored,
           (SELECT count(*) FROM queen.partitions p WHERE p.queue_id = r.queue_id) AS partitions
    FROM (
        SELECT c.consumer_group, c.queue_id, c.cursors, c.consumed, c.behind, c.behind_cursor, c.behind_stored
        FROM cursor_reads c
        UNION ALL
        SELECT DISTINCT s.consumer_group, q.id, 0::bigint, false, NULL::uuid[], NULL::bigint[], NULL::bigint[]
        FROM queen.consumer_groups_metadata s
        JOIN queen.queues q ON q.name = s.queue_name
        WHERE NOT EXISTS (SELECT 1 FROM cursor_reads c WHERE c.consumer_group = s.consumer_group AND c.queue_id = q.id)
    ) r
), pairs AS (
    SELECT r.consumer_group, r.queue_id, b.partition_id, true AS has_cursor,
           r.behind_cursor[b.i] AS cursor_seq, r.behind_stored[b.i] AS stored, NULL::timestamptz AS start_after
    FROM reads r
    CROSS JOIN LATERAL unnest(r.behind) WITH ORDINALITY AS b(partition_id, i)
    UNION ALL
    SELECT r.consumer_group, r.queue_id, p.id, false, 0::bigint, p.last_seq - p.vacant_seqs,
           (SELECT s.subscription_timestamp FROM queen.consumer_groups_metadata s
             WHERE s.consumer_group = r.consumer_group AND s.queue_name = q.name
               AND s.partition_name IN (p.name, '')
             ORDER BY s.partition_name DESC
             LIMIT 1)
    FROM reads r
    JOIN queen.queues q ON q.id = r.queue_id
    JOIN queen.partitions p ON p.queue_id = r.queue_id
    WHERE r.cursors < r.partitions
      AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers x
                      WHERE x.partition_id = p.id AND x.consumer_group = r.consumer_group)
)
SELECT r.consumer_group, r.queue_id, q.name AS queue_name, NULL::uuid AS partition_id,
       r.partitions, r.cursors, r.consumed, false AS has_cursor,
       0::bigint AS offset_lag, NULL::timestamptz AS oldest_unconsumed_at
FROM reads r
JOIN queen.queues q ON q.id = r.queue_id
UNION ALL
SELECT pr.consumer_group, pr.queue_id, q.name, pr.partition_id,
       0::bigint, 0::bigint, false, pr.has_cursor,
       (CASE WHEN f.seq IS NULL THEN 0 ELSE LEAST(f.newest - f.seq + 1, pr.stored) END)::bigint,
       f.created_at
FROM pairs pr
JOIN queen.queues q ON q.id = pr.queue_id
LEFT JOIN LATERAL (
    SELECT m.seq, m.created_at,
           (SELECT n.seq FROM queen.messages n WHERE n.partition_id = pr.partition_id
             ORDER BY n.seq DESC LIMIT 1) AS newest
    FROM queen.messages m
    WHERE m.partition_id = pr.partition_id AND m.seq > pr.cursor_seq
      AND (pr.start_after IS NULL OR m.created_at > pr.start_after)
    ORDER BY m.seq
    LIMIT 1
) f ON true;
