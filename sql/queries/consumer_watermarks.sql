-- name: ConsumerWatermarkAdvance :exec
-- Moves a group's watermark up. It never moves down here, moves only in
-- steps of 5 s or more (so empty long-poll re-polls rarely write), and is
-- ignored when a reset happened after the scan that computed it.
INSERT INTO queen.consumer_watermarks AS w (queue_id, consumer_group, scan_from)
VALUES (@queue_id, @consumer_group, @scan_from)
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
