-- Partitions deleted per queue and minute, for /api/v1/analytics/queue-ops.
-- Triggers count them, so every way a partition goes (queue delete, a
-- cleanup job, SQL by hand) is counted, in the transaction that deletes it.
-- Their rows in queue_lag_metrics belong to no broker: hostname '', port 0,
-- pid 0 (brokers always write a hostname).
ALTER TABLE queen.queue_lag_metrics ADD COLUMN partitions_deleted bigint NOT NULL DEFAULT 0;

CREATE FUNCTION queen.partitions_deleted_add(queue text, n bigint) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO queen.queue_lag_metrics AS m (bucket, queue_name, hostname, port, pid, partitions_deleted)
    VALUES (date_trunc('minute', now()), queue, '', 0, 0, n)
    ON CONFLICT (bucket, queue_name, hostname, port, pid)
    DO UPDATE SET partitions_deleted = m.partitions_deleted + EXCLUDED.partitions_deleted
$$;

-- A queue's delete counts its partitions under its name, before the cascade
-- removes them: by then the queue row is gone and the partitions' trigger
-- can no longer name it (the reference counted them under "__orphaned__").
CREATE FUNCTION queen.queues_count_partitions_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    SELECT count(*) INTO n FROM queen.partitions WHERE queue_id = OLD.id;
    IF n > 0 THEN
        PERFORM queen.partitions_deleted_add(OLD.name, n);
    END IF;
    RETURN OLD;
END
$$;

CREATE TRIGGER queues_count_partitions_deleted
BEFORE DELETE ON queen.queues
FOR EACH ROW EXECUTE FUNCTION queen.queues_count_partitions_deleted();

-- Partitions deleted on their own, once per statement. Those of a queue
-- being deleted find no queue row here and were counted above.
CREATE FUNCTION queen.partitions_count_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM queen.partitions_deleted_add(q.name, count(*))
    FROM deleted_partitions g
    JOIN queen.queues q ON q.id = g.queue_id
    GROUP BY q.name
    ORDER BY q.name;
    RETURN NULL;
END
$$;

CREATE TRIGGER partitions_count_deleted
AFTER DELETE ON queen.partitions
REFERENCING OLD TABLE AS deleted_partitions
FOR EACH STATEMENT EXECUTE FUNCTION queen.partitions_count_deleted();
