-- A push in one statement (one round trip, autocommit when the caller has no
-- transaction of its own) instead of four: BEGIN, reserve sequence numbers,
-- insert, COMMIT, plus a statement that gave back the numbers reserved for
-- duplicates.
--
-- queen.push_messages reserves a number for every message and inserts them
-- all: the common case, no duplicate, costs an upsert of each partition row
-- and one insert. With check_dups the insert skips (ON CONFLICT) messages
-- whose transaction id the partition already stores; without it such a
-- message fails the statement with a unique violation on
-- messages_partition_transaction_unique. ON CONFLICT costs about as much
-- per row as the rest of the insert, so a caller whose statement commits on
-- its own (a push outside a transaction) tries without, and only after that
-- violation again with check_dups; a caller inside a transaction, which a
-- failed statement would abort, passes check_dups. The
-- partition rows stay locked until the transaction ends, which makes
-- sequence order equal commit order inside a partition, and means nobody
-- else inserts into those partitions meanwhile (every writer of messages
-- comes through here). When some rows were skipped as duplicates, the
-- function, still holding the locks, looks up the originals, takes this
-- push's rows out again and stores the rest with gapless numbers, then sets
-- last_seq to the last of them: no number is left vacant and last_seq never
-- passes the newest message. Each statement of a VOLATILE function sees
-- what committed before it started (READ COMMITTED), so the lookup sees
-- every message committed before the lock.
--
-- Arguments: the partitions as (queue_id, name) pairs, sorted by the caller
-- (queue id bytes, then name bytes) so that concurrent pushes lock in one
-- order, with the number of messages for each; then one entry per message:
-- part_idx the 1-based position of its partition in those arrays, seq_offs
-- its 1-based position among the messages of that partition. Messages must
-- be distinct per (partition, transaction id): the caller folds repeats
-- inside one push. Message ids come from the caller (UUIDv7). trace_ids and
-- producer_subs: '' for none.
--
-- Result: one row per partition (part its 1-based position, ord 0, id the
-- partition id), then one per duplicate (part 0, ord the message's 1-based
-- position, id the stored message's id). Every other message was stored
-- under its own id.
CREATE FUNCTION queen.push_messages(
    queue_ids uuid[], names text[], counts bigint[],
    part_idx integer[], seq_offs bigint[], ids uuid[], transaction_ids text[], trace_ids text[],
    payloads jsonb[], is_encrypted boolean[], producer_subs text[], check_dups boolean)
RETURNS TABLE (part integer, ord integer, id uuid)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    pids     uuid[];
    lasts    bigint[];
    stored   bigint;
    dup_ords integer[];
    dup_ids  uuid[];
BEGIN
    -- Create or lock every partition and reserve its numbers.
    WITH r AS (
        INSERT INTO queen.partitions AS p (queue_id, name, last_seq, last_message_at)
        SELECT v.q, v.n, v.c, now() FROM unnest(queue_ids, names, counts) AS v(q, n, c)
        ON CONFLICT (queue_id, name) DO UPDATE
            SET last_seq = p.last_seq + EXCLUDED.last_seq, last_message_at = now()
        RETURNING p.id, p.queue_id, p.name, p.last_seq
    )
    SELECT array_agg(r.id ORDER BY v.i), array_agg(r.last_seq ORDER BY v.i) INTO pids, lasts
    FROM unnest(queue_ids, names) WITH ORDINALITY AS v(q, n, i)
    JOIN r ON r.queue_id = v.q AND r.name = v.n;

    IF NOT check_dups THEN
        INSERT INTO queen.messages (id, partition_id, seq, transaction_id, trace_id, payload, is_encrypted, producer_sub)
        SELECT m.id, pids[m.pi], lasts[m.pi] - counts[m.pi] + m.off, m.tx, NULLIF(m.trace, '')::uuid, m.payload,
               m.enc, NULLIF(m.sub, '')
        FROM unnest(part_idx, seq_offs, ids, transaction_ids, trace_ids, payloads, is_encrypted, producer_subs)
             AS m(pi, off, id, tx, trace, payload, enc, sub);
        RETURN QUERY SELECT v.i::integer, 0, v.pid FROM unnest(pids) WITH ORDINALITY AS v(pid, i);
        RETURN;
    END IF;

    INSERT INTO queen.messages (id, partition_id, seq, transaction_id, trace_id, payload, is_encrypted, producer_sub)
    SELECT m.id, pids[m.pi], lasts[m.pi] - counts[m.pi] + m.off, m.tx, NULLIF(m.trace, '')::uuid, m.payload,
           m.enc, NULLIF(m.sub, '')
    FROM unnest(part_idx, seq_offs, ids, transaction_ids, trace_ids, payloads, is_encrypted, producer_subs)
         AS m(pi, off, id, tx, trace, payload, enc, sub)
    ON CONFLICT (partition_id, transaction_id) DO NOTHING;
    GET DIAGNOSTICS stored = ROW_COUNT;

    IF stored < cardinality(ids) THEN
        -- The originals of the skipped messages. A scalar subquery keeps
        -- the lookup one index probe per message whatever the statistics.
        SELECT array_agg(d.i ORDER BY d.i), array_agg(d.orig ORDER BY d.i) INTO dup_ords, dup_ids
        FROM (SELECT m.i, (SELECT s.id FROM queen.messages s
                           WHERE s.partition_id = pids[m.pi] AND s.transaction_id = m.tx) AS orig, m.id
              FROM unnest(part_idx, ids, transaction_ids) WITH ORDINALITY AS m(pi, id, tx, i)) AS d
        WHERE d.orig <> d.id;

        -- Store the rest again, numbered without the duplicates' numbers.
        DELETE FROM queen.messages s WHERE s.id = ANY(ids);
        INSERT INTO queen.messages (id, partition_id, seq, transaction_id, trace_id, payload, is_encrypted, producer_sub)
        SELECT m.id, pids[m.pi], lasts[m.pi] - counts[m.pi] + row_number() OVER (PARTITION BY m.pi ORDER BY m.i),
               m.tx, NULLIF(m.trace, '')::uuid, m.payload, m.enc, NULLIF(m.sub, '')
        FROM unnest(part_idx, ids, transaction_ids, trace_ids, payloads, is_encrypted, producer_subs)
             WITH ORDINALITY AS m(pi, id, tx, trace, payload, enc, sub, i)
        WHERE m.i <> ALL(dup_ords);

        -- Give the duplicates' numbers back: nobody else has seen them.
        UPDATE queen.partitions p SET last_seq = p.last_seq - d.n
        FROM (SELECT pids[part_idx[o]] AS pid, count(*) AS n FROM unnest(dup_ords) AS o GROUP BY 1) AS d
        WHERE p.id = d.pid;
    END IF;

    RETURN QUERY
    SELECT v.i::integer, 0, v.pid FROM unnest(pids) WITH ORDINALITY AS v(pid, i)
    UNION ALL
    SELECT 0, d.o::integer, d.orig FROM unnest(dup_ords, dup_ids) AS d(o, orig);
END
$fn$;

-- The foreign key from messages to partitions checked every inserted row
-- with a lookup of its partition (an RI trigger per row): about a quarter
-- of PostgreSQL's CPU per pushed message (docs/benchmarks.md, "Performance
-- round 2: push"). Every insert comes through queen.push_messages, which
-- creates or locks the partition row in the same transaction before it
-- inserts, so a message can only point at a partition that exists and that
-- no one can delete before the push commits. What the key still did is the
-- cascade when a partition goes (queue delete, clear, cleanup, SQL by hand):
-- this trigger does it, one index range per partition as the key did.
ALTER TABLE queen.messages DROP CONSTRAINT messages_partition_id_fkey;

CREATE FUNCTION queen.partitions_delete_messages() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    gone uuid;
BEGIN
    FOR gone IN SELECT d.id FROM deleted_partitions_messages d LOOP
        DELETE FROM queen.messages m WHERE m.partition_id = gone;
    END LOOP;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER partitions_delete_messages
AFTER DELETE ON queen.partitions
REFERENCING OLD TABLE AS deleted_partitions_messages
FOR EACH STATEMENT EXECUTE FUNCTION queen.partitions_delete_messages();
