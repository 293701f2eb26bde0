-- UsageBatchApply adds one batch of per-minute counters, once per batch id;
-- false when the batch was applied before.
-- name: UsageBatchApply :one
SELECT queen_proxy.apply_usage_batch(@batch_id, @keep_days::integer, @cluster_ids::uuid[], @minutes::timestamptz[],
    @op_classes::text[], @msgs::bigint[], @reqs::bigint[], @bytes_in::bigint[], @bytes_out::bigint[]) AS applied;

-- UsageSeries sums a cluster's usage since a time in buckets of
-- bucket_seconds, per class of operation, for the console's chart.
-- name: UsageSeries :many
SELECT date_bin(make_interval(secs => @bucket_seconds::integer), minute, TIMESTAMPTZ '2000-01-01 00:00:00+00')::timestamptz AS at,
       op_class, sum(msgs)::bigint AS msgs, sum(reqs)::bigint AS reqs,
       sum(bytes_in)::bigint AS bytes_in, sum(bytes_out)::bigint AS bytes_out
FROM queen_proxy.usage_minutes
WHERE cluster_id = @cluster_id AND minute >= @since
GROUP BY 1, 2
ORDER BY 1, 2;

-- UsageRollup recomputes the closed UTC days from usage_minutes.
-- name: UsageRollup :one
SELECT queen_proxy.rollup_usage_days((now() AT TIME ZONE 'UTC')::date) AS days;

-- UsagePrune removes whole days of minutes older than keep_days, rolled up
-- first.
-- name: UsagePrune :one
SELECT queen_proxy.prune_usage_minutes(@keep_days::integer) AS pruned;

-- UsageQuotasCheck applies the monthly quotas of the clusters just metered
-- (and lifts the blocks of a month that ended).
-- name: UsageQuotasCheck :one
SELECT queen_proxy.check_monthly_quotas(@cluster_ids::uuid[], @warn_percent::integer) AS changed;
