-- Lag and pending counts by sequence arithmetic (docs/observability.md,
-- "Scale: 100,000 partitions"; docs/benchmarks.md, "Round 3: the first
-- computation of the dashboard's answers").
--
-- Since migration 0012 a push numbers its messages without gaps (a
-- duplicate's number is given back in the same statement, the SQL API
-- numbers only what it stores), so a number goes vacant only when a message
-- is deleted: retention, eviction, the admin delete. vacant_top is the
-- highest number any of those ever vacated; each raises it in the statement
-- that deletes, as it counts vacant_seqs. Above vacant_top every number up
-- to last_seq holds a message, so for a cursor at c >= vacant_top what is
-- left is exactly last_seq - c messages, the first of them number c + 1,
-- and nothing has to be read from the messages to know it. A group with no
-- cursor has everything the partition stores left, last_seq - vacant_seqs.
-- Only a cursor below vacant_top needs the messages probed, as before.
-- Pushes, pops and acks never write the column.
ALTER TABLE queen.partitions ADD COLUMN vacant_top bigint NOT NULL DEFAULT 0;

-- Numbers vacated before this migration (duplicates before 0012, deletes)
-- are somewhere up to last_seq: the cursors below it probe until they pass
-- it. The ALTER above keeps every writer out until commit.
UPDATE queen.partitions SET vacant_top = last_seq WHERE vacant_seqs > 0;

-- consumer_lag (0008, 0010) with the same rows and columns, counted by the
-- arithmetic above where it holds:
--
--   * a cursor at c >= vacant_top: offset_lag last_seq - c, and the oldest
--     unconsumed message is number c + 1 (one probe of the unique
--     (partition_id, seq) key, for its time);
--   * no cursor and no subscription start time: offset_lag is what the
--     partition stores; when nothing was ever deleted (vacant_top 0) its
--     first message is number 1, stored by the push that created the
--     partition, in the same transaction: created_at is that message's
--     time (a broker push stamps both with the transaction's start; the
--     SQL API stamps its messages with the statement's clock, at most its
--     transaction's length later);
--   * otherwise (a cursor below vacant_top, a subscription start time, or
--     a partition whose first messages were deleted) the messages are
--     probed as before: the first one past the cursor (and after the start
--     time), and the newest.
CREATE OR REPLACE VIEW queen.consumer_lag AS
WITH cursor_reads AS MATERIALIZED (
    SELECT pc.consumer_group, p.queue_id, count(*) AS cursors,
           bool_or(pc.total_messages_consumed > 0) AS consumed,
           array_agg(p.id) FILTER (WHERE p.last_seq > pc.last_seq) AS behind,
           array_agg(pc.last_seq) FILTER (WHERE p.last_seq > pc.last_seq) AS behind_cursor
    FROM queen.partition_consumers pc
    JOIN queen.partitions p ON p.id = pc.partition_id
    GROUP BY pc.consumer_group, p.queue_id
), reads AS MATERIALIZED (
    SELECT r.consumer_group, r.queue_id, q.name AS queue_name, q.tenant_id,
           r.cursors, r.consumed, r.behind, r.behind_cursor,
           (SELECT count(*) FROM queen.partitions p WHERE p.queue_id = r.queue_id) AS partitions,
           EXISTS (SELECT 1 FROM queen.consumer_groups_metadata s
                    WHERE s.tenant_id = q.tenant_id AND s.consumer_group = r.consumer_group
                      AND s.queue_name = q.name AND s.subscription_timestamp IS NOT NULL) AS has_start
    FROM (
        SELECT c.consumer_group, c.queue_id, c.cursors, c.consumed, c.behind, c.behind_cursor
        FROM cursor_reads c
        UNION ALL
        SELECT DISTINCT s.consumer_group, q.id, 0::bigint, false, NULL::uuid[], NULL::bigint[]
        FROM queen.consumer_groups_metadata s
        JOIN queen.queues q ON q.tenant_id = s.tenant_id AND q.name = s.queue_name
        WHERE NOT EXISTS (SELECT 1 FROM cursor_reads c WHERE c.consumer_group = s.consumer_group AND c.queue_id = q.id)
    ) r
    JOIN queen.queues q ON q.id = r.queue_id
), pairs AS (
    SELECT r.consumer_group, r.queue_id, r.queue_name, r.tenant_id, p.id AS partition_id, true AS has_cursor,
           b.cursor_seq, p.last_seq, p.vacant_seqs, p.vacant_top, p.created_at, NULL::timestamptz AS start_after
    FROM reads r
    CROSS JOIN LATERAL unnest(r.behind, r.behind_cursor) AS b(partition_id, cursor_seq)
    JOIN queen.partitions p ON p.id = b.partition_id
    UNION ALL
    SELECT r.consumer_group, r.queue_id, r.queue_name, r.tenant_id, p.id, false, 0::bigint,
           p.last_seq, p.vacant_seqs, p.vacant_top, p.created_at,
           CASE WHEN r.has_start THEN
               (SELECT s.subscription_timestamp FROM queen.consumer_groups_metadata s
                 WHERE s.tenant_id = r.tenant_id AND s.consumer_group = r.consumer_group AND s.queue_name = r.queue_name
                   AND s.partition_name IN (p.name, '')
                 ORDER BY s.partition_name DESC
                 LIMIT 1)
           END
    FROM reads r
    JOIN queen.partitions p ON p.queue_id = r.queue_id
    WHERE r.cursors < r.partitions
      AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers x
                      WHERE x.partition_id = p.id AND x.consumer_group = r.consumer_group)
), counted AS (
    SELECT pr.*,
           pr.start_after IS NULL AND pr.has_cursor AND pr.cursor_seq >= pr.vacant_top AS dense,
           pr.start_after IS NULL AND NOT pr.has_cursor AS whole
    FROM pairs pr
)
SELECT r.consumer_group, r.queue_id, r.queue_name, NULL::uuid AS partition_id,
       r.partitions, r.cursors, r.consumed, false AS has_cursor,
       0::bigint AS offset_lag, NULL::timestamptz AS oldest_unconsumed_at, r.tenant_id
FROM reads r
UNION ALL
SELECT c.consumer_group, c.queue_id, c.queue_name, c.partition_id,
       0::bigint, 0::bigint, false, c.has_cursor,
       (CASE WHEN c.dense THEN c.last_seq - c.cursor_seq
             WHEN c.whole THEN c.last_seq - c.vacant_seqs
             WHEN f.seq IS NULL THEN 0
             ELSE LEAST(f.newest - f.seq + 1, c.last_seq - c.vacant_seqs) END)::bigint,
       CASE WHEN c.dense THEN (SELECT m.created_at FROM queen.messages m
                                WHERE m.partition_id = c.partition_id AND m.seq = c.cursor_seq + 1)
            WHEN c.whole AND c.vacant_top = 0 THEN CASE WHEN c.last_seq > 0 THEN c.created_at END
            ELSE f.created_at END,
       c.tenant_id
FROM counted c
LEFT JOIN LATERAL (
    SELECT m.seq, m.created_at,
           (SELECT n.seq FROM queen.messages n WHERE n.partition_id = c.partition_id
             ORDER BY n.seq DESC LIMIT 1) AS newest
    FROM queen.messages m
    WHERE NOT c.dense AND NOT (c.whole AND c.vacant_top = 0)
      AND m.partition_id = c.partition_id AND m.seq > c.cursor_seq
      AND (c.start_after IS NULL OR m.created_at > c.start_after)
    ORDER BY m.seq
    LIMIT 1
) f ON true;

-- The time of the oldest message a group has left in the partitions of a
-- queue it holds no cursor on (and has no subscription start time for),
-- NULL when they store nothing: the consumer-group listing's "max time
-- lag" without a row per partition. It walks the queue's partitions that
-- store something, oldest created first (the created_at index, 100 at a
-- time: a LIMIT is what makes the planner walk the index rather than sort
-- the queue), skipping those the group has a cursor on; a partition's
-- first stored message is its creation time when nothing was ever deleted
-- from it (vacant_top 0, see above), else it is probed. No message of a
-- partition is older than the partition (a push creates the row in its own
-- transaction; a push that began earlier and waited on that creation
-- stamps its messages up to that wait earlier, and those never come first
-- unless the first ones were deleted), so the walk stops at the first
-- partition created after the oldest message found; on a backlog nobody
-- has read that is the first partition.
CREATE FUNCTION queen.oldest_unread(p_queue_id uuid, p_group text) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    best  timestamptz;
    found timestamptz;
    after timestamptz := '-infinity';
    seen  integer;
    first timestamptz;
    r     record;
BEGIN
    LOOP
        seen := 0;
        FOR r IN
            SELECT p.id, p.created_at, p.vacant_top FROM queen.partitions p
            WHERE p.queue_id = p_queue_id AND p.last_seq > p.vacant_seqs AND p.created_at >= after
              AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers x
                              WHERE x.partition_id = p.id AND x.consumer_group = p_group)
            ORDER BY p.created_at
            LIMIT 100
        LOOP
            IF best IS NOT NULL AND r.created_at >= best THEN
                RETURN best;
            END IF;
            seen := seen + 1;
            IF seen = 1 THEN
                first := r.created_at;
            END IF;
            after := r.created_at;
            IF r.vacant_top = 0 THEN
                found := r.created_at;
            ELSE
                SELECT m.created_at INTO found FROM queen.messages m
                WHERE m.partition_id = r.id ORDER BY m.seq LIMIT 1;
            END IF;
            best := LEAST(best, found);
        END LOOP;
        IF seen < 100 THEN
            RETURN best;
        END IF;
        -- The next 100 start at the last creation time seen: partitions
        -- created together (one push creates many) are seen again, which
        -- is harmless for a minimum, and the bound moves on unless all 100
        -- share one time, where it would not: then take every partition of
        -- that time at once and go past it.
        IF first = after THEN
            SELECT LEAST(best, min(CASE WHEN p.vacant_top = 0 THEN p.created_at
                                        ELSE (SELECT m.created_at FROM queen.messages m
                                               WHERE m.partition_id = p.id ORDER BY m.seq LIMIT 1) END))
            INTO best
            FROM queen.partitions p
            WHERE p.queue_id = p_queue_id AND p.last_seq > p.vacant_seqs AND p.created_at = after
              AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers x
                              WHERE x.partition_id = p.id AND x.consumer_group = p_group);
            after := after + interval '1 microsecond';
        END IF;
    END LOOP;
END
$fn$;
