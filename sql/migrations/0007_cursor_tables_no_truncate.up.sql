-- Vacuum's end-of-table truncation takes an exclusive lock; on the cursor
-- and partition rows every pop, ack and push needs, it stalled pops for
-- seconds under the benchmark. These tables are small: keep their space.
ALTER TABLE queen.partitions SET (vacuum_truncate = off);
ALTER TABLE queen.partition_consumers SET (vacuum_truncate = off);
