-- The /api/v1/analytics/postgres-stats snapshot: PostgreSQL's own views,
-- limited to the queen schema.

-- name: PostgresDatabaseCache :one
SELECT current_database()::text AS database,
       COALESCE(blks_read, 0)::bigint AS disk_reads,
       COALESCE(blks_hit, 0)::bigint AS cache_hits
FROM pg_catalog.pg_stat_database WHERE datname = current_database();

-- name: PostgresTableCache :many
SELECT schemaname::text AS schema_name, relname::text AS table_name,
       COALESCE(heap_blks_read, 0)::bigint AS disk_reads, COALESCE(heap_blks_hit, 0)::bigint AS cache_hits
FROM pg_catalog.pg_statio_user_tables WHERE schemaname = 'queen'
ORDER BY relname;

-- name: PostgresIndexCache :many
SELECT schemaname::text AS schema_name, relname::text AS table_name, indexrelname::text AS index_name,
       COALESCE(idx_blks_read, 0)::bigint AS disk_reads, COALESCE(idx_blks_hit, 0)::bigint AS cache_hits
FROM pg_catalog.pg_statio_user_indexes WHERE schemaname = 'queen'
ORDER BY relname, indexrelname;

-- name: PostgresTableActivity :many
SELECT schemaname::text AS schema_name, relname::text AS table_name,
       COALESCE(n_live_tup, 0)::bigint AS live_tuples, COALESCE(n_dead_tup, 0)::bigint AS dead_tuples,
       COALESCE(n_tup_upd, 0)::bigint AS updates, COALESCE(n_tup_hot_upd, 0)::bigint AS hot_updates,
       last_vacuum::timestamptz AS last_vacuum, last_autovacuum::timestamptz AS last_autovacuum,
       COALESCE(autovacuum_count, 0)::bigint AS autovacuum_count,
       COALESCE(autoanalyze_count, 0)::bigint AS autoanalyze_count
FROM pg_catalog.pg_stat_user_tables WHERE schemaname = 'queen'
ORDER BY relname;

-- name: PostgresActiveQueries :many
-- Statements other than ours running for more than a second.
SELECT pid::integer AS pid,
       extract(epoch FROM now() - query_start)::float8 AS duration_seconds,
       COALESCE(state, '')::text AS state, left(COALESCE(query, ''), 200)::text AS query,
       COALESCE(wait_event_type, '')::text AS wait_event_type, COALESCE(wait_event, '')::text AS wait_event
FROM pg_catalog.pg_stat_activity
WHERE state IS NOT NULL AND state <> 'idle' AND pid <> pg_backend_pid()
  AND query_start < now() - interval '1 second'
ORDER BY query_start;

-- name: PostgresSharedBuffers :one
SELECT current_setting('shared_buffers')::text AS shared_buffers,
       pg_size_bytes(current_setting('shared_buffers'))::bigint AS shared_buffers_bytes;

-- name: PostgresTableSizes :many
SELECT c.relname::text AS table_name,
       pg_total_relation_size(c.oid)::bigint AS total_bytes,
       pg_relation_size(c.oid)::bigint AS table_bytes,
       pg_indexes_size(c.oid)::bigint AS index_bytes,
       pg_size_pretty(pg_total_relation_size(c.oid))::text AS total_pretty,
       pg_size_pretty(pg_relation_size(c.oid))::text AS table_pretty,
       pg_size_pretty(pg_indexes_size(c.oid))::text AS index_pretty
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'queen' AND c.relkind = 'r'
ORDER BY 2 DESC, 1;

-- name: AnalyzeStaleTables :many
-- The statistics watch (handlers/jobs): re-analyzes the queen tables whose
-- recorded statistics are far below what they hold, and returns their names
-- (see queen.analyze_stale_tables, migration 0023).
SELECT t::text AS table_name FROM queen.analyze_stale_tables() t;
