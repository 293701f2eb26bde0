-- name: ConsumerLagList :many
-- One group's partitions that have a row in queen.consumer_lag (migrations
-- 0008 and 0010: something past the cursor, or no cursor), in a tenant's
-- queues, by queue then partition. Every query here reads one tenant.
-- Here and below, observed_at is the database clock that time lags are
-- measured with.
SELECT x.queue_name, x.partition_id, x.partition_name::text AS partition_name,
       x.has_cursor, x.offset_lag, x.oldest_unconsumed_at, now()::timestamptz AS observed_at
FROM (
    SELECT l.queue_name, l.partition_id::uuid AS partition_id, l.has_cursor, l.offset_lag, l.oldest_unconsumed_at,
           (SELECT p.name FROM queen.partitions p WHERE p.id = l.partition_id) AS partition_name
    FROM queen.consumer_lag l
    WHERE l.tenant_id = @tenant_id AND l.consumer_group = @consumer_group AND l.partition_id IS NOT NULL
) x
ORDER BY x.queue_name, x.partition_name;

-- name: ConsumerLagByQueue :many
-- Per (group, queue), by group then queue: partitions with a cursor,
-- partitions with something unconsumed, the summed offset lag, the oldest
-- unconsumed message, whether the group ever consumed there, and the
-- group's subscription to the queue (the queue-wide one, else the first
-- partition's by name; empty mode when none). The same counts as
-- queen.consumer_lag's rows summed, without a row per (group, partition):
-- the cursors are counted one by one (migration 0021's arithmetic, a probe
-- for the time of the first message left), and a group's partitions
-- without a cursor add what their queue stores (part_* arrays, per queue:
-- the counts of PartitionCountsByQueue) less what its cursor partitions
-- store, their oldest message found by queen.oldest_unread. Only
-- a group with a subscription start time on the queue has those partitions
-- probed one by one, as the view does.
WITH cur AS MATERIALIZED (
    SELECT pc.consumer_group, p.queue_id, pc.total_messages_consumed > 0 AS consumed,
           GREATEST(p.last_seq - p.vacant_seqs, 0) AS stored,
           CASE WHEN p.last_seq <= pc.last_seq THEN 0
                WHEN pc.last_seq >= p.vacant_top THEN p.last_seq - pc.last_seq
                ELSE COALESCE((SELECT LEAST((SELECT n.seq FROM queen.messages n WHERE n.partition_id = p.id
                                              ORDER BY n.seq DESC LIMIT 1) - m.seq + 1, p.last_seq - p.vacant_seqs)
                               FROM queen.messages m WHERE m.partition_id = p.id AND m.seq > pc.last_seq
                               ORDER BY m.seq LIMIT 1), 0) END AS lag,
           CASE WHEN p.last_seq <= pc.last_seq THEN NULL
                WHEN pc.last_seq >= p.vacant_top THEN
                    (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = p.id AND m.seq = pc.last_seq + 1)
                ELSE (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = p.id AND m.seq > pc.last_seq
                       ORDER BY m.seq LIMIT 1) END AS oldest
    FROM queen.partition_consumers pc
    JOIN queen.partitions p ON p.id = pc.partition_id
    JOIN queen.queues q ON q.id = p.queue_id
    WHERE q.tenant_id = @tenant_id
), reads AS MATERIALIZED (
    SELECT c.consumer_group, c.queue_id, count(*) AS cursors, bool_or(c.consumed) AS consumed,
           sum(c.stored) AS cursor_stored, count(*) FILTER (WHERE c.stored > 0) AS cursor_nonempty,
           sum(c.lag) AS lag, count(c.oldest) AS with_lag, min(c.oldest) AS oldest
    FROM cur c
    GROUP BY c.consumer_group, c.queue_id
    UNION ALL
    SELECT DISTINCT s.consumer_group, q.id, 0::bigint, false, 0::numeric, 0::bigint, 0::numeric, 0::bigint, NULL::timestamptz
    FROM queen.consumer_groups_metadata s
    JOIN queen.queues q ON q.tenant_id = s.tenant_id AND q.name = s.queue_name
    WHERE s.tenant_id = @tenant_id
      AND NOT EXISTS (SELECT 1 FROM cur c WHERE c.consumer_group = s.consumer_group AND c.queue_id = q.id)
), parts AS (
    -- Per queue: what its partitions store and how many store something
    -- (the caller's PartitionCountsByQueue, shared with the other routes).
    SELECT unnest(@part_queue_ids::uuid[]) AS queue_id, unnest(@part_stored::bigint[]) AS stored,
           unnest(@part_nonempty::bigint[]) AS nonempty
), g AS (
    SELECT r.consumer_group, q.name AS queue_name, q.tenant_id, r.queue_id, r.cursors, r.consumed, r.lag, r.with_lag, r.oldest,
           COALESCE(pt.stored, 0) - r.cursor_stored AS rest_stored,
           COALESCE(pt.nonempty, 0) - r.cursor_nonempty AS rest_nonempty,
           EXISTS (SELECT 1 FROM queen.consumer_groups_metadata s
                    WHERE s.tenant_id = q.tenant_id AND s.consumer_group = r.consumer_group
                      AND s.queue_name = q.name AND s.subscription_timestamp IS NOT NULL) AS has_start
    FROM reads r
    JOIN queen.queues q ON q.id = r.queue_id
    LEFT JOIN parts pt ON pt.queue_id = r.queue_id
)
SELECT g.consumer_group, g.queue_name, g.cursors AS members,
       (g.with_lag + CASE WHEN g.has_start THEN st.with_lag ELSE g.rest_nonempty END)::bigint AS partitions_with_lag,
       (g.lag + CASE WHEN g.has_start THEN st.lag ELSE g.rest_stored END)::bigint AS total_lag,
       LEAST(g.oldest, CASE WHEN g.has_start THEN st.oldest
                            WHEN g.rest_nonempty > 0 THEN queen.oldest_unread(g.queue_id, g.consumer_group) END)::timestamptz AS oldest_unconsumed_at,
       g.consumed,
       COALESCE(s.subscription_mode, '')::text AS subscription_mode,
       s.subscription_timestamp, s.created_at AS subscription_created_at,
       now()::timestamptz AS observed_at
FROM g
LEFT JOIN LATERAL (
    SELECT count(f.created_at) AS with_lag,
           COALESCE(sum(CASE WHEN f.seq IS NULL THEN 0
                             ELSE LEAST(f.newest - f.seq + 1, p.last_seq - p.vacant_seqs) END), 0) AS lag,
           min(f.created_at) AS oldest
    FROM queen.partitions p
    LEFT JOIN LATERAL (
        SELECT m.seq, m.created_at,
               (SELECT n.seq FROM queen.messages n WHERE n.partition_id = p.id ORDER BY n.seq DESC LIMIT 1) AS newest
        FROM queen.messages m
        WHERE m.partition_id = p.id
          AND m.created_at > (SELECT s.subscription_timestamp FROM queen.consumer_groups_metadata s
                               WHERE s.tenant_id = g.tenant_id AND s.consumer_group = g.consumer_group
                                 AND s.queue_name = g.queue_name AND s.partition_name IN (p.name, '')
                               ORDER BY s.partition_name DESC LIMIT 1)
        ORDER BY m.seq LIMIT 1
    ) f ON true
    WHERE g.has_start AND p.queue_id = g.queue_id
      AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers x
                      WHERE x.partition_id = p.id AND x.consumer_group = g.consumer_group)
) st ON true
LEFT JOIN LATERAL (
    SELECT m.subscription_mode, m.subscription_timestamp, m.created_at
    FROM queen.consumer_groups_metadata m
    WHERE m.tenant_id = g.tenant_id AND m.consumer_group = g.consumer_group AND m.queue_name = g.queue_name
    ORDER BY m.partition_name <> '', m.partition_name
    LIMIT 1
) s ON true
ORDER BY g.consumer_group, g.queue_name;

