-- name: SchemaTableCounts :many
-- Rows of every table of a schema, counted exactly (migration validation;
-- also run against the migration target).
SELECT c.relname::text AS table_name,
       (xpath('/row/n/text()',
              query_to_xml(format('SELECT count(*) AS n FROM %I.%I', n.nspname, c.relname), false, true, '')))[1]::text::bigint AS row_count
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = @schema_name::text AND c.relkind IN ('r', 'p')
ORDER BY 1;

-- name: ServerVersion :one
SELECT version()::text;
