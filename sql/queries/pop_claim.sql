-- name: PartitionConsumerClaimNextAndRead :many
-- A queue-mode wildcard pop in one round trip: PartitionListPopCandidates,
-- then PartitionConsumerClaimAndRead of the first candidate, in one
-- statement. The candidates are those the scan would list (the walk from the
-- watermark or the broker's hint, max_candidates of them); they are tried in
-- a random order, so that concurrent consumers spread over the partitions,
-- with the claim's try-lock on (partition, group), and the first one locked is
-- claimed (a new cursor row starts at the beginning of the partition: queue
-- mode has no subscription) and its next batch read. The shuffled order is
-- materialized before the try-locks run over it (a plain subquery let the
-- planner run the lock below the sort, on every candidate), and the LIMIT
-- stops at the first lock taken, so no other candidate is locked.
--
-- Every row carries the number of candidates, the oldest partition still
-- pending from the scan's start and the clock (for the broker's next hint,
-- handlers/broker/watermark.go). claimed is false when nothing was
-- claimed: no candidate (candidates 0), every candidate locked by another
-- claim, or the one locked was leased by a claim that committed after this
-- statement's snapshot (the upsert's WHERE decides on the latest row). A
-- claim that found nothing deliverable gives one row with seq 0, as
-- PartitionConsumerClaimAndRead does. vacant_seqs: as there (read once, not
-- per row: a subquery naming claim's column would run per message).
WITH s AS (
    SELECT COALESCE(
        (SELECT CASE WHEN sqlc.narg(hint_at)::timestamptz > w.reset_at
                     THEN GREATEST(w.scan_from, sqlc.narg(hint_from)::timestamptz)
                     ELSE w.scan_from END
           FROM queen.consumer_watermarks w
          WHERE w.queue_id = @queue_id AND w.consumer_group = @consumer_group),
        '-infinity'::timestamptz) AS scan_from
),
o AS (
    SELECT p.last_message_at
    FROM queen.partitions p
    LEFT JOIN queen.partition_consumers pc
           ON pc.partition_id = p.id AND pc.consumer_group = @consumer_group
    WHERE p.queue_id = @queue_id
      AND p.last_message_at >= (SELECT s.scan_from FROM s)
      AND p.last_seq > COALESCE(pc.last_seq, 0)
    ORDER BY p.last_message_at
    LIMIT 1
),
cand AS MATERIALIZED (
    SELECT p.id, p.name
    FROM queen.partitions p
    LEFT JOIN queen.partition_consumers pc
           ON pc.partition_id = p.id AND pc.consumer_group = @consumer_group
    WHERE p.queue_id = @queue_id
      AND p.last_message_at >= (SELECT s.scan_from FROM s)
      AND (@window_seconds::integer = 0 OR p.last_message_at <= now() - make_interval(secs => @window_seconds::integer))
      AND p.last_seq > COALESCE(pc.last_seq, 0)
      AND (pc.lease_expires_at IS NULL OR pc.lease_expires_at <= now())
    ORDER BY p.last_message_at
    LIMIT @max_candidates
),
shuffled AS MATERIALIZED (
    SELECT cand.id, cand.name FROM cand ORDER BY random()
),
pick AS MATERIALIZED (
    SELECT r.id, r.name
    FROM shuffled r
    WHERE pg_try_advisory_xact_lock(hashtextextended(format('%s/%s', r.id, @consumer_group::text), 12648430))
    LIMIT 1
),
claim AS (
    INSERT INTO queen.partition_consumers AS pc (
        partition_id, consumer_group, last_seq, lease_id, lease_acquired_at, lease_expires_at,
        batch_size, acked_count)
    SELECT pick.id, @consumer_group, 0,
        @lease_id, now(), now() + make_interval(secs => @lease_seconds::integer),
        @batch_size, 0
    FROM pick
    ON CONFLICT (partition_id, consumer_group) DO UPDATE SET
        lease_id = EXCLUDED.lease_id,
        lease_acquired_at = EXCLUDED.lease_acquired_at,
        lease_expires_at = EXCLUDED.lease_expires_at,
        batch_size = EXCLUDED.batch_size,
        acked_count = 0
    WHERE pc.lease_expires_at IS NULL OR pc.lease_expires_at <= now()
    RETURNING pc.partition_id, pc.last_seq, pc.batch_retry_count
),
vacant AS (
    SELECT v.vacant_seqs FROM queen.partitions v WHERE v.id = (SELECT claim.partition_id FROM claim)
)
SELECT (SELECT count(*) FROM cand)::integer AS candidates,
       (SELECT o.last_message_at FROM o)::timestamptz AS oldest_pending,
       now()::timestamptz AS scanned_at,
       (claim.partition_id IS NOT NULL)::boolean AS claimed,
       COALESCE(claim.partition_id, '00000000-0000-0000-0000-000000000000'::uuid)::uuid AS partition_id,
       COALESCE((SELECT pick.name FROM pick), '')::text AS partition_name,
       COALESCE(claim.batch_retry_count, 0)::integer AS batch_retry_count,
       COALESCE(m.seq, 0)::bigint AS seq,
       COALESCE(m.id, '00000000-0000-0000-0000-000000000000'::uuid)::uuid AS id,
       COALESCE(m.transaction_id, '')::text AS transaction_id,
       m.trace_id,
       COALESCE(m.payload, 'null'::jsonb)::jsonb AS payload,
       COALESCE(m.is_encrypted, false)::boolean AS is_encrypted,
       m.producer_sub,
       COALESCE(m.created_at, now())::timestamptz AS created_at,
       COALESCE((SELECT vacant.vacant_seqs FROM vacant), 0)::bigint AS vacant_seqs
FROM (SELECT 1) one
LEFT JOIN claim ON true
LEFT JOIN LATERAL (
    SELECT s.id, s.seq, s.transaction_id, s.trace_id, s.payload, s.is_encrypted, s.producer_sub, s.created_at
    FROM queen.messages s
    WHERE s.partition_id = claim.partition_id
      AND s.seq > claim.last_seq
      AND (@delay_seconds::integer = 0 OR s.created_at <= now() - make_interval(secs => @delay_seconds::integer))
    ORDER BY s.seq
    LIMIT @batch_size
) m ON true
ORDER BY m.seq;