-- name: ConsumerLagOlderThan :many
-- The (group, partition) pairs whose oldest unconsumed message is more than
-- min_lag_seconds whole seconds old, oldest first (then by group, queue and
-- partition name), at most max_rows of them: queen.consumer_lag's rows over
-- the threshold, found without a row per (group, partition).
-- Cursors behind their partition are counted one by one (migration 0021's
-- arithmetic, a probe for the time of the first message left). A partition
-- a group reads but holds no cursor on lags from its first stored message,
-- which is as old as the partition when nothing was ever deleted from it
-- (see queen.oldest_unread): those are walked in creation order through
-- the created_at index, up to the threshold, and the walk stops after
-- max_rows pairs (and the pairs tied with the last), since every pair it
-- leaves is younger than those. Partitions with deletes are probed for
-- their first message, and a group with a subscription start time on the
-- queue has its partitions probed one by one as the view does; both only
-- up to the walk's last creation time when it found max_rows pairs (a
-- first message is no older than its partition).
WITH reads AS MATERIALIZED (
    SELECT r.consumer_group, r.queue_id, r.queue_name, r.tenant_id, r.has_start
    FROM queen.queue_readers r WHERE r.tenant_id = @tenant_id
), fresh AS MATERIALIZED (
    SELECT r.consumer_group, r.queue_name, p.id AS partition_id, p.name AS partition_name, NULL::timestamptz AS last_consumed_at,
           p.last_seq - p.vacant_seqs AS offset_lag, p.created_at AS oldest
    FROM queen.partitions p
    JOIN reads r ON r.queue_id = p.queue_id AND NOT r.has_start
    WHERE p.created_at < now() - make_interval(secs => @min_lag_seconds::bigint)
      AND floor(extract(epoch FROM now() - p.created_at)) > @min_lag_seconds::bigint
      AND p.vacant_top = 0 AND p.last_seq > p.vacant_seqs
      AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers x
                      WHERE x.partition_id = p.id AND x.consumer_group = r.consumer_group)
    ORDER BY p.created_at
    FETCH FIRST (@max_rows::bigint) ROWS WITH TIES
), fresh_bound AS (
    -- Pairs created after the walk's last are younger than max_rows others.
    SELECT CASE WHEN count(*) >= @max_rows::bigint THEN max(f.oldest) END AS top FROM fresh f
), pairs AS (
    SELECT pc.consumer_group, r.queue_name, p.id AS partition_id, p.name AS partition_name,
           pc.last_consumed_at,
           CASE WHEN pc.last_seq >= p.vacant_top THEN p.last_seq - pc.last_seq
                ELSE COALESCE((SELECT LEAST((SELECT n.seq FROM queen.messages n WHERE n.partition_id = p.id
                                              ORDER BY n.seq DESC LIMIT 1) - m.seq + 1, p.last_seq - p.vacant_seqs)
                               FROM queen.messages m WHERE m.partition_id = p.id AND m.seq > pc.last_seq
                               ORDER BY m.seq LIMIT 1), 0) END AS offset_lag,
           CASE WHEN pc.last_seq >= p.vacant_top THEN
                    (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = p.id AND m.seq = pc.last_seq + 1)
                ELSE (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = p.id AND m.seq > pc.last_seq
                       ORDER BY m.seq LIMIT 1) END AS oldest
    FROM queen.partition_consumers pc
    JOIN queen.partitions p ON p.id = pc.partition_id
    JOIN reads r ON r.queue_id = p.queue_id AND r.consumer_group = pc.consumer_group
    WHERE p.last_seq > pc.last_seq
    UNION ALL
    SELECT f.consumer_group, f.queue_name, f.partition_id, f.partition_name, f.last_consumed_at, f.offset_lag, f.oldest
    FROM fresh f
    UNION ALL
    SELECT r.consumer_group, r.queue_name, p.id, p.name, NULL::timestamptz, p.last_seq - p.vacant_seqs,
           (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = p.id ORDER BY m.seq LIMIT 1)
    FROM queen.partitions p
    JOIN reads r ON r.queue_id = p.queue_id AND NOT r.has_start
    WHERE p.created_at < now() - make_interval(secs => @min_lag_seconds::bigint)
      AND p.created_at <= COALESCE((SELECT b.top FROM fresh_bound b), 'infinity')
      AND p.vacant_top > 0 AND p.last_seq > p.vacant_seqs
      AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers x
                      WHERE x.partition_id = p.id AND x.consumer_group = r.consumer_group)
    UNION ALL
    SELECT r.consumer_group, r.queue_name, p.id, p.name, NULL::timestamptz,
           CASE WHEN f.seq IS NULL THEN 0 ELSE LEAST(f.newest - f.seq + 1, p.last_seq - p.vacant_seqs) END,
           f.created_at
    FROM reads r
    JOIN queen.partitions p ON p.queue_id = r.queue_id
    CROSS JOIN LATERAL (
        SELECT m.seq, m.created_at,
               (SELECT n.seq FROM queen.messages n WHERE n.partition_id = p.id ORDER BY n.seq DESC LIMIT 1) AS newest
        FROM queen.messages m
        WHERE m.partition_id = p.id
          AND m.created_at > (SELECT s.subscription_timestamp FROM queen.consumer_groups_metadata s
                               WHERE s.tenant_id = r.tenant_id AND s.consumer_group = r.consumer_group
                                 AND s.queue_name = r.queue_name AND s.partition_name IN (p.name, '')
                               ORDER BY s.partition_name DESC LIMIT 1)
        ORDER BY m.seq LIMIT 1
    ) f
    WHERE r.has_start
      AND p.created_at <= COALESCE((SELECT b.top FROM fresh_bound b), 'infinity')
      AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers x
                      WHERE x.partition_id = p.id AND x.consumer_group = r.consumer_group)
)
SELECT l.consumer_group, l.queue_name, l.partition_id::uuid AS partition_id, l.partition_name::text AS partition_name,
       l.last_consumed_at::timestamptz AS last_consumed_at, l.offset_lag::bigint AS offset_lag,
       l.oldest::timestamptz AS oldest_unconsumed_at, now()::timestamptz AS observed_at
