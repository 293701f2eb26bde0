-- name: SubscriptionGet :one
-- The stored start point of a group on a partition: a partition-specific row
-- wins over the queue-wide row (partition_name ''). Queue names are a
-- tenant's (migration 0010).
SELECT subscription_mode, subscription_timestamp FROM queen.consumer_groups_metadata
WHERE tenant_id = @tenant_id AND consumer_group = @consumer_group AND queue_name = @queue_name
  AND partition_name IN (@partition_name::text, '')
ORDER BY partition_name DESC
LIMIT 1;

-- name: SubscriptionInsert :exec
-- The first decision sticks, as in the reference broker.
INSERT INTO queen.consumer_groups_metadata (tenant_id, consumer_group, queue_name, partition_name, subscription_mode, subscription_timestamp)
VALUES (@tenant_id, @consumer_group, @queue_name, @partition_name, @subscription_mode, @subscription_timestamp)
ON CONFLICT DO NOTHING;

-- name: SubscriptionUpdateTimestamp :execrows
UPDATE queen.consumer_groups_metadata SET subscription_timestamp = @subscription_timestamp
WHERE tenant_id = @tenant_id AND consumer_group = @consumer_group;

-- name: SubscriptionDeleteByGroup :execrows
DELETE FROM queen.consumer_groups_metadata WHERE tenant_id = @tenant_id AND consumer_group = @consumer_group;

-- name: SubscriptionDeleteByGroupAndQueue :execrows
DELETE FROM queen.consumer_groups_metadata
WHERE tenant_id = @tenant_id AND consumer_group = @consumer_group AND queue_name = @queue_name;

-- name: SubscriptionDeleteByQueue :execrows
DELETE FROM queen.consumer_groups_metadata WHERE tenant_id = @tenant_id AND queue_name = @queue_name;
