-- A push in one statement (one round trip, autocommit when the caller has no
-- transaction of its own) instead of four: BEGIN, reserve sequence numbers,
-- insert, COMMIT, plus a give-back of the numbers reserved for duplicates.
--
-- Why a function: duplicates must be known before numbers are reserved, and
-- only a statement that starts after the partitions are locked sees every
-- message committed before the lock. A VOLATILE function takes a fresh
-- snapshot per statement (READ COMMITTED), so its second statement runs
-- after the lock with a snapshot that includes every committed message of
-- those partitions; nobody else can insert there until this transaction
-- ends, because every writer of messages comes through here. No number is
-- ever reserved for a duplicate, so none is given back.
--
-- Arguments: the partitions as (queue_id, name) pairs, sorted by the caller
-- (queue id bytes, then name bytes) so that concurrent pushes lock in one
-- order; then one entry per message, with part_idx the 1-based position of
-- its partition in those arrays. Messages must be distinct per (partition,
-- transaction id): the caller folds repeats inside one push. Message ids come
-- from the caller (UUIDv7). trace_ids and producer_subs: '' for none.
--
-- Result: one row per message, ord its 1-based position: the partition id,
-- the stored message id (the original one for a duplicate) and whether it
-- was a duplicate. Sequence numbers follow the message order per partition.
CREATE FUNCTION queen.push_messages(
    queue_ids uuid[], names text[],
    part_idx integer[], ids uuid[], transaction_ids text[], trace_ids text[],
    payloads jsonb[], is_encrypted boolean[], producer_subs text[])
RETURNS TABLE (ord integer, partition_id uuid, message_id uuid, duplicate boolean)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
BEGIN
    -- Create or lock every partition; the row lock is held to commit, which
    -- makes sequence order equal commit order inside a partition.
    INSERT INTO queen.partitions AS p (queue_id, name, last_message_at)
    SELECT v.q, v.n, now() FROM unnest(queue_ids, names) AS v(q, n)
    ON CONFLICT (queue_id, name) DO UPDATE SET last_message_at = now();

    RETURN QUERY
    WITH parts AS (
        SELECT v.i, p.id
        FROM unnest(queue_ids, names) WITH ORDINALITY AS v(q, n, i)
        JOIN queen.partitions p ON p.queue_id = v.q AND p.name = v.n
    ), msgs AS MATERIALIZED (
        -- The duplicate probe is a scalar subquery so that it stays one
        -- index probe per message whatever the table's statistics say.
        SELECT m.i, parts.id AS pid, m.id, m.tx, m.trace, m.payload, m.enc, m.sub,
               (SELECT s.id FROM queen.messages s
                WHERE s.partition_id = parts.id AND s.transaction_id = m.tx) AS dup_id
        FROM unnest(part_idx, ids, transaction_ids, trace_ids, payloads, is_encrypted, producer_subs)
             WITH ORDINALITY AS m(pi, id, tx, trace, payload, enc, sub, i)
        JOIN parts ON parts.i = m.pi
    ), fresh AS MATERIALIZED (
        SELECT msgs.*, row_number() OVER (PARTITION BY msgs.pid ORDER BY msgs.i) AS rn
        FROM msgs WHERE msgs.dup_id IS NULL
    ), counts AS (
        SELECT fresh.pid, count(*) AS c FROM fresh GROUP BY fresh.pid
    ), reserved AS (
        UPDATE queen.partitions p SET last_seq = p.last_seq + counts.c
        FROM counts WHERE p.id = counts.pid
        RETURNING p.id, p.last_seq - counts.c AS base
    ), stored AS (
        INSERT INTO queen.messages (id, partition_id, seq, transaction_id, trace_id, payload, is_encrypted, producer_sub)
        SELECT f.id, f.pid, r.base + f.rn, f.tx, NULLIF(f.trace, '')::uuid, f.payload, f.enc, NULLIF(f.sub, '')
        FROM fresh f JOIN reserved r ON r.id = f.pid
        RETURNING 1
    )
    SELECT msgs.i::integer, msgs.pid, COALESCE(msgs.dup_id, msgs.id), msgs.dup_id IS NOT NULL
    FROM msgs
    ORDER BY msgs.i;
END
$fn$;
