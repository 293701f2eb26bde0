-- name: SystemMetricsUpsert :exec
-- Writes a broker's gauges for the minute; a later flush of the same minute
-- (with more samples) replaces them.
INSERT INTO queen.system_metrics AS s (bucket, hostname, port, pid, sample_count, metrics)
VALUES (@bucket, @hostname, @port, @pid, @sample_count, @metrics)
ON CONFLICT (bucket, hostname, port, pid, worker_id) DO UPDATE SET
    sample_count = EXCLUDED.sample_count, metrics = EXCLUDED.metrics;

-- name: SystemMetricsList :many
-- Minute rows in a time range by broker, then time. An empty hostname and a
-- NULL worker id match every broker.
SELECT bucket, hostname, port, pid, worker_id, sample_count, metrics
FROM queen.system_metrics
WHERE bucket >= @from_time AND bucket <= @to_time
  AND (@hostname::text = '' OR hostname = @hostname::text)
  AND (sqlc.narg(worker_id)::integer IS NULL OR worker_id = sqlc.narg(worker_id)::integer)
ORDER BY hostname, port, pid, worker_id, bucket;

-- name: SystemMetricsDeleteBefore :execrows
-- Deletes up to @batch_size rows older than @before.
DELETE FROM queen.system_metrics s
WHERE (s.bucket, s.hostname, s.port, s.pid, s.worker_id) IN (
    SELECT o.bucket, o.hostname, o.port, o.pid, o.worker_id FROM queen.system_metrics o
    WHERE o.bucket < @before LIMIT @batch_size);
