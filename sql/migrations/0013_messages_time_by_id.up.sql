-- The created_at index of queen.messages cost every pushed row an index
-- insert (about 1.8 µs of PostgreSQL's CPU and 64 bytes of WAL per row,
-- docs/benchmarks.md, "Performance round 2: push"). Message ids are UUIDv7:
-- their first 48 bits are the Unix milliseconds at which the broker stored
-- the message, so the primary key is already in time order. The queries
-- that walked created_at walk the id instead, between bounds computed from
-- the time with a margin, and keep their created_at filter as the exact
-- test.
--
-- The margin covers the difference between the id's time (the storing
-- broker's clock, when it sent the insert) and created_at (the database's
-- clock when the transaction began): clock skew between hosts and the
-- length of the inserting transaction. A message outside it is still never
-- deleted early (the created_at filter stays); retention takes it up to
-- the excess late, and a time-filtered listing may leave it out.
DROP INDEX queen.messages_created_at_idx;

-- The smallest UUIDv7 of a Unix millisecond: the 48-bit time, then zeros;
-- times outside 48 bits are clamped; NULL for NULL (least and greatest
-- would skip it).
CREATE FUNCTION queen.uuid_v7_from_ms(ms numeric) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN ms IS NOT NULL THEN
        encode(substring(int8send(greatest(0, least(281474976710655, floor(ms)))::bigint) FROM 3)
               || decode('00000000000000000000', 'hex'), 'hex')::uuid
    END
$$;

-- An id at or below that of every message created at or after t (the
-- lowest possible one for NULL). STABLE as extract(epoch) is, which lets
-- PostgreSQL inline it.
CREATE FUNCTION queen.message_id_floor(t timestamptz) RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(queen.uuid_v7_from_ms(extract(epoch FROM t) * 1000 - 60000),
                    '00000000-0000-0000-0000-000000000000'::uuid)
$$;

-- An id above that of every message created before t (above every id for
-- NULL).
CREATE FUNCTION queen.message_id_ceiling(t timestamptz) RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(queen.uuid_v7_from_ms(extract(epoch FROM t) * 1000 + 60000),
                    'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid)
$$;

-- The SQL API took any UUID as a caller's messageId. A UUIDv4 there puts a
-- random time in the id (mostly centuries ahead): retention would never
-- reach the message. A given messageId must now be a UUIDv7 of the current
-- minute, like the ids the broker makes.
CREATE FUNCTION queen.sql_api_message_id(id uuid, what text) RETURNS uuid
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF id IS NOT NULL AND (substring(id::text FROM 15 FOR 1) <> '7'
        OR abs(('x' || substring(replace(id::text, '-', '') FROM 1 FOR 12))::bit(48)::bigint
               - extract(epoch FROM clock_timestamp()) * 1000) > 60000) THEN
        RAISE EXCEPTION 'queen: % must be a UUIDv7 of the current time (within a minute)', what
            USING ERRCODE = '22023';
    END IF;
    RETURN id;
END
$$;
REVOKE ALL ON FUNCTION queen.sql_api_message_id(uuid, text) FROM PUBLIC;

-- queen.sql_api_push (migration 0011) checks a given messageId there. Only
-- that one statement of its body changes, so the body is edited in place
-- rather than repeated here; its owner, SECURITY DEFINER and grants stay.
DO $$
DECLARE
    body text;
    was  text := 'v_mid := array_append(v_mid, s::uuid);';
BEGIN
    SELECT p.prosrc INTO body FROM pg_proc p WHERE p.oid = 'queen.sql_api_push(jsonb)'::regprocedure;
    IF position(was IN body) = 0 THEN
        RAISE EXCEPTION 'queen.sql_api_push no longer contains %', was;
    END IF;
    body := replace(body, was,
        'v_mid := array_append(v_mid, queen.sql_api_message_id(s::uuid, what || ''.messageId''));');
    EXECUTE format('CREATE OR REPLACE FUNCTION queen.sql_api_push(p_items jsonb) RETURNS jsonb '
                   'LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS %L', body);
END
$$;
