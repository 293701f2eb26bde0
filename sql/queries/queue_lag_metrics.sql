-- name: QueueLagMetricsAddMany :exec
-- Adds one flush of a broker's per-queue counters to its rows of the minute;
-- parked_count (a gauge) is replaced.
INSERT INTO queen.queue_lag_metrics AS m (
    bucket, queue_name, hostname, port, pid,
    push_request_count, push_message_count, pop_request_count, pop_count, pop_empty_count,
    ack_request_count, ack_message_count, ack_success_count, ack_failed_count, dlq_count,
    transaction_count, lag_count, lag_sum_ms, max_lag_ms, parked_count)
SELECT @bucket::timestamptz, v.queue_name, @hostname::text, @port::integer, @pid::integer,
       v.push_request_count, v.push_message_count, v.pop_request_count, v.pop_count, v.pop_empty_count,
       v.ack_request_count, v.ack_message_count, v.ack_success_count, v.ack_failed_count, v.dlq_count,
       v.transaction_count, v.lag_count, v.lag_sum_ms, v.max_lag_ms, v.parked_count
FROM (SELECT unnest(@queue_names::text[]) AS queue_name,
             unnest(@push_request_counts::bigint[]) AS push_request_count,
             unnest(@push_message_counts::bigint[]) AS push_message_count,
             unnest(@pop_request_counts::bigint[]) AS pop_request_count,
             unnest(@pop_counts::bigint[]) AS pop_count,
             unnest(@pop_empty_counts::bigint[]) AS pop_empty_count,
             unnest(@ack_request_counts::bigint[]) AS ack_request_count,
             unnest(@ack_message_counts::bigint[]) AS ack_message_count,
             unnest(@ack_success_counts::bigint[]) AS ack_success_count,
             unnest(@ack_failed_counts::bigint[]) AS ack_failed_count,
             unnest(@dlq_counts::bigint[]) AS dlq_count,
             unnest(@transaction_counts::bigint[]) AS transaction_count,
             unnest(@lag_counts::bigint[]) AS lag_count,
             unnest(@lag_sums_ms::bigint[]) AS lag_sum_ms,
             unnest(@max_lags_ms::bigint[]) AS max_lag_ms,
             unnest(@parked_counts::float8[]) AS parked_count) AS v
ON CONFLICT (bucket, queue_name, hostname, port, pid) DO UPDATE SET
    push_request_count = m.push_request_count + EXCLUDED.push_request_count,
    push_message_count = m.push_message_count + EXCLUDED.push_message_count,
    pop_request_count = m.pop_request_count + EXCLUDED.pop_request_count,
    pop_count = m.pop_count + EXCLUDED.pop_count,
    pop_empty_count = m.pop_empty_count + EXCLUDED.pop_empty_count,
    ack_request_count = m.ack_request_count + EXCLUDED.ack_request_count,
    ack_message_count = m.ack_message_count + EXCLUDED.ack_message_count,
    ack_success_count = m.ack_success_count + EXCLUDED.ack_success_count,
    ack_failed_count = m.ack_failed_count + EXCLUDED.ack_failed_count,
    dlq_count = m.dlq_count + EXCLUDED.dlq_count,
    transaction_count = m.transaction_count + EXCLUDED.transaction_count,
    lag_count = m.lag_count + EXCLUDED.lag_count,
    lag_sum_ms = m.lag_sum_ms + EXCLUDED.lag_sum_ms,
    max_lag_ms = GREATEST(m.max_lag_ms, EXCLUDED.max_lag_ms),
    parked_count = EXCLUDED.parked_count;

