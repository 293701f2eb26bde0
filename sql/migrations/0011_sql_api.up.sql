-- The SQL API (docs/sql-api.md): push from inside the caller's own
-- transaction (a transactional outbox: the message exists if and only if the
-- caller's transaction commits), and a targeted pop, with the argument and
-- result shapes of the reference broker's push_messages_v2/_v3 and
-- pop_specific_batch. The bodies are ours and follow the broker's own write
-- path (handlers/broker insert.go and claim.go):
--
--   * a partition's rows are locked in the broker's lock order, (queue id,
--     partition name in byte order), and stay locked until the caller
--     commits: sequence order is commit order, as for every other pusher;
--   * sequence numbers are taken only for messages actually stored, so
--     last_seq - vacant_seqs stays the stored count (migration 0008);
--   * last_message_at is stamped again when the caller commits (below), so a
--     long caller transaction cannot commit a partition under a pop
--     watermark (migration 0003);
--   * one NOTIFY queen_events per tenant and batch of queue names, which
--     every broker's listener applies (handlers/pgevents).
--
-- The functions run as their owner (SECURITY DEFINER, search_path pinned):
-- callers need EXECUTE on them, nothing on the tables. EXECUTE goes to the
-- role queen_sql_api only, never to PUBLIC.

-- The role. Roles belong to the cluster, not the database: another database
-- of the cluster may have created it already, even concurrently. A broker
-- role without CREATEROLE cannot create it; the migration then goes on
-- without it and the functions stay callable by their owner alone until an
-- administrator creates the role and runs the grants at the end of this
-- file (docs/sql-api.md says how).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'queen_sql_api') THEN
        BEGIN
            CREATE ROLE queen_sql_api NOLOGIN;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN
                NULL;
            WHEN insufficient_privilege THEN
                RAISE WARNING 'queen: role queen_sql_api not created (no CREATEROLE); the SQL API is callable by the schema owner only until it exists (docs/sql-api.md)';
        END;
    END IF;
END
$$;

-- Partitions a SQL push wrote to in the still-open transaction. Each row
-- queues one commit-time stamp (queen.sql_api_stamp) and is gone again when
-- the transaction ends, committed or not.
CREATE TABLE IF NOT EXISTS queen.sql_api_pushed (
    partition_id uuid PRIMARY KEY
);

-- Runs at COMMIT (a deferred constraint trigger): the partition's newest
-- message time becomes the commit time. Pop watermarks trail the scans by a
-- margin sized for the broker's short transactions; an outbox transaction
-- may stay open longer, and a last_message_at from its start would land
-- below a watermark that advanced meanwhile, hiding the partition from
-- wildcard pops until its next push.
CREATE OR REPLACE FUNCTION queen.sql_api_stamp() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE queen.partitions SET last_message_at = clock_timestamp() WHERE id = NEW.partition_id;
    DELETE FROM queen.sql_api_pushed WHERE partition_id = NEW.partition_id;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS sql_api_stamp ON queen.sql_api_pushed;
CREATE CONSTRAINT TRIGGER sql_api_stamp
AFTER INSERT ON queen.sql_api_pushed
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION queen.sql_api_stamp();

-- A UUIDv7 (RFC 9562) like the broker's message ids: 48 bits of Unix
-- milliseconds over a random UUIDv4 whose version nibble becomes 7. Message
-- order is the sequence number, so ids only need to be unique and roughly
-- time-ordered.
CREATE OR REPLACE FUNCTION queen.sql_api_uuidv7() RETURNS uuid
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

