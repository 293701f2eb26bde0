-- Core data-plane schema. Table names follow the reference broker (operators'
-- SQL reads them); columns are ours. Ordering inside a partition is the
-- per-partition sequence number `seq`, allocated under the partition row lock
-- inside the inserting transaction, so commit order equals sequence order.
CREATE SCHEMA IF NOT EXISTS queen;

CREATE TABLE queen.queues (
    id                          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name                        text NOT NULL UNIQUE,
    namespace                   text NOT NULL DEFAULT '',
    task                        text NOT NULL DEFAULT '',
    priority                    integer NOT NULL DEFAULT 0,
    lease_time                  integer NOT NULL DEFAULT 300,
    retry_limit                 integer NOT NULL DEFAULT 3,
    retry_delay                 integer NOT NULL DEFAULT 1000,
    ttl                         integer NOT NULL DEFAULT 3600,
    max_queue_size              integer NOT NULL DEFAULT 0,
    dead_letter_queue           boolean NOT NULL DEFAULT false,
    dlq_after_max_retries       boolean NOT NULL DEFAULT false,
    delayed_processing          integer NOT NULL DEFAULT 0,
    window_buffer               integer NOT NULL DEFAULT 0,
    retention_seconds           integer NOT NULL DEFAULT 0,
    completed_retention_seconds integer NOT NULL DEFAULT 0,
    retention_enabled           boolean NOT NULL DEFAULT false,
    encryption_enabled          boolean NOT NULL DEFAULT false,
    max_wait_time_seconds       integer NOT NULL DEFAULT 0,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX queues_namespace_task_idx ON queen.queues (namespace, task);

-- last_seq is the partition's sequence high-water mark. A push locks this row
-- (UPDATE ... last_seq = last_seq + n) for the rest of its transaction; that
-- lock is what makes sequence order equal commit order.
CREATE TABLE queen.partitions (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    queue_id        uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    name            text NOT NULL,
    last_seq        bigint NOT NULL DEFAULT 0,
    last_message_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (queue_id, name)
);

CREATE TABLE queen.messages (
    id             uuid PRIMARY KEY,
    partition_id   uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    seq            bigint NOT NULL,
    transaction_id text NOT NULL,
    trace_id       uuid,
    payload        jsonb NOT NULL,
    is_encrypted   boolean NOT NULL DEFAULT false,
    producer_sub   text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (partition_id, seq),
    CONSTRAINT messages_partition_transaction_unique UNIQUE (partition_id, transaction_id)
);
CREATE INDEX messages_created_at_idx ON queen.messages (created_at);

-- One row per (partition, consumer group): the cursor and the lease.
-- last_seq is the sequence number of the last message the group is done with.
CREATE TABLE queen.partition_consumers (
    partition_id            uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group          text NOT NULL,
    last_seq                bigint NOT NULL DEFAULT 0,
    last_consumed_id        uuid,
    last_consumed_at        timestamptz,
    total_messages_consumed bigint NOT NULL DEFAULT 0,
    total_batches_consumed  bigint NOT NULL DEFAULT 0,
    lease_id                text,
    lease_acquired_at       timestamptz,
    lease_expires_at        timestamptz,
    batch_size              integer NOT NULL DEFAULT 0,
    acked_count             integer NOT NULL DEFAULT 0,
    batch_retry_count       integer NOT NULL DEFAULT 0,
    created_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, consumer_group)
);
CREATE INDEX partition_consumers_lease_idx ON queen.partition_consumers (lease_id) WHERE lease_id IS NOT NULL;
CREATE INDEX partition_consumers_group_idx ON queen.partition_consumers (consumer_group);

-- Where a named group starts on partitions it has no cursor for yet.
-- partition_name '' means every partition of the queue.
CREATE TABLE queen.consumer_groups_metadata (
    consumer_group         text NOT NULL,
    queue_name             text NOT NULL,
    partition_name         text NOT NULL DEFAULT '',
    subscription_mode      text NOT NULL,
    subscription_timestamp timestamptz NOT NULL,
    created_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, queue_name, partition_name)
);

CREATE TABLE queen.dead_letter_queue (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    message_id          uuid NOT NULL REFERENCES queen.messages (id) ON DELETE CASCADE,
    partition_id        uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group      text NOT NULL,
    error_message       text,
    retry_count         integer NOT NULL DEFAULT 0,
    original_created_at timestamptz NOT NULL,
    failed_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_letter_queue_failed_at_idx ON queen.dead_letter_queue (failed_at DESC);
CREATE INDEX dead_letter_queue_message_idx ON queen.dead_letter_queue (message_id);

CREATE TABLE queen.message_traces (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    message_id     uuid NOT NULL REFERENCES queen.messages (id) ON DELETE CASCADE,
    partition_id   uuid NOT NULL,
    transaction_id text NOT NULL,
    consumer_group text NOT NULL,
    event_type     text NOT NULL,
    data           jsonb NOT NULL,
    worker_id      text,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX message_traces_message_idx ON queen.message_traces (partition_id, transaction_id);

CREATE TABLE queen.message_trace_names (
    trace_id   uuid NOT NULL REFERENCES queen.message_traces (id) ON DELETE CASCADE,
    trace_name text NOT NULL,
    PRIMARY KEY (trace_id, trace_name)
);
CREATE INDEX message_trace_names_name_idx ON queen.message_trace_names (trace_name);

-- Broker-wide switches (maintenance modes), read at boot and reconciled.
CREATE TABLE queen.system_state (
    key        text PRIMARY KEY,
    value      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
