-- name: ConsumerLagList :many
-- One group's partitions that have a row in queen.consumer_lag (migrations
-- 0008 and 0010: something past the cursor, or no cursor), in a tenant's
-- queues, by queue then partition. Every query here reads one tenant.
-- Here and below, observed_at is the database clock that time lags are
-- measured with.
SELECT x.queue_name, x.partition_id, x.partition_name::text AS partition_name,
       x.has_cursor, x.offset_lag, x.oldest_unconsumed_at, now()::timestamptz AS observed_at
FROM (
    SELECT l.queue_name, l.partition_id::uuid AS partition_id, l.has_cursor, l.offset_lag, l.oldest_unconsumed_at,
           (SELECT p.name FROM queen.partitions p WHERE p.id = l.partition_id) AS partition_name
    FROM queen.consumer_lag l
    WHERE l.tenant_id = @tenant_id AND l.consumer_group = @consumer_group AND l.partition_id IS NOT NULL
) x
ORDER BY x.queue_name, x.partition_name;

-- name: ConsumerLagByQueue :many
-- Per (group, queue), by group then queue: partitions with a cursor,
-- partitions with something unconsumed, the summed offset lag, the oldest
-- unconsumed message, whether the group ever consumed there, and the
-- group's subscription to the queue (the queue-wide one, else the first
-- partition's by name; empty mode when none).
SELECT g.consumer_group, g.queue_name, g.members, g.partitions_with_lag, g.total_lag,
       g.oldest_unconsumed_at, g.consumed,
       COALESCE(s.subscription_mode, '')::text AS subscription_mode,
       s.subscription_timestamp, s.created_at AS subscription_created_at,
       now()::timestamptz AS observed_at
FROM (
    SELECT l.consumer_group, l.queue_name,
           sum(l.cursors)::bigint AS members,
           count(l.oldest_unconsumed_at)::bigint AS partitions_with_lag,
           sum(l.offset_lag)::bigint AS total_lag,
           min(l.oldest_unconsumed_at)::timestamptz AS oldest_unconsumed_at,
           bool_or(l.consumed)::boolean AS consumed
    FROM queen.consumer_lag l
    WHERE l.tenant_id = @tenant_id
    GROUP BY l.consumer_group, l.queue_name
) g
LEFT JOIN LATERAL (
    SELECT m.subscription_mode, m.subscription_timestamp, m.created_at
    FROM queen.consumer_groups_metadata m
    WHERE m.tenant_id = @tenant_id AND m.consumer_group = g.consumer_group AND m.queue_name = g.queue_name
    ORDER BY m.partition_name <> '', m.partition_name
    LIMIT 1
) s ON true
ORDER BY g.consumer_group, g.queue_name;

-- name: ConsumerLagOlderThan :many
-- The (group, partition) pairs whose oldest unconsumed message is more than
-- min_lag_seconds whole seconds old, oldest first. Names and cursor times
-- are looked up per row returned (subqueries, not joins, so the planner
-- does not hash every partition and cursor for them).
SELECT x.consumer_group, x.queue_name, x.partition_id, x.partition_name::text AS partition_name,
       x.last_consumed_at, x.offset_lag, x.oldest_unconsumed_at, now()::timestamptz AS observed_at
FROM (
    SELECT l.consumer_group, l.queue_name, l.partition_id::uuid AS partition_id, l.offset_lag, l.oldest_unconsumed_at,
           (SELECT p.name FROM queen.partitions p WHERE p.id = l.partition_id) AS partition_name,
           (SELECT c.last_consumed_at FROM queen.partition_consumers c
             WHERE c.partition_id = l.partition_id AND c.consumer_group = l.consumer_group)::timestamptz AS last_consumed_at
    FROM queen.consumer_lag l
    WHERE l.tenant_id = @tenant_id AND l.oldest_unconsumed_at < now()
      AND floor(extract(epoch FROM now() - l.oldest_unconsumed_at)) > @min_lag_seconds::bigint
) x
ORDER BY x.oldest_unconsumed_at, x.consumer_group, x.queue_name, x.partition_name;

-- name: ConsumerLagRows :many
-- Every row, for the overview: a summary row (summary true, partition_id
-- the zero UUID) stands for the partitions of its queue, the others for one
-- partition each with its lag.
SELECT l.consumer_group, l.queue_id, (l.partition_id IS NULL)::boolean AS summary,
       COALESCE(l.partition_id, '00000000-0000-0000-0000-000000000000'::uuid)::uuid AS partition_id,
       l.partitions, l.offset_lag, l.oldest_unconsumed_at,
       now()::timestamptz AS observed_at
FROM queen.consumer_lag l
WHERE l.tenant_id = @tenant_id;