-- name: QueueLagMetricsSeries :many
-- Per bucket of bucket_seconds (aligned on the epoch) and queue, summed over
-- brokers (and the database's partition-deletion rows), oldest first. parked_sum adds up the per-minute cluster averages;
-- divided by the bucket's minutes it is the bucket's average. An empty queue
-- name and a NULL list match every queue.
SELECT to_timestamp(floor(extract(epoch FROM bucket) / @bucket_seconds::integer) * @bucket_seconds::integer)::timestamptz AS bucket_start,
       queue_name,
       sum(push_request_count)::bigint AS push_requests,
       sum(push_message_count)::bigint AS push_messages,
       sum(pop_request_count)::bigint AS pop_requests,
       sum(pop_count)::bigint AS pop_messages,
       sum(pop_empty_count)::bigint AS pop_empty,
       sum(ack_request_count)::bigint AS ack_requests,
       sum(ack_message_count)::bigint AS ack_messages,
       sum(ack_success_count)::bigint AS ack_success,
       sum(ack_failed_count)::bigint AS ack_failed,
       sum(dlq_count)::bigint AS dlq,
       sum(transaction_count)::bigint AS transactions,
       sum(lag_count)::bigint AS lag_count,
       sum(lag_sum_ms)::bigint AS lag_sum_ms,
       max(max_lag_ms)::bigint AS max_lag_ms,
       sum(parked_count)::float8 AS parked_sum,
       sum(partitions_deleted)::bigint AS partitions_deleted
FROM queen.queue_lag_metrics
WHERE bucket >= @from_time AND bucket <= @to_time
  AND (@queue_name::text = '' OR queue_name = @queue_name::text)
  AND (sqlc.narg(queue_names)::text[] IS NULL OR queue_name = ANY(sqlc.narg(queue_names)::text[]))
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: QueueLagMetricsParkedSeries :many
-- Parked long-polls per bucket, queue and broker, oldest first.
SELECT to_timestamp(floor(extract(epoch FROM bucket) / @bucket_seconds::integer) * @bucket_seconds::integer)::timestamptz AS bucket_start,
       queue_name, hostname, port, pid,
       sum(parked_count)::float8 AS parked_sum
FROM queen.queue_lag_metrics
WHERE bucket >= @from_time AND bucket <= @to_time
  AND (@queue_name::text = '' OR queue_name = @queue_name::text)
  AND parked_count > 0
GROUP BY 1, 2, 3, 4, 5
ORDER BY 1, 2, 3, 4, 5;

-- name: QueueLagMetricsLatest :many
-- Each queue's newest minute since @since, summed over brokers, for the
-- Prometheus per-queue gauges. The database's own rows (hostname '': the
-- partition-deletion counts) are no broker's minute and are left out.
SELECT DISTINCT ON (queue_name) queue_name, bucket,
       push_requests, push_messages, pop_messages, pop_empty, ack_success, ack_failed,
       transactions, lag_count, lag_sum_ms, max_lag_ms, parked
FROM (
    SELECT queue_name, bucket,
           sum(push_request_count)::bigint AS push_requests,
           sum(push_message_count)::bigint AS push_messages,
           sum(pop_count)::bigint AS pop_messages,
           sum(pop_empty_count)::bigint AS pop_empty,
           sum(ack_success_count)::bigint AS ack_success,
           sum(ack_failed_count)::bigint AS ack_failed,
           sum(transaction_count)::bigint AS transactions,
           sum(lag_count)::bigint AS lag_count,
           sum(lag_sum_ms)::bigint AS lag_sum_ms,
           max(max_lag_ms)::bigint AS max_lag_ms,
           sum(parked_count)::float8 AS parked
    FROM queen.queue_lag_metrics
    WHERE bucket >= @since AND hostname <> ''
    GROUP BY queue_name, bucket
) AS per_minute
ORDER BY queue_name, bucket DESC;

-- name: QueueLagMetricsDeleteBefore :execrows
-- Deletes up to @batch_size rows older than @before.
DELETE FROM queen.queue_lag_metrics m
WHERE (m.bucket, m.queue_name, m.hostname, m.port, m.pid) IN (
    SELECT o.bucket, o.queue_name, o.hostname, o.port, o.pid FROM queen.queue_lag_metrics o
    WHERE o.bucket < @before LIMIT @batch_size);

-- name: QueueLagMetricsPushedSeries :many
-- Messages stored per date_trunc unit (minute, hour, day, week, month),
-- summed over brokers and the queues in @queue_names (NULL: every queue).
SELECT date_trunc(@unit::text, bucket)::timestamptz AS bucket_start,
       sum(push_message_count)::bigint AS messages
FROM queen.queue_lag_metrics
WHERE bucket >= @from_time AND bucket <= @to_time
  AND (sqlc.narg(queue_names)::text[] IS NULL OR queue_name = ANY(sqlc.narg(queue_names)::text[]))
GROUP BY 1
ORDER BY 1;
