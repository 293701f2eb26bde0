-- The pop's two statements, planned once per session instead of at every
-- call (docs/benchmarks.md, "Round 5: pop and ack").
--
-- A prepared statement is planned with its arguments for its first five
-- executions; then PostgreSQL makes a generic plan and keeps it only if it
-- costs less on paper than the average of those custom plans. For the
-- claim-and-read and the scan for pop candidates it never does: a LIMIT of
-- a parameter is costed as a tenth of the rows the planner expects (a
-- custom plan sees 100), and the optional filters that a known argument
-- folds away (no delay, no window, no subscription start) stay in the
-- generic plan. So the larger the table, the more the generic plan costs on
-- paper, and the statement was planned again at every call: 0.3-0.5 ms a
-- plan, about 4 µs per consumed message, a quarter of PostgreSQL's CPU in
-- the consume bench. Whether it did depended on the statistics at the
-- moment a session made its generic plan, hence runs of one build that
-- differed by that much.
--
-- Each statement lives here in a PL/pgSQL function whose own setting forces
-- the generic plan: PL/pgSQL prepares it once per session and keeps the plan
-- until an ANALYZE or a schema change invalidates it. The generic plans are
-- the ones the data plane's tests hold to reading about a batch of index
-- entries, also after the statistics caught the tables empty (migration
-- 0023 and handlers/broker/reads_plan_test.go). The broker's statement that
-- calls the function costs the same planned with or without its arguments,
-- so its own plan is generic after five calls.
--
-- Both are the statements the broker sent before, unchanged; the comments
-- of their callers in sql/queries say what they do.

CREATE FUNCTION queen.partition_claim_and_read(
    p_partition_id uuid, p_consumer_group text, p_start_after_time timestamptz, p_lease_id text,
    p_lease_seconds integer, p_batch_size integer, p_delay_seconds integer)
RETURNS TABLE (
    cursor_seq bigint, batch_retry_count integer, lease_expires_at timestamptz, seq bigint, id uuid,
    transaction_id text, trace_id uuid, payload jsonb, is_encrypted boolean, producer_sub text,
    created_at timestamptz, vacant_seqs bigint)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH gate AS (
        SELECT pg_try_advisory_xact_lock(
            hashtextextended(format('%s/%s', p_partition_id, p_consumer_group), 12648430)) AS open
        WHERE NOT EXISTS (
            SELECT 1 FROM queen.partition_consumers l
            WHERE l.partition_id = p_partition_id AND l.consumer_group = p_consumer_group
              AND l.lease_expires_at > now())
    ),
    claim AS (
        INSERT INTO queen.partition_consumers AS pc (
            partition_id, consumer_group, last_seq, lease_id, lease_acquired_at, lease_expires_at,
            batch_size, acked_count)
        SELECT
            p_partition_id, p_consumer_group,
            CASE WHEN p_start_after_time IS NULL THEN 0
                 ELSE (SELECT COALESCE(max(s.seq), 0) FROM queen.messages s
                       WHERE s.partition_id = p_partition_id AND s.created_at <= p_start_after_time)
            END,
            p_lease_id, now(), now() + make_interval(secs => p_lease_seconds),
            p_batch_size, 0
        FROM gate WHERE gate.open
        ON CONFLICT (partition_id, consumer_group) DO UPDATE SET
            lease_id = EXCLUDED.lease_id,
            lease_acquired_at = EXCLUDED.lease_acquired_at,
            lease_expires_at = EXCLUDED.lease_expires_at,
            batch_size = EXCLUDED.batch_size,
            acked_count = 0
        WHERE pc.lease_expires_at IS NULL OR pc.lease_expires_at <= now()
        RETURNING pc.last_seq, pc.batch_retry_count, pc.lease_expires_at
    )
    SELECT claim.last_seq, claim.batch_retry_count, claim.lease_expires_at,
           COALESCE(m.seq, 0)::bigint,
           COALESCE(m.id, '00000000-0000-0000-0000-000000000000'::uuid),
           COALESCE(m.transaction_id, ''),
           m.trace_id,
           COALESCE(m.payload, 'null'::jsonb),
           COALESCE(m.is_encrypted, false),
           m.producer_sub,
           COALESCE(m.created_at, now()),
           (SELECT v.vacant_seqs FROM queen.partitions v WHERE v.id = p_partition_id)
    FROM claim
    LEFT JOIN LATERAL (
        SELECT s.id, s.seq, s.transaction_id, s.trace_id, s.payload, s.is_encrypted, s.producer_sub, s.created_at
        FROM queen.messages s
        WHERE s.partition_id = p_partition_id
          AND s.seq > claim.last_seq
          AND (p_delay_seconds = 0 OR s.created_at <= now() - make_interval(secs => p_delay_seconds))
        ORDER BY s.seq
        LIMIT p_batch_size
    ) m ON true
    ORDER BY m.seq;
END
$$;

CREATE FUNCTION queen.partition_pop_candidates(
    p_queue_id uuid, p_consumer_group text, p_window_seconds integer, p_max_candidates integer,
    p_hint_from timestamptz, p_hint_at timestamptz)
RETURNS TABLE (
    id uuid, name text, oldest_pending timestamptz, scanned_at timestamptz, last_seq bigint,
    cursor_seq bigint)
LANGUAGE plpgsql
STABLE
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH s AS (
        SELECT COALESCE(
            (SELECT CASE WHEN p_hint_at > w.reset_at
                         THEN GREATEST(w.scan_from, p_hint_from)
                         ELSE w.scan_from END
               FROM queen.consumer_watermarks w
              WHERE w.queue_id = p_queue_id AND w.consumer_group = p_consumer_group),
            '-infinity'::timestamptz) AS scan_from
    ),
    o AS (
        SELECT p.last_message_at
        FROM queen.partitions p
        LEFT JOIN queen.partition_consumers pc
               ON pc.partition_id = p.id AND pc.consumer_group = p_consumer_group
        WHERE p.queue_id = p_queue_id
          AND p.last_message_at >= (SELECT s.scan_from FROM s)
          AND p.last_seq > COALESCE(pc.last_seq, 0)
        ORDER BY p.last_message_at
        LIMIT 1
    )
    SELECT p.id, p.name, (SELECT o.last_message_at FROM o), now(), p.last_seq,
           COALESCE(pc.last_seq, -1)::bigint
    FROM queen.partitions p
    LEFT JOIN queen.partition_consumers pc
           ON pc.partition_id = p.id AND pc.consumer_group = p_consumer_group
    WHERE p.queue_id = p_queue_id
      AND p.last_message_at >= (SELECT s.scan_from FROM s)
      AND (p_window_seconds = 0 OR p.last_message_at <= now() - make_interval(secs => p_window_seconds))
      AND p.last_seq > COALESCE(pc.last_seq, 0)
      AND (pc.lease_expires_at IS NULL OR pc.lease_expires_at <= now())
    ORDER BY p.last_message_at
    LIMIT p_max_candidates;
END
$$;
