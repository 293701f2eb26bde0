-- The consumer groups that read each queue, for the lag queries that work
-- per (group, queue) rather than per (group, partition): a group reads a
-- queue when it holds a cursor on one of its partitions or has subscribed
-- to it (consumer_groups_metadata). has_start: the group subscribed from a
-- point in time, so the partitions it has no cursor on cannot be counted
-- by sequence arithmetic (migration 0021) and are probed one by one.
-- ConsumerLagOlderThan and ConsumerLagHistogram read it for one tenant;
-- the tenant filter goes through to the queues join.
CREATE VIEW queen.queue_readers AS
SELECT r.consumer_group, r.queue_id, q.name AS queue_name, q.tenant_id,
       EXISTS (SELECT 1 FROM queen.consumer_groups_metadata s
                WHERE s.tenant_id = q.tenant_id AND s.consumer_group = r.consumer_group
                  AND s.queue_name = q.name AND s.subscription_timestamp IS NOT NULL) AS has_start
FROM (
    SELECT pc.consumer_group, p.queue_id
    FROM queen.partition_consumers pc
    JOIN queen.partitions p ON p.id = pc.partition_id
    UNION
    SELECT s.consumer_group, q.id
    FROM queen.consumer_groups_metadata s
    JOIN queen.queues q ON q.tenant_id = s.tenant_id AND q.name = s.queue_name
) r
JOIN queen.queues q ON q.id = r.queue_id;
