-- Native tenancy (docs/tenancy.md): a queue belongs to a tenant, and its name
-- is unique within the tenant only. Every row that exists now lands in the
-- default tenant (the column default), so switching QUEEN_TENANCY_HEADER on
-- hides nothing from clients that never send x-queen-tenant.
--
-- Partitions, messages, cursors, dead letters, traces and watermarks hang off
-- a queue id and need no tenant column: a tenant reaches them only through
-- its own queue rows (or, by partition id, through a join back to them).
-- Tables keyed by a queue *name* carry the tenant themselves:
-- consumer_groups_metadata here, queen_streams.queries since 0006. The
-- per-minute metrics rows (queue_lag_metrics, retention_history) stay keyed
-- by name: they are a cell-wide surface, like /metrics/prometheus.

ALTER TABLE queen.queues
    ADD COLUMN tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001';
ALTER TABLE queen.queues DROP CONSTRAINT queues_name_key;
CREATE UNIQUE INDEX queues_tenant_name_uk ON queen.queues (tenant_id, name);
-- Namespace and task pops look within one tenant.
DROP INDEX queen.queues_namespace_task_idx;
CREATE INDEX queues_tenant_namespace_task_idx ON queen.queues (tenant_id, namespace, task);

-- Subscription start points name their queue: the tenant is part of the key.
ALTER TABLE queen.consumer_groups_metadata
    ADD COLUMN tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001';
ALTER TABLE queen.consumer_groups_metadata DROP CONSTRAINT consumer_groups_metadata_pkey;
ALTER TABLE queen.consumer_groups_metadata
    ADD PRIMARY KEY (tenant_id, consumer_group, queue_name, partition_name);

-- consumer_lag (0008) joins subscriptions to queues by name: the join now
-- matches the tenant too, and the view carries the tenant (last column, so
-- CREATE OR REPLACE keeps the others) for the scoped consumer-group reads.
CREATE OR REPLACE VIEW queen.consumer_lag AS
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
        JOIN queen.queues q ON q.tenant_id = s.tenant_id AND q.name = s.queue_name
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
             WHERE s.tenant_id = q.tenant_id AND s.consumer_group = r.consumer_group AND s.queue_name = q.name
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
       0::bigint AS offset_lag, NULL::timestamptz AS oldest_unconsumed_at, q.tenant_id
FROM reads r
JOIN queen.queues q ON q.id = r.queue_id
UNION ALL
SELECT pr.consumer_group, pr.queue_id, q.name, pr.partition_id,
       0::bigint, 0::bigint, false, pr.has_cursor,
       (CASE WHEN f.seq IS NULL THEN 0 ELSE LEAST(f.newest - f.seq + 1, pr.stored) END)::bigint,
       f.created_at, q.tenant_id
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
