-- The statistics watch (handlers/jobs/statswatch.go, every second on each
-- broker).
--
-- The data plane's reads are planned once per connection and kept, and the
-- plans believe the statistics. When an ANALYZE (or a VACUUM that could not
-- truncate) catches a table empty while its pages are still allocated -
-- every queue deleted, or retention removed everything - pg_class keeps
-- reltuples 0, and until autovacuum's next round (a minute apart by
-- default, and only once enough rows changed) every plan made expects one
-- row of anything. With one row expected, a bitmap scan and a sort cost
-- less on paper than an ordered walk of an index: the claim-and-read read
-- and sorted the whole partition at each pop (65-83 ms with 30,000
-- messages), and the scan for pop candidates read every partition of every
-- queue (docs/operations.md, "PostgreSQL's statistics and the broker's plans").
--
-- This re-analyzes at once any table of the schema that the planner would
-- take for less than a quarter of what it holds. The planner's guess is the
-- density the last ANALYZE or VACUUM recorded (reltuples / relpages) times
-- the pages the table has now; what it holds is n_live_tup, which the
-- statistics system keeps current with every insert and delete (a busy
-- backend reports each second). That count can run up to twice the truth
-- for a moment (changes an ANALYZE counted and a backend reported after
-- it), hence a quarter and not a half. Small tables (under 1,000 rows) are
-- left alone: any plan of them is cheap. A table never analyzed (reltuples
-- -1) or recorded with no pages is left to the planner's guess from the row
-- width, which is sound. Tables the caller does not own are skipped
-- (ANALYZE would only warn). One broker at a time: a try-lock held to the
-- end of the transaction; another broker's call returns nothing. Returns
-- the names of the tables it analyzed; an ANALYZE makes every session plan
-- its statements on that table again.
CREATE FUNCTION queen.analyze_stale_tables() RETURNS SETOF text
LANGUAGE plpgsql
AS $$
DECLARE
    t record;
BEGIN
    IF NOT pg_try_advisory_xact_lock(8175552223618818353) THEN -- "quensta1"
        RETURN;
    END IF;
    FOR t IN
        SELECT c.oid, c.relname
        FROM pg_catalog.pg_class c
        JOIN pg_catalog.pg_stat_user_tables s ON s.relid = c.oid
        WHERE c.relnamespace = 'queen'::regnamespace AND c.relkind = 'r'
          AND pg_has_role(c.relowner, 'MEMBER')
          AND s.n_live_tup >= 1000
          AND c.reltuples >= 0 AND c.relpages > 0
          AND c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::bigint)
              < s.n_live_tup / 4.0
    LOOP
        EXECUTE format('ANALYZE queen.%I', t.relname);
        RETURN NEXT t.relname::text;
    END LOOP;
END
$$;
