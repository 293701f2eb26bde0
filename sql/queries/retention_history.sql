-- name: RetentionHistoryInsert :exec
INSERT INTO queen.retention_history (queue_name, retention_type, deleted_count, executed_at)
VALUES (@queue_name, @retention_type, @deleted_count, @executed_at);

-- name: RetentionHistorySeries :many
-- Messages deleted per bucket of bucket_seconds (aligned on the epoch) and
-- kind, oldest first. An empty queue name matches every queue.
SELECT to_timestamp(floor(extract(epoch FROM executed_at) / @bucket_seconds::integer) * @bucket_seconds::integer)::timestamptz AS bucket_start,
       retention_type,
       sum(deleted_count)::bigint AS deleted,
       count(*)::bigint AS events
FROM queen.retention_history
WHERE executed_at >= @from_time AND executed_at <= @to_time
  AND (@queue_name::text = '' OR queue_name = @queue_name::text)
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: RetentionHistoryDeleteBefore :execrows
-- Deletes up to @batch_size rows older than @before.
DELETE FROM queen.retention_history
WHERE id IN (SELECT o.id FROM queen.retention_history o WHERE o.executed_at < @before LIMIT @batch_size);
