-- Storage settings for the hot tables.
--
-- partitions and partition_consumers are small and updated constantly (a
-- push bumps its partition's sequence, every pop and ack rewrites a cursor
-- row): leave room on each page for the new row versions and vacuum them
-- often, without cost throttling, so dead rows do not pile up.
ALTER TABLE queen.partitions SET (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE queen.partition_consumers SET (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE queen.consumer_watermarks SET (fillfactor = 50);

-- messages and dead_letter_queue grow by inserts and shrink by retention.
-- Truncating the empty tail after a vacuum takes an exclusive lock that the
-- reference broker saw stall pushes and pops: keep the space instead.
-- Analyze often, so plans follow the table as it grows from empty (stale
-- statistics once made each ack scan the whole table).
ALTER TABLE queen.messages SET (
    vacuum_truncate = off,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02
);
ALTER TABLE queen.dead_letter_queue SET (vacuum_truncate = off);
