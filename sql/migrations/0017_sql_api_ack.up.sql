-- The SQL API's acknowledgement (docs/sql-api.md): queen.ack_messages_v2,
-- with the argument and result shapes of the reference broker's function of
-- that name, and the semantics of the broker's own batch ack
-- (handlers/broker ack.go and cursor.go): a program pops, does its work and
-- acknowledges in one transaction of its own, so a message is done if and
-- only if the work commits.
--
-- It moves the same rows the broker's ack moves, in the same order:
--
--   * the messages are found by (tenant, partition, transactionId); another
--     tenant's partition finds nothing ("Message not found");
--   * the cursor rows of the (partition, group) pairs found are locked in
--     (partition, group) order, the broker's order, so SQL and HTTP acks of
--     the same cursors cannot deadlock; the lease is judged on the row as
--     locked, before anything of the call is applied;
--   * the acks of one cursor apply oldest message first; a failed ack with
--     retries left releases the lease and holds back the later messages of
--     its cursor in the call; past the retry limit, and for dlq, the message
--     is dead-lettered and passed; a completed batch releases the lease;
--   * one NOTIFY queen_events "ready" per tenant for the queues where a
--     lease was released (delivered at commit, dropped on rollback).

-- The guard of migration 0011 covers the new entry point too: the API fails
-- closed when any of its entry points is executable by PUBLIC.
CREATE OR REPLACE FUNCTION queen.sql_api_guard() RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'queen'::regnamespace
          AND p.proname IN ('push_messages_v2', 'push_messages_v3', 'pop_specific_batch', 'ack_messages_v2')
          AND (p.proacl IS NULL
               OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE'))) THEN
        RAISE EXCEPTION 'queen: the SQL API is executable by PUBLIC; it refuses to run until EXECUTE is revoked from PUBLIC (docs/sql-api.md, Privileges)'
            USING ERRCODE = '42501';
    END IF;
END
$$;

-- p_acknowledgments is a JSON array of
--   {"transactionId", "partitionId", "status"?, "consumerGroup"?,
--    "leaseId"?, "error"?, "index"?, "tenant"?}
-- and the answer one
--   {"index", "transactionId", "success", "error", "queueName",
--    "partitionName", "leaseReleased", "dlq"}
-- per acknowledgement, in the order given (index is the item's own, else
-- its position). A malformed item raises 22023 before anything is applied.
CREATE OR REPLACE FUNCTION queen.ack_messages_v2(p_acknowledgments jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n int;
    i int;
    it jsonb;
    what text;
    s text;
    v_index jsonb[] := '{}';
    v_tenant uuid[] := '{}';
    v_pid uuid[] := '{}';
    v_tx text[] := '{}';
    v_status text[] := '{}';
    v_group text[] := '{}';
    v_lease text[] := '{}';
    v_reason text[] := '{}';
    -- What was found and what happened, by position (1-based).
    f_mid uuid[];
    f_seq bigint[];
    f_created timestamptz[];
    r_success boolean[];
    r_error text[];
    r_queue text[];
    r_part text[];
    r_released boolean[];
    r_dlq boolean[];
    -- The cursor rows as locked.
    l_pid uuid[] := '{}';
    l_group text[] := '{}';
    l_last_seq bigint[] := '{}';
    l_lease text[] := '{}';
    l_expires timestamptz[] := '{}';
    l_batch_size int[] := '{}';
    l_acked int[] := '{}';
    l_retries int[] := '{}';
    l_retry_limit int[] := '{}';
    a record;
    v_now timestamptz;
    -- The cursor being moved (cursor.go's cursor): its key, the row as
    -- locked, and its moving state.
    c_pid uuid;
    c_group text;
    c_exists boolean;
    c_row_lease text;
    c_row_active boolean;
    c_batch_size int;
    c_retry_limit int;
    c_last_seq bigint;
    c_last_id uuid;
    c_consumed bigint;
    c_batches bigint;
    c_acked int;
    c_retries int;
    c_lease_held boolean;
    c_release boolean;
    c_blocked bigint;
    c_touched boolean := false;
    v_ready jsonb;
BEGIN
    PERFORM queen.sql_api_guard();
    IF p_acknowledgments IS NULL OR jsonb_typeof(p_acknowledgments) <> 'array' THEN
        RAISE EXCEPTION 'queen: the acknowledgments must be a JSON array' USING ERRCODE = '22023';
    END IF;
    n := jsonb_array_length(p_acknowledgments);
    IF n = 0 THEN
        RETURN '[]'::jsonb;
    END IF;

    -- Every item is checked before anything is applied: the rules of
    -- AckRequest in openapi.yaml.
    FOR i IN 0 .. n - 1 LOOP
        it := p_acknowledgments -> i;
        what := 'acknowledgments[' || i || ']';
        IF jsonb_typeof(it) <> 'object' THEN
            RAISE EXCEPTION 'queen: % must be an object', what USING ERRCODE = '22023';
        END IF;
        v_index := array_append(v_index, CASE WHEN jsonb_typeof(it -> 'index') = 'number' THEN it -> 'index' ELSE to_jsonb(i) END);
        v_tenant := array_append(v_tenant, queen.sql_api_tenant(it -> 'tenant', what));
        s := queen.sql_api_text(it -> 'transactionId', what || '.transactionId');
        IF s IS NULL OR length(s) > 255 THEN
            RAISE EXCEPTION 'queen: %.transactionId must be 1-255 characters', what USING ERRCODE = '22023';
        END IF;
        v_tx := array_append(v_tx, s);
        s := queen.sql_api_text(it -> 'partitionId', what || '.partitionId');
        IF s IS NULL OR s !~ '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$' THEN
            RAISE EXCEPTION 'queen: %.partitionId must be a UUID', what USING ERRCODE = '22023';
        END IF;
        v_pid := array_append(v_pid, s::uuid);
        s := COALESCE(queen.sql_api_text(it -> 'status', what || '.status'), 'completed');
        IF s NOT IN ('completed', 'success', 'failed', 'dlq', 'retry') THEN
            RAISE EXCEPTION 'queen: %.status must be one of completed, success, failed, dlq, retry', what USING ERRCODE = '22023';
        END IF;
        v_status := array_append(v_status, CASE WHEN s = 'success' THEN 'completed' ELSE s END);
        s := queen.sql_api_text(it -> 'consumerGroup', what || '.consumerGroup');
        v_group := array_append(v_group, CASE WHEN s IS NULL THEN '__QUEUE_MODE__'
                                   ELSE queen.sql_api_check_name(s, what || '.consumerGroup') END);
        s := queen.sql_api_text(it -> 'leaseId', what || '.leaseId');
        IF length(s) > 255 THEN
            RAISE EXCEPTION 'queen: %.leaseId must be at most 255 characters', what USING ERRCODE = '22023';
        END IF;
        v_lease := array_append(v_lease, s);
        v_reason := array_append(v_reason, queen.sql_api_text(it -> 'error', what || '.error'));
    END LOOP;

    f_mid := array_fill(NULL::uuid, ARRAY[n]);
    f_seq := array_fill(NULL::bigint, ARRAY[n]);
    f_created := array_fill(NULL::timestamptz, ARRAY[n]);
    r_success := array_fill(false, ARRAY[n]);
    r_error := array_fill(NULL::text, ARRAY[n]);
    r_queue := array_fill(NULL::text, ARRAY[n]);
    r_part := array_fill(NULL::text, ARRAY[n]);
    r_released := array_fill(false, ARRAY[n]);
    r_dlq := array_fill(false, ARRAY[n]);

    -- The lookup is the tenant check (the query MessageListByTransactionIDs).
    FOR a IN
        SELECT u.o::int AS pos, m.id, m.seq, m.created_at, p.name AS partition_name, q.name AS queue_name
        FROM unnest(v_tenant, v_pid, v_tx) WITH ORDINALITY AS u(t, pid, tx, o)
        CROSS JOIN LATERAL (
            SELECT x.id, x.seq, x.created_at FROM queen.messages x
            WHERE x.partition_id = u.pid AND x.transaction_id = u.tx
        ) AS m
        JOIN queen.partitions p ON p.id = u.pid
        JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = u.t
    LOOP
        f_mid[a.pos] := a.id;
        f_seq[a.pos] := a.seq;
        f_created[a.pos] := a.created_at;
        r_queue[a.pos] := a.queue_name;
        r_part[a.pos] := a.partition_name;
    END LOOP;
    FOR i IN 1 .. n LOOP
        IF f_mid[i] IS NULL THEN
            r_error[i] := 'Message not found';
        END IF;
    END LOOP;

    -- Lock the cursors in the broker's order and read them as locked
    -- (PartitionConsumerLockMany). A cursor created after this statement
    -- is not this call's: the group had not claimed the partition.
    FOR a IN
        SELECT pc.partition_id, pc.consumer_group, pc.last_seq, pc.lease_id, pc.lease_expires_at,
               pc.batch_size, pc.acked_count, pc.batch_retry_count, q.retry_limit
        FROM queen.partition_consumers pc
        JOIN queen.partitions p ON p.id = pc.partition_id
        JOIN queen.queues q ON q.id = p.queue_id
        JOIN (SELECT DISTINCT u.pid, u.grp FROM unnest(v_pid, v_group, f_mid) AS u(pid, grp, mid)
              WHERE u.mid IS NOT NULL) AS k
          ON pc.partition_id = k.pid AND pc.consumer_group = k.grp
        ORDER BY pc.partition_id, pc.consumer_group
        FOR UPDATE OF pc
    LOOP
        l_pid := array_append(l_pid, a.partition_id);
        l_group := array_append(l_group, a.consumer_group);
        l_last_seq := array_append(l_last_seq, a.last_seq);
        l_lease := array_append(l_lease, a.lease_id);
        l_expires := array_append(l_expires, a.lease_expires_at);
        l_batch_size := array_append(l_batch_size, a.batch_size);
        l_acked := array_append(l_acked, a.acked_count);
        l_retries := array_append(l_retries, a.batch_retry_count);
        l_retry_limit := array_append(l_retry_limit, a.retry_limit);
    END LOOP;
    -- Leases are judged at one instant, after the locks: the time it is,
    -- not the caller's transaction start (now()).
    v_now := clock_timestamp();

    FOR a IN
        SELECT u.o::int AS pos, u.pid, u.grp, u.status, u.lease, u.reason, u.mid, u.seq, u.created,
               l.pid IS NOT NULL AS has_cursor, l.last_seq, l.lease_id,
               COALESCE(l.expires > v_now, false) AS lease_active,
               l.batch_size, l.acked_count, l.batch_retry_count, l.retry_limit
        FROM unnest(v_pid, v_group, v_status, v_lease, v_reason, f_mid, f_seq, f_created)
             WITH ORDINALITY AS u(pid, grp, status, lease, reason, mid, seq, created, o)
        LEFT JOIN unnest(l_pid, l_group, l_last_seq, l_lease, l_expires, l_batch_size, l_acked, l_retries, l_retry_limit)
             AS l(pid, grp, last_seq, lease_id, expires, batch_size, acked_count, batch_retry_count, retry_limit)
          ON l.pid = u.pid AND l.grp = u.grp
        WHERE u.mid IS NOT NULL
        ORDER BY u.pid, u.grp, u.seq, u.o
    LOOP
        IF c_pid IS DISTINCT FROM a.pid OR c_group IS DISTINCT FROM a.grp THEN
            IF c_touched THEN
                PERFORM queen.sql_api_ack_write(c_pid, c_group, c_last_seq, c_last_id, c_consumed, c_batches,
                                                c_acked, c_retries, c_release, v_now);
            END IF;
            c_pid := a.pid;
            c_group := a.grp;
            c_exists := a.has_cursor;
            c_row_lease := a.lease_id;
            c_row_active := a.lease_active;
            c_batch_size := a.batch_size;
            c_retry_limit := a.retry_limit;
            c_last_seq := a.last_seq;
            c_last_id := NULL;
            c_consumed := 0;
            c_batches := 0;
            c_acked := a.acked_count;
            c_retries := a.batch_retry_count;
            c_lease_held := a.lease_id IS NOT NULL AND a.lease_active;
            c_release := false;
            c_blocked := 0;
            c_touched := false;
        END IF;

        IF NOT c_exists THEN
            -- The group never claimed this partition: nothing to move.
            r_success[a.pos] := true;
            r_released[a.pos] := true;
            CONTINUE;
        END IF;
        IF a.lease IS NOT NULL AND (c_row_lease IS NULL OR c_row_lease <> a.lease OR NOT c_row_active) THEN
            r_error[a.pos] := 'Invalid or expired lease';
            CONTINUE;
        END IF;
        IF c_blocked > 0 AND a.seq > c_blocked AND a.status <> 'retry' THEN
            r_error[a.pos] := 'Not applied: an earlier message of this partition failed in the same batch and will be redelivered';
            CONTINUE;
        END IF;
        c_touched := true;
        r_success[a.pos] := true;
        IF a.status = 'failed' AND c_retries < c_retry_limit THEN
            -- Redelivered from the unchanged cursor.
            c_retries := c_retries + 1;
            c_release := true;
            c_blocked := a.seq;
            r_released[a.pos] := true;
            CONTINUE;
        END IF;
        IF a.status = 'retry' THEN
            c_release := true;
            r_released[a.pos] := true;
            CONTINUE;
        END IF;
        IF a.status IN ('failed', 'dlq') THEN
            INSERT INTO queen.dead_letter_queue (message_id, partition_id, consumer_group, error_message, retry_count, original_created_at)
            VALUES (a.mid, a.pid, a.grp,
                    COALESCE(a.reason, CASE WHEN a.status = 'failed' THEN 'Retries exhausted' ELSE 'Moved to dead-letter queue' END),
                    c_retries, a.created);
            r_dlq[a.pos] := true;
            -- The next message starts with a fresh retry budget.
            c_retries := 0;
        END IF;
        -- Completed or dead-lettered: the cursor passes the message, never
        -- moving backwards.
        IF a.seq > c_last_seq THEN
            c_last_seq := a.seq;
            c_last_id := a.mid;
            c_consumed := c_consumed + 1;
        END IF;
        c_acked := c_acked + 1;
        IF c_lease_held AND c_batch_size > 0 AND c_acked >= c_batch_size THEN
            c_release := true;
            c_retries := 0;
            c_batches := c_batches + 1;
        END IF;
        r_released[a.pos] := c_release OR NOT c_lease_held;
    END LOOP;
    IF c_touched THEN
        PERFORM queen.sql_api_ack_write(c_pid, c_group, c_last_seq, c_last_id, c_consumed, c_batches,
                                        c_acked, c_retries, c_release, v_now);
    END IF;

    -- Wake the pops parked on the queues where a lease was released.
    SELECT jsonb_object_agg(rq.t::text, rq.queues) INTO v_ready
    FROM (SELECT u.t, to_jsonb(array_agg(DISTINCT u.qn ORDER BY u.qn)) AS queues
          FROM unnest(v_tenant, r_queue, r_released) AS u(t, qn, released)
          WHERE u.released AND u.qn IS NOT NULL
          GROUP BY u.t) AS rq;
    IF v_ready IS NOT NULL THEN
        FOR a IN SELECT e.key, e.value FROM jsonb_each(v_ready) AS e ORDER BY e.key LOOP
            PERFORM queen.sql_api_notify_ready(a.key::uuid, ARRAY(SELECT jsonb_array_elements_text(a.value)));
        END LOOP;
    END IF;

    RETURN (SELECT jsonb_agg(jsonb_build_object(
                'index', u.idx,
                'transactionId', u.tx,
                'success', u.ok,
                'error', u.err,
                'queueName', u.qn,
                'partitionName', u.pn,
                'leaseReleased', u.released,
                'dlq', u.dlq) ORDER BY u.o)
            FROM unnest(v_index, v_tx, r_success, r_error, r_queue, r_part, r_released, r_dlq)
                 WITH ORDINALITY AS u(idx, tx, ok, err, qn, pn, released, dlq, o));
END
$$;

-- Writes one cursor an ack moved (PartitionConsumerApplyMany for one row).
CREATE OR REPLACE FUNCTION queen.sql_api_ack_write(
    p_pid uuid, p_group text, p_last_seq bigint, p_last_id uuid, p_consumed bigint, p_batches bigint,
    p_acked int, p_retries int, p_release boolean, p_now timestamptz) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    UPDATE queen.partition_consumers AS pc SET
        last_seq = p_last_seq,
        last_consumed_id = CASE WHEN p_consumed > 0 THEN p_last_id ELSE pc.last_consumed_id END,
        last_consumed_at = CASE WHEN p_consumed > 0 THEN p_now ELSE pc.last_consumed_at END,
        total_messages_consumed = pc.total_messages_consumed + p_consumed,
        total_batches_consumed = pc.total_batches_consumed + p_batches,
        acked_count = p_acked,
        batch_retry_count = p_retries,
        lease_id = CASE WHEN p_release THEN NULL ELSE pc.lease_id END,
        lease_acquired_at = CASE WHEN p_release THEN NULL ELSE pc.lease_acquired_at END,
        lease_expires_at = CASE WHEN p_release THEN NULL ELSE pc.lease_expires_at END,
        batch_size = CASE WHEN p_release THEN 0 ELSE pc.batch_size END
    WHERE pc.partition_id = p_pid AND pc.consumer_group = p_group
$$;

-- Callers get the entry point and nothing else.
REVOKE ALL ON FUNCTION queen.ack_messages_v2(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.sql_api_ack_write(uuid, text, bigint, uuid, bigint, bigint, int, int, boolean, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.sql_api_guard() FROM PUBLIC;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'queen_sql_api') THEN
        GRANT EXECUTE ON FUNCTION queen.ack_messages_v2(jsonb) TO queen_sql_api;
    END IF;
END
$$;
