-- A pop's claim of one partition in one round trip and one transaction.
--
-- Before, a claim was one statement that took the group's lease and read the
-- next batch, then, in a second transaction, one that finished it: released
-- the lease when nothing was deliverable, moved the cursor over the batch and
-- ended the lease for autoAck, or recorded the batch size when fewer messages
-- than asked came back. A fan-out consumer with autoAck therefore paid two
-- commits (two WAL flushes) per pop. The finish updates the cursor row the
-- claim just wrote, which one SQL statement cannot do twice, so it is a
-- function of two statements.
--
-- queen.claim_messages takes the group's lease on the partition and returns
-- the next batch, as PartitionConsumerClaimAndRead did:
--
--   * a try-lock on (partition, group), held until commit, first: a consumer
--     that finds another one claiming the same partition right now gets no
--     row at once instead of queueing on the row lock;
--   * the cursor row is created (starting at start_after, a subscription
--     point, when given, else at the beginning of the partition) or, when its
--     lease is free or expired, leased to lease_id for lease_seconds with
--     batch_size; a live lease of another consumer gives no row;
--   * then up to batch_size messages after the cursor, oldest first, only
--     those older than delay_seconds when it is > 0, each returned with the
--     cursor's position and retry count as claimed.
--
-- In the same statement as that read it finishes the claim: nothing to
-- deliver releases the lease; auto_ack moves the cursor over what was read
-- (never backwards) and ends the lease; fewer messages than batch_size
-- records how many, so the lease ends when that many are acked. A full batch
-- without auto_ack changes nothing more. No row back means nothing was
-- delivered (lease held by another consumer, or nothing deliverable).
--
-- A deleted partition fails the insert with a foreign key violation, as the
-- statement did before; the caller treats it as nothing to claim.
CREATE FUNCTION queen.claim_messages(
    p_partition_id uuid, p_group text, p_start_after timestamptz, p_lease_id text,
    p_lease_seconds integer, p_batch integer, p_delay_seconds integer, p_auto_ack boolean)
RETURNS TABLE (
    cursor_seq bigint, batch_retry_count integer, seq bigint, id uuid, transaction_id text,
    trace_id uuid, payload jsonb, is_encrypted boolean, producer_sub text, created_at timestamptz)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    v_cursor bigint;
    v_retry  integer;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended(format('%s/%s', p_partition_id, p_group), 12648430)) THEN
        RETURN;
    END IF;

    INSERT INTO queen.partition_consumers AS pc (
        partition_id, consumer_group, last_seq, lease_id, lease_acquired_at, lease_expires_at,
        batch_size, acked_count)
    VALUES (
        p_partition_id, p_group,
        CASE WHEN p_start_after IS NULL THEN 0
             ELSE (SELECT COALESCE(max(s.seq), 0) FROM queen.messages s
                   WHERE s.partition_id = p_partition_id AND s.created_at <= p_start_after)
        END,
        p_lease_id, now(), now() + make_interval(secs => p_lease_seconds), p_batch, 0)
    ON CONFLICT (partition_id, consumer_group) DO UPDATE SET
        lease_id = EXCLUDED.lease_id,
        lease_acquired_at = EXCLUDED.lease_acquired_at,
        lease_expires_at = EXCLUDED.lease_expires_at,
        batch_size = EXCLUDED.batch_size,
        acked_count = 0
    WHERE pc.lease_expires_at IS NULL OR pc.lease_expires_at <= now()
    RETURNING pc.last_seq, pc.batch_retry_count INTO v_cursor, v_retry;
    IF NOT FOUND THEN
        RETURN;
    END IF;

    RETURN QUERY
    WITH m AS (
        SELECT s.seq, s.id, s.transaction_id, s.trace_id, s.payload, s.is_encrypted, s.producer_sub, s.created_at
        FROM queen.messages s
        WHERE s.partition_id = p_partition_id
          AND s.seq > v_cursor
          AND (p_delay_seconds = 0 OR s.created_at <= now() - make_interval(secs => p_delay_seconds))
        ORDER BY s.seq
        LIMIT p_batch
    ),
    got AS (
        SELECT count(*)::integer AS n, max(m.seq) AS last_seq,
               (array_agg(m.id ORDER BY m.seq DESC))[1] AS last_id
        FROM m
    ),
    fin AS (
        UPDATE queen.partition_consumers AS pc SET
            last_seq = CASE WHEN g.n > 0 AND p_auto_ack THEN GREATEST(pc.last_seq, g.last_seq) ELSE pc.last_seq END,
            last_consumed_id = CASE WHEN g.n > 0 AND p_auto_ack THEN g.last_id ELSE pc.last_consumed_id END,
            last_consumed_at = CASE WHEN g.n > 0 AND p_auto_ack THEN now() ELSE pc.last_consumed_at END,
            total_messages_consumed = pc.total_messages_consumed + CASE WHEN p_auto_ack THEN g.n ELSE 0 END,
            total_batches_consumed = pc.total_batches_consumed + CASE WHEN g.n > 0 AND p_auto_ack THEN 1 ELSE 0 END,
            batch_retry_count = CASE WHEN g.n > 0 AND p_auto_ack THEN 0 ELSE pc.batch_retry_count END,
            lease_id = CASE WHEN g.n = 0 OR p_auto_ack THEN NULL ELSE pc.lease_id END,
            lease_acquired_at = CASE WHEN g.n = 0 OR p_auto_ack THEN NULL ELSE pc.lease_acquired_at END,
            lease_expires_at = CASE WHEN g.n = 0 OR p_auto_ack THEN NULL ELSE pc.lease_expires_at END,
            batch_size = CASE WHEN g.n = 0 OR p_auto_ack THEN 0 ELSE g.n END,
            acked_count = CASE WHEN g.n = 0 OR p_auto_ack THEN 0 ELSE pc.acked_count END
        FROM got g
        WHERE pc.partition_id = p_partition_id AND pc.consumer_group = p_group AND pc.lease_id = p_lease_id
          AND (g.n = 0 OR p_auto_ack OR g.n < p_batch)
    )
    SELECT v_cursor, v_retry, m.seq, m.id, m.transaction_id, m.trace_id, m.payload, m.is_encrypted,
           m.producer_sub, m.created_at
    FROM m
    ORDER BY m.seq;
END
$fn$;