-- A tenant argument: absent, JSON null or "" is the default tenant;
-- otherwise a UUID in its 36-character form, any case, white space around
-- it ignored: the x-queen-tenant rule (docs/tenancy.md).
CREATE OR REPLACE FUNCTION queen.sql_api_tenant(v jsonb, what text) RETURNS uuid
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s text;
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN '00000000-0000-0000-0000-000000000001';
    END IF;
    IF jsonb_typeof(v) <> 'string' THEN
        RAISE EXCEPTION 'queen: %.tenant must be a string', what USING ERRCODE = '22023';
    END IF;
    s := btrim(v #>> '{}', E' \t\n\r\f\v');
    IF s = '' THEN
        RETURN '00000000-0000-0000-0000-000000000001';
    END IF;
    IF s !~ '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$' THEN
        RAISE EXCEPTION 'queen: %.tenant must be a UUID', what USING ERRCODE = '22023';
    END IF;
    RETURN s::uuid;
END
$$;

-- A string field of an item: NULL when absent, JSON null or "".
CREATE OR REPLACE FUNCTION queen.sql_api_text(v jsonb, what text) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(v) <> 'string' THEN
        RAISE EXCEPTION 'queen: % must be a string', what USING ERRCODE = '22023';
    END IF;
    RETURN NULLIF(v #>> '{}', '');
END
$$;

-- A queue or partition name as the HTTP API accepts it (openapi.yaml, Name).
CREATE OR REPLACE FUNCTION queen.sql_api_check_name(name text, what text) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF name IS NULL OR length(name) > 255
       OR name !~ '^([A-Za-z0-9_-][A-Za-z0-9_.-]*|[.][A-Za-z0-9_-][A-Za-z0-9_.-]*|[.][.][A-Za-z0-9_.-]+)$' THEN
        RAISE EXCEPTION 'queen: % must be 1-255 characters of [A-Za-z0-9_.-], not "." or ".."', what
            USING ERRCODE = '22023';
    END IF;
    RETURN name;
END
$$;

-- NOTIFY queen_events {"v":1,"type":"ready","tenant":...,"queues":[...]}
-- for the queues of one tenant, split so no payload passes 7900 bytes (the
-- contract of handlers/pgevents; no "from": the sender is not a broker).
-- The notifications are delivered when the caller commits, and not at all
-- when it rolls back; PostgreSQL folds identical ones of one transaction.
CREATE OR REPLACE FUNCTION queen.sql_api_notify_ready(tenant uuid, queues text[]) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    head text := '{"v":1,"type":"ready","tenant":"' || tenant::text || '","queues":[';
    body text := '';
    q text;
    enc text;
BEGIN
    FOREACH q IN ARRAY queues LOOP
        enc := to_jsonb(q)::text;
        IF body <> '' AND octet_length(head) + octet_length(body) + 1 + octet_length(enc) + 2 > 7900 THEN
            PERFORM pg_notify('queen_events', head || body || ']}');
            body := '';
        END IF;
        body := CASE WHEN body = '' THEN enc ELSE body || ',' || enc END;
    END LOOP;
    IF body <> '' THEN
        PERFORM pg_notify('queen_events', head || body || ']}');
    END IF;
END
$$;

-- Fails closed when an entry point is open to PUBLIC: a default ACL (NULL,
-- which means EXECUTE for PUBLIC) is what a restore with --no-privileges
-- (the dashboard's pg_dump | pg_restore migration) leaves, and these
-- functions run with their owner's rights.
CREATE OR REPLACE FUNCTION queen.sql_api_guard() RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'queen'::regnamespace
          AND p.proname IN ('push_messages_v2', 'push_messages_v3', 'pop_specific_batch')
          AND (p.proacl IS NULL
               OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE'))) THEN
        RAISE EXCEPTION 'queen: the SQL API is executable by PUBLIC; it refuses to run until EXECUTE is revoked from PUBLIC (docs/sql-api.md, Privileges)'
            USING ERRCODE = '42501';
    END IF;
END
$$;

-- The push. p_items is a JSON array of
--   {"queue", "partition"?, "payload"?, "transactionId"?, "traceId"?,
--    "producerSub"?, "messageId"?, "tenant"?}
-- and the answer {"items": [one result per item, in order],
-- "partition_updates": [per partition written, its newest message]}.
CREATE OR REPLACE FUNCTION queen.sql_api_push(p_items jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n int;
    i int;
    it jsonb;
    what text;
    s text;
    v_tenant uuid[] := '{}';
    v_queue text[] := '{}';
    v_part text[] := '{}';
    v_tx text[] := '{}';
    v_trace uuid[] := '{}';
    v_payload jsonb[] := '{}';
    v_sub text[] := '{}';
    v_mid uuid[] := '{}';
    v_encrypted text;
    v_items jsonb;
    v_updates jsonb;
    v_ready jsonb;
    r record;
BEGIN
    PERFORM queen.sql_api_guard();
    IF p_items IS NULL OR jsonb_typeof(p_items) <> 'array' THEN
        RAISE EXCEPTION 'queen: the items must be a JSON array' USING ERRCODE = '22023';
    END IF;
    n := jsonb_array_length(p_items);
    IF n = 0 THEN
        RETURN '{"items":[],"partition_updates":[]}'::jsonb;
    END IF;

    -- Every item is checked before anything is written: a bad one raises
    -- and the caller's transaction decides what happens next.
    FOR i IN 0 .. n - 1 LOOP
        it := p_items -> i;
        what := 'items[' || i || ']';
        IF jsonb_typeof(it) <> 'object' THEN
            RAISE EXCEPTION 'queen: % must be an object', what USING ERRCODE = '22023';
        END IF;
        v_tenant := array_append(v_tenant, queen.sql_api_tenant(it -> 'tenant', what));
        v_queue := array_append(v_queue, queen.sql_api_check_name(queen.sql_api_text(it -> 'queue', what || '.queue'), what || '.queue'));
        s := queen.sql_api_text(it -> 'partition', what || '.partition');
        v_part := array_append(v_part, CASE WHEN s IS NULL THEN 'Default'
                                 ELSE queen.sql_api_check_name(s, what || '.partition') END);
        s := queen.sql_api_text(it -> 'transactionId', what || '.transactionId');
        IF length(s) > 255 THEN
            RAISE EXCEPTION 'queen: %.transactionId must be at most 255 characters', what USING ERRCODE = '22023';
        END IF;
        v_tx := array_append(v_tx, COALESCE(s, gen_random_uuid()::text));
        s := queen.sql_api_text(it -> 'traceId', what || '.traceId');
        IF s IS NOT NULL AND s !~ '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$' THEN
            RAISE EXCEPTION 'queen: %.traceId must be a UUID', what USING ERRCODE = '22023';
        END IF;
        v_trace := array_append(v_trace, s::uuid);
        s := queen.sql_api_text(it -> 'messageId', what || '.messageId');
        IF s IS NOT NULL AND s !~ '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$' THEN
            RAISE EXCEPTION 'queen: %.messageId must be a UUID', what USING ERRCODE = '22023';
        END IF;
        v_mid := array_append(v_mid, s::uuid);
        v_payload := array_append(v_payload, COALESCE(it -> 'payload', 'null'::jsonb));
        v_sub := array_append(v_sub, queen.sql_api_text(it -> 'producerSub', what || '.producerSub'));
    END LOOP;

    -- Queues are created with the defaults on first use, as an HTTP push
    -- creates them, but inside the caller's transaction.
    INSERT INTO queen.queues (tenant_id, name, namespace, task)
    SELECT DISTINCT t, q, split_part(q, '.', 1),
           CASE WHEN strpos(q, '.') > 0 THEN split_part(q, '.', 2) ELSE '' END
    FROM unnest(v_tenant, v_queue) AS u(t, q)
    ORDER BY t, q
    ON CONFLICT (tenant_id, name) DO NOTHING;

    -- The broker encrypts with a key this function does not have: a queue
    -- that asks for encryption is refused rather than given plaintext.
    SELECT string_agg(DISTINCT q.name, ', ') INTO v_encrypted
    FROM unnest(v_tenant, v_queue) AS u(t, name)
    JOIN queen.queues q ON q.tenant_id = u.t AND q.name = u.name
    WHERE q.encryption_enabled;
    IF v_encrypted IS NOT NULL THEN
        RAISE EXCEPTION 'queen: queue % has encryption enabled; the SQL API cannot encrypt, push it through the HTTP API', v_encrypted
            USING ERRCODE = '0A000';
    END IF;

    -- Create the partitions and lock every one written to, in the broker's
    -- lock order, until the caller's transaction ends (the no-op update is
    -- what takes the lock on a partition that exists).
    INSERT INTO queen.partitions AS p (queue_id, name)
    SELECT d.id, d.part FROM (
        SELECT DISTINCT q.id, u.part
        FROM unnest(v_tenant, v_queue, v_part) AS u(t, name, part)
        JOIN queen.queues q ON q.tenant_id = u.t AND q.name = u.name
    ) AS d
    ORDER BY d.id, d.part COLLATE "C"
    ON CONFLICT (queue_id, name) DO UPDATE SET last_seq = p.last_seq;

    -- Everything is locked: this statement's snapshot sees every message
    -- of those partitions (no other writer can add one before the caller
    -- commits), so a transactionId stored already is found here, and only
    -- the new messages take sequence numbers.
    WITH given AS (
        SELECT (u.o - 1)::int AS idx, u.t, u.name, u.part, u.tx, u.trace, u.payload, u.sub, u.mid
        FROM unnest(v_tenant, v_queue, v_part, v_tx, v_trace, v_payload, v_sub, v_mid)
             WITH ORDINALITY AS u(t, name, part, tx, trace, payload, sub, mid, o)
    ), placed AS (
        SELECT g.*, p.id AS partition_id, p.last_seq,
               (SELECT m.id FROM queen.messages m
                 WHERE m.partition_id = p.id AND m.transaction_id = g.tx) AS stored_id,
               row_number() OVER (PARTITION BY p.id, g.tx ORDER BY g.idx) AS dup_rank
        FROM given g
        JOIN queen.queues q ON q.tenant_id = g.t AND q.name = g.name
        JOIN queen.partitions p ON p.queue_id = q.id AND p.name = g.part
    ), fresh AS MATERIALIZED (
        SELECT pl.idx, pl.t, pl.name, pl.tx, pl.trace, pl.payload, pl.sub, pl.partition_id,
               COALESCE(pl.mid, queen.sql_api_uuidv7()) AS id,
               pl.last_seq + row_number() OVER (PARTITION BY pl.partition_id ORDER BY pl.idx) AS seq
        FROM placed pl
        WHERE pl.stored_id IS NULL AND pl.dup_rank = 1
    ), inserted AS (
        INSERT INTO queen.messages (id, partition_id, seq, transaction_id, trace_id, payload, is_encrypted, producer_sub, created_at)
        SELECT f.id, f.partition_id, f.seq, f.tx, f.trace, f.payload, false, f.sub, clock_timestamp()
        FROM fresh f
        RETURNING id, partition_id, seq, created_at
    ), counted AS (
        UPDATE queen.partitions p
        SET last_seq = p.last_seq + c.added, last_message_at = clock_timestamp()
        FROM (SELECT f.partition_id, count(*) AS added FROM fresh f GROUP BY f.partition_id) AS c
        WHERE p.id = c.partition_id
    ), marked AS (
        INSERT INTO queen.sql_api_pushed (partition_id)
        SELECT DISTINCT f.partition_id FROM fresh f
        ON CONFLICT DO NOTHING
    )
    SELECT
        (SELECT jsonb_agg(jsonb_build_object(
                    'index', pl.idx,
                    'status', CASE WHEN mine.id IS NULL THEN 'duplicate' ELSE 'queued' END,
                    'transaction_id', pl.tx,
                    'transactionId', pl.tx,
                    'message_id', COALESCE(mine.id, pl.stored_id, first.id)::text,
                    'messageId', COALESCE(mine.id, pl.stored_id, first.id)::text,
                    'partition_id', pl.partition_id::text,
                    'trace_id', pl.trace::text,
                    'queueName', pl.name,
                    'queue', pl.name,
                    'partition', pl.part) ORDER BY pl.idx)
           FROM placed pl
           LEFT JOIN fresh mine ON mine.idx = pl.idx
           LEFT JOIN fresh first ON first.partition_id = pl.partition_id AND first.tx = pl.tx),
        (SELECT COALESCE(jsonb_agg(jsonb_build_object(
                    'queue_name', newest.name,
                    'partition_id', newest.partition_id::text,
                    'last_message_id', newest.id::text,
                    'last_message_created_at',
                        to_char(newest.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))), '[]'::jsonb)
           FROM (SELECT DISTINCT ON (ins.partition_id) ins.partition_id, ins.id, ins.created_at, f.name
                 FROM inserted ins JOIN fresh f ON f.id = ins.id
                 ORDER BY ins.partition_id, ins.seq DESC) AS newest),
        (SELECT jsonb_object_agg(rq.t::text, rq.queues)
           FROM (SELECT f.t, to_jsonb(array_agg(DISTINCT f.name ORDER BY f.name)) AS queues
                 FROM fresh f GROUP BY f.t) AS rq)
    INTO v_items, v_updates, v_ready;

    IF v_ready IS NOT NULL THEN
        FOR r IN SELECT e.key, e.value FROM jsonb_each(v_ready) AS e ORDER BY e.key LOOP
            PERFORM queen.sql_api_notify_ready(r.key::uuid,
                ARRAY(SELECT jsonb_array_elements_text(r.value)));
        END LOOP;
    END IF;

    RETURN jsonb_build_object('items', v_items, 'partition_updates', v_updates);
END
$$;

-- The reference's two push entry points. Both push as above; the two
-- booleans are accepted for the reference's signature and change nothing
-- (duplicates are always detected, capacity never checked, as on HTTP).
-- v2 answers the result array, v3 the object {"items", "partition_updates"}.
CREATE OR REPLACE FUNCTION queen.push_messages_v2(p_items jsonb, p_check_duplicates boolean DEFAULT true, p_check_capacity boolean DEFAULT true)
RETURNS jsonb
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT queen.sql_api_push(p_items) -> 'items'
$$;

CREATE OR REPLACE FUNCTION queen.push_messages_v3(p_items jsonb, p_check_duplicates boolean DEFAULT true, p_check_capacity boolean DEFAULT true)
RETURNS jsonb
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT queen.sql_api_push(p_items)
$$;

-- A whole number field of a pop request: absent or JSON null is dflt.
CREATE OR REPLACE FUNCTION queen.sql_api_int(v jsonb, what text, dflt int, lo int, hi int) RETURNS int
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s text;
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN dflt;
    END IF;
    s := v #>> '{}';
    IF jsonb_typeof(v) NOT IN ('number', 'string') OR s !~ '^-?[0-9]{1,9}$' OR s::int < lo OR s::int > hi THEN
        RAISE EXCEPTION 'queen: % must be a whole number from % to %', what, lo, hi USING ERRCODE = '22023';
    END IF;
    RETURN s::int;
END
$$;

-- One request of pop_specific_batch: a targeted pop of one partition, as the
-- broker's claim does it (handlers/broker claim.go, the query
-- PartitionConsumerClaimAndRead): the same try-lock gate on (partition,
-- group), the same cursor row and lease, so acks, lease extensions and
-- later pops through HTTP treat what it took like a broker's pop.
CREATE OR REPLACE FUNCTION queen.sql_api_pop_one(req jsonb, what text, paused boolean) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_tenant uuid;
    v_queue text;
    v_part text;
    v_group text;
    v_batch int;
    v_lease_seconds int;
    v_lease text;
    v_mode text;
    v_from_text text;
    v_from timestamptz;
    v_auto boolean := false;
    v_start timestamptz;
    q record;
    v_pid uuid;
    v_last_at timestamptz;
    v_cursor bigint;
    v_retry int;
    v_msgs jsonb;
    v_n int;
    v_last_seq bigint;
    v_last_id uuid;
BEGIN
    IF jsonb_typeof(req) <> 'object' THEN
        RAISE EXCEPTION 'queen: % must be an object', what USING ERRCODE = '22023';
    END IF;
    v_tenant := queen.sql_api_tenant(req -> 'tenant', what);
    v_queue := queen.sql_api_check_name(queen.sql_api_text(req -> 'queue_name', what || '.queue_name'), what || '.queue_name');
    v_part := COALESCE(queen.sql_api_text(req -> 'partition_name', what || '.partition_name'), 'Default');
    PERFORM queen.sql_api_check_name(v_part, what || '.partition_name');
    v_group := COALESCE(queen.sql_api_text(req -> 'consumer_group', what || '.consumer_group'), '__QUEUE_MODE__');
    PERFORM queen.sql_api_check_name(v_group, what || '.consumer_group');
    v_batch := queen.sql_api_int(req -> 'batch_size', what || '.batch_size', 10, 1, 10000);
    v_lease_seconds := queen.sql_api_int(req -> 'lease_seconds', what || '.lease_seconds', 0, 0, 2147483647);
    v_lease := COALESCE(queen.sql_api_text(req -> 'worker_id', what || '.worker_id'), queen.sql_api_uuidv7()::text);
    IF length(v_lease) > 255 THEN
        RAISE EXCEPTION 'queen: %.worker_id must be at most 255 characters', what USING ERRCODE = '22023';
    END IF;
    v_mode := COALESCE(queen.sql_api_text(req -> 'sub_mode', what || '.sub_mode'), '');
    v_from_text := queen.sql_api_text(req -> 'sub_from', what || '.sub_from');
    IF v_from_text IS NOT NULL AND v_from_text <> 'now' THEN
        BEGIN
            v_from := v_from_text::timestamptz;
        EXCEPTION WHEN others THEN
            RAISE EXCEPTION 'queen: %.sub_from must be "now" or a timestamp', what USING ERRCODE = '22023';
        END;
    END IF;
    IF req ? 'auto_ack' AND jsonb_typeof(req -> 'auto_ack') <> 'null' THEN
        IF jsonb_typeof(req -> 'auto_ack') <> 'boolean' THEN
            RAISE EXCEPTION 'queen: %.auto_ack must be a boolean', what USING ERRCODE = '22023';
        END IF;
        v_auto := (req -> 'auto_ack')::boolean;
    END IF;

    -- Pop maintenance answers every pop empty, as on HTTP.
    IF paused THEN
        RETURN jsonb_build_object('success', false, 'error', 'pop_maintenance', 'paused', true, 'messages', '[]'::jsonb);
    END IF;

    SELECT qq.id, qq.lease_time, qq.window_buffer, qq.delayed_processing, qq.encryption_enabled
    INTO q
    FROM queen.queues qq WHERE qq.tenant_id = v_tenant AND qq.name = v_queue;
    IF FOUND THEN
        SELECT p.id, p.last_message_at INTO v_pid, v_last_at
        FROM queen.partitions p WHERE p.queue_id = q.id AND p.name = v_part;
    END IF;
    IF v_pid IS NULL THEN
        RETURN jsonb_build_object('success', false, 'error', 'partition_not_found', 'messages', '[]'::jsonb);
    END IF;
    -- Payloads of such a queue may be sealed with the broker's key, which
    -- SQL does not have.
    IF q.encryption_enabled THEN
        RETURN jsonb_build_object('success', false, 'error', 'encryption_enabled', 'messages', '[]'::jsonb);
    END IF;
    IF q.window_buffer > 0 AND v_last_at IS NOT NULL
       AND v_last_at > v_now - make_interval(secs => q.window_buffer) THEN
        RETURN jsonb_build_object('success', true, 'queue', v_queue, 'partition', v_part,
            'partitionId', v_pid::text, 'leaseId', '', 'consumerGroup', v_group,
            'messages', '[]'::jsonb, 'windowBufferActive', true);
    END IF;

    -- Where a named group's new cursor starts: a stored start point
    -- (partition-specific first), else this request's, stored; the first
    -- decision sticks (the broker's subscriptionStart).
    IF v_group <> '__QUEUE_MODE__' THEN
        FOR i IN 1 .. 2 LOOP
            SELECT m.subscription_timestamp INTO v_start
            FROM queen.consumer_groups_metadata m
            WHERE m.tenant_id = v_tenant AND m.consumer_group = v_group AND m.queue_name = v_queue
              AND m.partition_name IN (v_part, '')
            ORDER BY m.partition_name DESC
            LIMIT 1;
            EXIT WHEN FOUND OR i = 2;
            IF v_from IS NOT NULL THEN
                INSERT INTO queen.consumer_groups_metadata
                    (tenant_id, consumer_group, queue_name, partition_name, subscription_mode, subscription_timestamp)
                VALUES (v_tenant, v_group, v_queue, v_part, 'timestamp', v_from)
                ON CONFLICT DO NOTHING;
            ELSIF v_from_text = 'now' OR v_mode IN ('new', 'new-only') THEN
                INSERT INTO queen.consumer_groups_metadata
                    (tenant_id, consumer_group, queue_name, partition_name, subscription_mode, subscription_timestamp)
                VALUES (v_tenant, v_group, v_queue, v_part, 'new', v_now)
                ON CONFLICT DO NOTHING;
            ELSE
                EXIT;
            END IF;
        END LOOP;
    END IF;

    IF v_lease_seconds = 0 THEN
        v_lease_seconds := CASE WHEN q.lease_time > 0 THEN q.lease_time ELSE 60 END;
    END IF;
    WITH gate AS (
        SELECT pg_try_advisory_xact_lock(hashtextextended(format('%s/%s', v_pid, v_group), 12648430)) AS open
    ), claim AS (
        INSERT INTO queen.partition_consumers AS pc (
            partition_id, consumer_group, last_seq, lease_id, lease_acquired_at, lease_expires_at,
            batch_size, acked_count)
        SELECT v_pid, v_group,
               CASE WHEN v_start IS NULL THEN 0
                    ELSE (SELECT COALESCE(max(s.seq), 0) FROM queen.messages s
                          WHERE s.partition_id = v_pid AND s.created_at <= v_start)
               END,
               v_lease, v_now, v_now + make_interval(secs => v_lease_seconds), v_batch, 0
        FROM gate WHERE gate.open
        ON CONFLICT (partition_id, consumer_group) DO UPDATE SET
            lease_id = EXCLUDED.lease_id,
            lease_acquired_at = EXCLUDED.lease_acquired_at,
            lease_expires_at = EXCLUDED.lease_expires_at,
            batch_size = EXCLUDED.batch_size,
            acked_count = 0
        WHERE pc.lease_expires_at IS NULL OR pc.lease_expires_at <= v_now
        RETURNING pc.last_seq, pc.batch_retry_count
    )
    SELECT claim.last_seq, claim.batch_retry_count INTO v_cursor, v_retry FROM claim;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('success', false, 'error', 'lease_held', 'messages', '[]'::jsonb);
    END IF;

    SELECT COALESCE(jsonb_agg(jsonb_build_object(
               'id', s.id::text,
               'transactionId', s.transaction_id,
               'traceId', s.trace_id::text,
               'data', s.payload,
               'producerSub', s.producer_sub,
               'createdAt', to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
               'partitionId', v_pid::text,
               'partition', v_part,
               'queue', v_queue,
               'leaseId', CASE WHEN v_auto THEN '' ELSE v_lease END,
               'consumerGroup', v_group,
               'retryCount', v_retry) ORDER BY s.seq), '[]'::jsonb),
           count(*), max(s.seq), (array_agg(s.id ORDER BY s.seq DESC))[1]
    INTO v_msgs, v_n, v_last_seq, v_last_id
    FROM (SELECT m.id, m.seq, m.transaction_id, m.trace_id, m.payload, m.producer_sub, m.created_at
          FROM queen.messages m
          WHERE m.partition_id = v_pid AND m.seq > v_cursor
            AND (q.delayed_processing = 0 OR m.created_at <= v_now - make_interval(secs => q.delayed_processing))
          ORDER BY m.seq
          LIMIT v_batch) AS s;

    IF v_n = 0 THEN
        UPDATE queen.partition_consumers
        SET lease_id = NULL, lease_acquired_at = NULL, lease_expires_at = NULL, batch_size = 0, acked_count = 0
        WHERE partition_id = v_pid AND consumer_group = v_group AND lease_id = v_lease;
    ELSIF v_auto THEN
        UPDATE queen.partition_consumers
        SET last_seq = GREATEST(last_seq, v_last_seq),
            last_consumed_id = v_last_id,
            last_consumed_at = v_now,
            total_messages_consumed = total_messages_consumed + v_n,
            total_batches_consumed = total_batches_consumed + 1,
            batch_retry_count = 0,
            lease_id = NULL, lease_acquired_at = NULL, lease_expires_at = NULL, batch_size = 0, acked_count = 0
        WHERE partition_id = v_pid AND consumer_group = v_group AND lease_id = v_lease;
    ELSIF v_n < v_batch THEN
        UPDATE queen.partition_consumers SET batch_size = v_n
        WHERE partition_id = v_pid AND consumer_group = v_group AND lease_id = v_lease;
    END IF;

    RETURN jsonb_build_object('success', true, 'queue', v_queue, 'partition', v_part,
        'partitionId', v_pid::text, 'leaseId', CASE WHEN v_auto THEN '' ELSE v_lease END,
        'consumerGroup', v_group, 'messages', v_msgs);
END
$$;

-- The reference's targeted pop: p_requests is a JSON array of
--   {"idx"?, "queue_name", "partition_name"?, "consumer_group"?,
--    "batch_size"?, "lease_seconds"?, "worker_id"?, "sub_mode"?,
--    "sub_from"?, "auto_ack"?, "tenant"?}
-- and the answer one {"idx", "result"} per request, in the order given
-- (idx is the request's own, else its position). The requests are
-- claimed in (queue, partition) order, so two callers claiming the same
-- partitions cannot deadlock.
CREATE OR REPLACE FUNCTION queen.pop_specific_batch(p_requests jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_paused boolean;
    r record;
    v_pos int[] := '{}';
    v_res jsonb[] := '{}';
BEGIN
    PERFORM queen.sql_api_guard();
    IF p_requests IS NULL OR jsonb_typeof(p_requests) <> 'array' THEN
        RAISE EXCEPTION 'queen: the requests must be a JSON array' USING ERRCODE = '22023';
    END IF;
    SELECT COALESCE(s.value -> 'enabled' = 'true'::jsonb, false) INTO v_paused
    FROM queen.system_state s WHERE s.key = 'pop_maintenance_mode';
    FOR r IN
        SELECT e.value AS req, (e.o - 1)::int AS pos
        FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS e(value, o)
        ORDER BY e.value ->> 'tenant', e.value ->> 'queue_name', e.value ->> 'partition_name', e.o
    LOOP
        v_pos := array_append(v_pos, r.pos);
        v_res := array_append(v_res, jsonb_build_object(
            'idx', CASE WHEN jsonb_typeof(r.req -> 'idx') = 'number' THEN r.req -> 'idx' ELSE to_jsonb(r.pos) END,
            'result', queen.sql_api_pop_one(r.req, 'requests[' || r.pos || ']', COALESCE(v_paused, false))));
    END LOOP;
    RETURN COALESCE((SELECT jsonb_agg(u.res ORDER BY u.pos) FROM unnest(v_pos, v_res) AS u(pos, res)), '[]'::jsonb);
END
$$;

-- Callers get the three entry points and nothing else: the helpers above
-- and the tables stay the owner's.
REVOKE ALL ON FUNCTION queen.push_messages_v2(jsonb, boolean, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.push_messages_v3(jsonb, boolean, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.pop_specific_batch(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.sql_api_push(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.sql_api_pop_one(jsonb, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.sql_api_stamp() FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.sql_api_uuidv7() FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.sql_api_tenant(jsonb, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.sql_api_text(jsonb, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.sql_api_check_name(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.sql_api_notify_ready(uuid, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.sql_api_int(jsonb, text, int, int, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION queen.sql_api_guard() FROM PUBLIC;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'queen_sql_api') THEN
        GRANT USAGE ON SCHEMA queen TO queen_sql_api;
        GRANT EXECUTE ON FUNCTION queen.push_messages_v2(jsonb, boolean, boolean) TO queen_sql_api;
        GRANT EXECUTE ON FUNCTION queen.push_messages_v3(jsonb, boolean, boolean) TO queen_sql_api;
        GRANT EXECUTE ON FUNCTION queen.pop_specific_batch(jsonb) TO queen_sql_api;
    END IF;
END
$$;
