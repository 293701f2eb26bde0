-- name: WorkerMetricsAdd :exec
-- Adds one flush of a broker's counters to its row of the minute and
-- replaces the gauges sampled so far in that minute.
INSERT INTO queen.worker_metrics AS w (
    bucket, hostname, port, pid,
    push_request_count, push_message_count, pop_request_count, pop_message_count, pop_empty_count,
    ack_request_count, ack_message_count, ack_success_count, ack_failed_count, transaction_count,
    dlq_count, db_error_count, lag_count, lag_sum_ms, max_lag_ms,
    sample_count, avg_event_loop_lag_ms, max_event_loop_lag_ms, avg_free_slots, min_free_slots,
    db_connections, avg_job_queue_size, max_job_queue_size, backoff_size)
VALUES (
    @bucket, @hostname, @port, @pid,
    @push_request_count, @push_message_count, @pop_request_count, @pop_message_count, @pop_empty_count,
    @ack_request_count, @ack_message_count, @ack_success_count, @ack_failed_count, @transaction_count,
    @dlq_count, @db_error_count, @lag_count, @lag_sum_ms, @max_lag_ms,
    @sample_count, @avg_event_loop_lag_ms, @max_event_loop_lag_ms, @avg_free_slots, @min_free_slots,
    @db_connections, @avg_job_queue_size, @max_job_queue_size, @backoff_size)
ON CONFLICT (bucket, hostname, port, pid, worker_id) DO UPDATE SET
    push_request_count = w.push_request_count + EXCLUDED.push_request_count,
    push_message_count = w.push_message_count + EXCLUDED.push_message_count,
    pop_request_count = w.pop_request_count + EXCLUDED.pop_request_count,
    pop_message_count = w.pop_message_count + EXCLUDED.pop_message_count,
    pop_empty_count = w.pop_empty_count + EXCLUDED.pop_empty_count,
    ack_request_count = w.ack_request_count + EXCLUDED.ack_request_count,
    ack_message_count = w.ack_message_count + EXCLUDED.ack_message_count,
    ack_success_count = w.ack_success_count + EXCLUDED.ack_success_count,
    ack_failed_count = w.ack_failed_count + EXCLUDED.ack_failed_count,
    transaction_count = w.transaction_count + EXCLUDED.transaction_count,
    dlq_count = w.dlq_count + EXCLUDED.dlq_count,
    db_error_count = w.db_error_count + EXCLUDED.db_error_count,
    lag_count = w.lag_count + EXCLUDED.lag_count,
    lag_sum_ms = w.lag_sum_ms + EXCLUDED.lag_sum_ms,
    max_lag_ms = GREATEST(w.max_lag_ms, EXCLUDED.max_lag_ms),
    sample_count = EXCLUDED.sample_count,
    avg_event_loop_lag_ms = EXCLUDED.avg_event_loop_lag_ms,
    max_event_loop_lag_ms = EXCLUDED.max_event_loop_lag_ms,
    avg_free_slots = EXCLUDED.avg_free_slots,
    min_free_slots = EXCLUDED.min_free_slots,
    db_connections = EXCLUDED.db_connections,
    avg_job_queue_size = EXCLUDED.avg_job_queue_size,
    max_job_queue_size = EXCLUDED.max_job_queue_size,
    backoff_size = EXCLUDED.backoff_size;

-- name: WorkerMetricsSeries :many
-- Sums over brokers per bucket of bucket_seconds (aligned on the epoch),
-- newest first. Gauges: averages of the brokers' minute averages, the
-- largest maximum, the smallest minimum. An empty hostname and a NULL
-- worker id match every broker.
SELECT to_timestamp(floor(extract(epoch FROM bucket) / @bucket_seconds::integer) * @bucket_seconds::integer)::timestamptz AS bucket_start,
       sum(push_request_count)::bigint AS push_requests,
       sum(push_message_count)::bigint AS push_messages,
       sum(pop_request_count)::bigint AS pop_requests,
       sum(pop_message_count)::bigint AS pop_messages,
       sum(pop_empty_count)::bigint AS pop_empty,
       sum(ack_request_count)::bigint AS ack_requests,
       sum(ack_message_count)::bigint AS ack_messages,
       sum(ack_success_count)::bigint AS ack_success,
       sum(ack_failed_count)::bigint AS ack_failed,
       sum(transaction_count)::bigint AS transactions,
       sum(dlq_count)::bigint AS dlq,
       sum(db_error_count)::bigint AS db_errors,
       sum(lag_count)::bigint AS lag_count,
       sum(lag_sum_ms)::bigint AS lag_sum_ms,
       max(max_lag_ms)::bigint AS max_lag_ms,
       avg(avg_event_loop_lag_ms)::float8 AS avg_event_loop_lag_ms,
       max(max_event_loop_lag_ms)::float8 AS max_event_loop_lag_ms,
       avg(avg_free_slots)::float8 AS avg_free_slots,
       min(min_free_slots)::float8 AS min_free_slots,
       avg(db_connections)::float8 AS db_connections,
       avg(avg_job_queue_size)::float8 AS avg_job_queue_size,
       max(max_job_queue_size)::float8 AS max_job_queue_size,
       avg(backoff_size)::float8 AS backoff_size
FROM queen.worker_metrics
WHERE bucket >= @from_time AND bucket <= @to_time
  AND (@hostname::text = '' OR hostname = @hostname::text)
  AND (sqlc.narg(worker_id)::integer IS NULL OR worker_id = sqlc.narg(worker_id)::integer)
GROUP BY 1
ORDER BY 1 DESC;

-- name: WorkerMetricsRecent :many
-- One row per broker that wrote since @since: its newest minute.
SELECT DISTINCT ON (hostname, port, pid, worker_id) *
FROM queen.worker_metrics
WHERE bucket >= @since
ORDER BY hostname, port, pid, worker_id, bucket DESC;

-- name: WorkerMetricsProcessedSince :many
-- Messages acknowledged per broker since @since, for the worker listings.
SELECT hostname, port, pid, worker_id, sum(ack_message_count)::bigint AS messages_processed
FROM queen.worker_metrics
WHERE bucket >= @since
GROUP BY hostname, port, pid, worker_id;

-- name: WorkerMetricsDeleteBefore :execrows
-- Deletes up to @batch_size rows older than @before.
DELETE FROM queen.worker_metrics w
WHERE (w.bucket, w.hostname, w.port, w.pid, w.worker_id) IN (
    SELECT o.bucket, o.hostname, o.port, o.pid, o.worker_id FROM queen.worker_metrics o
    WHERE o.bucket < @before LIMIT @batch_size);

-- name: WorkerMetricsSummaryAdd :exec
-- Adds one flush to the lifetime cluster totals.
UPDATE queen.worker_metrics_summary SET
    push_requests = push_requests + @push_requests,
    pop_requests = pop_requests + @pop_requests,
    ack_requests = ack_requests + @ack_requests,
    transactions = transactions + @transactions,
    push_messages = push_messages + @push_messages,
    pop_messages = pop_messages + @pop_messages,
    ack_messages = ack_messages + @ack_messages,
    ack_success = ack_success + @ack_success,
    ack_failed = ack_failed + @ack_failed,
    db_errors = db_errors + @db_errors,
    dlq_count = dlq_count + @dlq_count,
    last_updated_at = now()
WHERE id = 1;

-- name: WorkerMetricsSummaryGet :one
SELECT *, now()::timestamptz AS observed_at FROM queen.worker_metrics_summary WHERE id = 1;
