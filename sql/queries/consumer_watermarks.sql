-- name: ConsumerWatermarkAdvance :exec
-- Moves a group's watermark up. It never moves down here, moves only in
-- steps of 5 s or more (so empty long-poll re-polls rarely write), and is
-- ignored when a reset happened after the scan that computed it.
--
-- An advance this statement's snapshot already sees refused is skipped
-- before the upsert, which would lock the row even when its WHERE refuses
-- (a transaction id, a WAL flush at commit): every consumer of a group that
-- keeps up finds its scans empty and advances, and they queued behind one
-- another's commit on this one row (docs/benchmarks.md, fan-out). The
-- upsert's WHERE still decides on the latest row; a stale look can only
-- skip an advance, which leaves the watermark lower, never wrong.
WITH v AS (
    SELECT @queue_id::uuid AS queue_id, @consumer_group::text AS consumer_group,
           @scan_from::timestamptz AS scan_from, @scanned_at::timestamptz AS scanned_at
)
INSERT INTO queen.consumer_watermarks AS w (queue_id, consumer_group, scan_from)
SELECT v.queue_id, v.consumer_group, v.scan_from FROM v
WHERE NOT EXISTS (
    SELECT 1 FROM queen.consumer_watermarks x
    WHERE x.queue_id = v.queue_id AND x.consumer_group = v.consumer_group
      AND (x.scan_from >= v.scan_from - interval '5 seconds' OR x.reset_at >= v.scanned_at))
ON CONFLICT (queue_id, consumer_group) DO UPDATE
    SET scan_from = EXCLUDED.scan_from, updated_at = now()
    WHERE w.scan_from < EXCLUDED.scan_from - interval '5 seconds'
      AND w.reset_at < @scanned_at::timestamptz;

-- name: ConsumerWatermarkResetQueue :exec
-- Something may have made old partitions of the queue pending again for the
-- group (a seek, a deleted cursor): scan everything next time.
INSERT INTO queen.consumer_watermarks AS w (queue_id, consumer_group, scan_from, reset_at)
SELECT q.id, @consumer_group, '-infinity', clock_timestamp()
FROM queen.queues q WHERE q.tenant_id = @tenant_id AND q.name = @queue_name
ON CONFLICT (queue_id, consumer_group) DO UPDATE
    SET scan_from = '-infinity', reset_at = clock_timestamp(), updated_at = now();

-- name: ConsumerWatermarkResetGroup :exec
-- The same for every queue of a tenant the group has a watermark on.
UPDATE queen.consumer_watermarks
SET scan_from = '-infinity', reset_at = clock_timestamp(), updated_at = now()
WHERE consumer_group = @consumer_group
  AND queue_id IN (SELECT q.id FROM queen.queues q WHERE q.tenant_id = @tenant_id);

-- name: ConsumerWatermarkResetByQueue :exec
-- The same for every group of a queue, after a clear (see ClearQueue).
UPDATE queen.consumer_watermarks
SET scan_from = '-infinity', reset_at = clock_timestamp(), updated_at = now()
WHERE queue_id = @queue_id;

-- name: ConsumerWatermarkPushFloor :one
-- The oldest time a push still to commit can stamp (handlers/broker,
-- push_floor.go): the start of the oldest transaction open in this
-- database, or the statement's start when none is older. A push stamps
-- last_message_at with its transaction's start (the SQL API with its commit
-- time, later still), and a transaction stays in pg_stat_activity until
-- after its commit is visible, so a scan that takes its snapshot after this
-- read sees every push with a stamp below the floor. floor is NULL when the
-- broker's role cannot see some session of this database (another role,
-- without pg_read_all_stats) or a prepared transaction waits: their starts
-- are unknown.
SELECT statement_timestamp()::timestamptz AS read_at,
       (CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a
                           WHERE a.datname = current_database() AND a.backend_type IS NULL)
              OR EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_xacts x
                          WHERE x.database = current_database())
             THEN NULL
             ELSE LEAST(statement_timestamp(),
                        (SELECT min(a.xact_start) FROM pg_catalog.pg_stat_activity a
                          WHERE a.datname = current_database() AND a.backend_type = 'client backend'))
        END)::timestamptz AS floor;
