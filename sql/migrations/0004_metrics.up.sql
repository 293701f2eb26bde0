-- What the dashboard's time series, the analytics routes and the Prometheus
-- cluster block read. Every broker keeps its data-plane counters in memory
-- and its metrics collector writes them here once a minute (and on demand,
-- see POST /api/v1/stats/refresh). A broker writes only its own rows, keyed
-- by (hostname, port, pid), so brokers never contend; counter columns are
-- added to on conflict and gauge columns replaced, so a repeated flush of the
-- same minute is harmless. Rows exist only for minutes and queues that saw
-- activity: idle queues and partitions cost nothing.

-- Per broker and minute: data-plane counters and sampled gauges.
CREATE TABLE queen.worker_metrics (
    bucket                timestamptz NOT NULL,
    hostname              text NOT NULL,
    port                  integer NOT NULL,
    pid                   integer NOT NULL,
    worker_id             integer NOT NULL DEFAULT 0,
    push_request_count    bigint NOT NULL DEFAULT 0,
    push_message_count    bigint NOT NULL DEFAULT 0,
    pop_request_count     bigint NOT NULL DEFAULT 0,
    pop_message_count     bigint NOT NULL DEFAULT 0,
    pop_empty_count       bigint NOT NULL DEFAULT 0,
    ack_request_count     bigint NOT NULL DEFAULT 0,
    ack_message_count     bigint NOT NULL DEFAULT 0,
    ack_success_count     bigint NOT NULL DEFAULT 0,
    ack_failed_count      bigint NOT NULL DEFAULT 0,
    transaction_count     bigint NOT NULL DEFAULT 0,
    dlq_count             bigint NOT NULL DEFAULT 0,
    db_error_count        bigint NOT NULL DEFAULT 0,
    lag_count             bigint NOT NULL DEFAULT 0,
    lag_sum_ms            bigint NOT NULL DEFAULT 0,
    max_lag_ms            bigint NOT NULL DEFAULT 0,
    -- gauges, averaged over the samples of the minute
    sample_count          integer NOT NULL DEFAULT 0,
    avg_event_loop_lag_ms double precision NOT NULL DEFAULT 0,
    max_event_loop_lag_ms double precision NOT NULL DEFAULT 0,
    avg_free_slots        double precision NOT NULL DEFAULT 0,
    min_free_slots        double precision NOT NULL DEFAULT 0,
    db_connections        double precision NOT NULL DEFAULT 0,
    avg_job_queue_size    double precision NOT NULL DEFAULT 0,
    max_job_queue_size    double precision NOT NULL DEFAULT 0,
    backoff_size          double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, hostname, port, pid, worker_id)
);

-- Per queue, broker and minute. Cluster-wide per-queue numbers are sums over
-- brokers; parked_count is the minute's average of parked long-polls.
CREATE TABLE queen.queue_lag_metrics (
    bucket             timestamptz NOT NULL,
    queue_name         text NOT NULL,
    hostname           text NOT NULL,
    port               integer NOT NULL,
    pid                integer NOT NULL,
    push_request_count bigint NOT NULL DEFAULT 0,
    push_message_count bigint NOT NULL DEFAULT 0,
    pop_request_count  bigint NOT NULL DEFAULT 0,
    pop_count          bigint NOT NULL DEFAULT 0,
    pop_empty_count    bigint NOT NULL DEFAULT 0,
    ack_request_count  bigint NOT NULL DEFAULT 0,
    ack_message_count  bigint NOT NULL DEFAULT 0,
    ack_success_count  bigint NOT NULL DEFAULT 0,
    ack_failed_count   bigint NOT NULL DEFAULT 0,
    dlq_count          bigint NOT NULL DEFAULT 0,
    transaction_count  bigint NOT NULL DEFAULT 0,
    lag_count          bigint NOT NULL DEFAULT 0,
    lag_sum_ms         bigint NOT NULL DEFAULT 0,
    max_lag_ms         bigint NOT NULL DEFAULT 0,
    parked_count       double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, queue_name, hostname, port, pid)
);
CREATE INDEX queue_lag_metrics_queue_bucket_idx ON queen.queue_lag_metrics (queue_name, bucket);

-- Per broker and minute: process gauges as the dashboard's System view reads
-- them, each leaf {avg, min, max, last}.
CREATE TABLE queen.system_metrics (
    bucket       timestamptz NOT NULL,
    hostname     text NOT NULL,
    port         integer NOT NULL,
    pid          integer NOT NULL,
    worker_id    integer NOT NULL DEFAULT 0,
    sample_count integer NOT NULL,
    metrics      jsonb NOT NULL,
    PRIMARY KEY (bucket, hostname, port, pid, worker_id)
);

-- Lifetime cluster totals: one row, added to by every flush.
CREATE TABLE queen.worker_metrics_summary (
    id              integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    push_requests   bigint NOT NULL DEFAULT 0,
    pop_requests    bigint NOT NULL DEFAULT 0,
    ack_requests    bigint NOT NULL DEFAULT 0,
    transactions    bigint NOT NULL DEFAULT 0,
    push_messages   bigint NOT NULL DEFAULT 0,
    pop_messages    bigint NOT NULL DEFAULT 0,
    ack_messages    bigint NOT NULL DEFAULT 0,
    ack_success     bigint NOT NULL DEFAULT 0,
    ack_failed      bigint NOT NULL DEFAULT 0,
    db_errors       bigint NOT NULL DEFAULT 0,
    dlq_count       bigint NOT NULL DEFAULT 0,
    last_updated_at timestamptz
);
INSERT INTO queen.worker_metrics_summary (id) VALUES (1);

-- One row per queue and kind for every retention or eviction run that
-- deleted something.
CREATE TABLE queen.retention_history (
    id             bigserial PRIMARY KEY,
    queue_name     text NOT NULL,
    retention_type text NOT NULL CHECK (retention_type IN ('retention', 'completed_retention', 'max_wait_time_eviction')),
    deleted_count  bigint NOT NULL,
    executed_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX retention_history_executed_at_idx ON queen.retention_history (executed_at);

-- Partitions created per minute (queue-ops) are counted from here.
CREATE INDEX partitions_created_at_idx ON queen.partitions (created_at);