FROM pairs l
WHERE l.oldest < now()
  AND floor(extract(epoch FROM now() - l.oldest)) > @min_lag_seconds::bigint
ORDER BY l.oldest, l.consumer_group, l.queue_name, l.partition_name
LIMIT @max_rows::bigint;

-- name: ConsumerLagHistogram :many
-- The distribution of the lag over every (group, partition) pair of a
-- tenant's queues a group reads, for the overview's lag statistics: rows
-- (kind, lag, pairs), kind 'offset' (messages left) or 'time' (whole
-- seconds since the oldest message left, 0 when none), pairs with no lag
-- included as lag 0. The same lags as queen.consumer_lag's rows, without a
-- row per pair: a group's partitions without a cursor lag by what the
-- partition stores and since its first stored message (migration 0021),
-- which are counted per queue in one pass over its partitions and weighted
-- by the groups reading it, less the partitions each group has a cursor
-- on; the cursors are counted one by one. A group with a subscription
-- start time on the queue has its partitions without a cursor probed one
-- by one, as the view does.
WITH reads AS MATERIALIZED (
    SELECT r.consumer_group, r.queue_id, r.queue_name, r.tenant_id, r.has_start
    FROM queen.queue_readers r WHERE r.tenant_id = @tenant_id
), weights AS MATERIALIZED (
    SELECT r.queue_id, count(*) AS readers FROM reads r WHERE NOT r.has_start GROUP BY r.queue_id
), scanned AS MATERIALIZED (
    -- Every partition, as a group without a cursor sees it, grouped as it
    -- is scanned (one pass; other tenants' queues and the queues nobody
    -- reads drop out at the join with the weights): by queue, stored count
    -- and, when it stores something, creation time, one group each for a
    -- partition whose first messages may have been deleted (vacant_top >
    -- 0: its creation time is not its first message's, probed below).
    -- Nothing but these keys is computed per partition: the lag and the
    -- oldest time are worked out per group below (computing them here cost
    -- the pass a third more; docs/benchmarks.md, "Round 4: the dashboard's
    -- first computation").
    SELECT p.queue_id, p.last_seq - p.vacant_seqs AS stored,
           CASE WHEN p.last_seq > p.vacant_seqs THEN p.created_at END AS created,
           CASE WHEN p.last_seq > p.vacant_seqs AND p.vacant_top > 0 THEN p.id END AS probe,
           count(*) AS n
    FROM queen.partitions p
    GROUP BY 1, 2, 3, 4
), whole AS (
    SELECT s.queue_id, GREATEST(s.stored, 0) AS lag, s.n,
           CASE WHEN s.probe IS NULL THEN s.created
                ELSE (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = s.probe ORDER BY m.seq LIMIT 1) END AS oldest
    FROM scanned s
    JOIN weights w ON w.queue_id = s.queue_id
), cursors AS MATERIALIZED (
    SELECT r.has_start, p.id, p.last_seq, p.vacant_seqs, p.vacant_top, p.created_at,
           CASE WHEN p.last_seq <= pc.last_seq THEN 0
                WHEN pc.last_seq >= p.vacant_top THEN p.last_seq - pc.last_seq
                ELSE COALESCE((SELECT LEAST((SELECT n.seq FROM queen.messages n WHERE n.partition_id = p.id
                                              ORDER BY n.seq DESC LIMIT 1) - m.seq + 1, p.last_seq - p.vacant_seqs)
                               FROM queen.messages m WHERE m.partition_id = p.id AND m.seq > pc.last_seq
                               ORDER BY m.seq LIMIT 1), 0) END AS lag,
           CASE WHEN p.last_seq <= pc.last_seq THEN NULL
                WHEN pc.last_seq >= p.vacant_top THEN
                    (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = p.id AND m.seq = pc.last_seq + 1)
                ELSE (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = p.id AND m.seq > pc.last_seq
                       ORDER BY m.seq LIMIT 1) END AS oldest
    FROM queen.partition_consumers pc
    JOIN queen.partitions p ON p.id = pc.partition_id
    JOIN reads r ON r.queue_id = p.queue_id AND r.consumer_group = pc.consumer_group
), started AS (
    -- The partitions without a cursor of a group with a start time.
    SELECT CASE WHEN f.seq IS NULL THEN 0 ELSE LEAST(f.newest - f.seq + 1, p.last_seq - p.vacant_seqs) END AS lag,
           f.created_at AS oldest
    FROM reads r
    JOIN queen.partitions p ON p.queue_id = r.queue_id
    LEFT JOIN LATERAL (
        SELECT m.seq, m.created_at,
               (SELECT n.seq FROM queen.messages n WHERE n.partition_id = p.id ORDER BY n.seq DESC LIMIT 1) AS newest
        FROM queen.messages m
        WHERE m.partition_id = p.id
          AND m.created_at > (SELECT s.subscription_timestamp FROM queen.consumer_groups_metadata s
                               WHERE s.tenant_id = r.tenant_id AND s.consumer_group = r.consumer_group
                                 AND s.queue_name = r.queue_name AND s.partition_name IN (p.name, '')
                               ORDER BY s.partition_name DESC LIMIT 1)
        ORDER BY m.seq LIMIT 1
    ) f ON true
    WHERE r.has_start
      AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers x
                      WHERE x.partition_id = p.id AND x.consumer_group = r.consumer_group)
), weighted AS MATERIALIZED (
    SELECT x.lag,
           (CASE WHEN x.oldest < now() THEN floor(date_part('epoch', now() - x.oldest)) ELSE 0 END)::bigint AS age,
           x.pairs
    FROM (
        SELECT w.lag, w.oldest, w.n * ws.readers AS pairs FROM whole w JOIN weights ws ON ws.queue_id = w.queue_id
        UNION ALL
        SELECT GREATEST(c.last_seq - c.vacant_seqs, 0),
               CASE WHEN c.last_seq <= c.vacant_seqs THEN NULL
                    WHEN c.vacant_top = 0 THEN c.created_at
                    ELSE (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = c.id ORDER BY m.seq LIMIT 1) END,
               -1
        FROM cursors c WHERE NOT c.has_start
        UNION ALL
        SELECT c.lag, c.oldest, 1 FROM cursors c
        UNION ALL
        SELECT s.lag, s.oldest, 1 FROM started s
    ) x
)
SELECT h.kind::text AS kind, h.lag::bigint AS lag, h.pairs::bigint AS pairs
FROM (
    SELECT 'offset' AS kind, a.lag, sum(a.pairs) AS pairs FROM weighted a GROUP BY a.lag
    UNION ALL
    SELECT 'time', a.age, sum(a.pairs) FROM weighted a GROUP BY a.age
) h
WHERE h.pairs <> 0
ORDER BY 1, 2;
