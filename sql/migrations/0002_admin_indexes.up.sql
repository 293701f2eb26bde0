-- Indexes for the admin read routes (resources, messages, consumer groups,
-- traces). Counts are computed live from the tables, so every per-partition
-- count must be an index range scan.

-- Dead letters per partition: queue and partition counts.
CREATE INDEX dead_letter_queue_partition_idx ON queen.dead_letter_queue (partition_id);

-- The ON DELETE CASCADE from messages: deleting one message (the admin
-- message delete, retention) must not scan every trace.
CREATE INDEX message_traces_message_id_idx ON queen.message_traces (message_id);
