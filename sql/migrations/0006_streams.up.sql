-- Streams: the state of the streaming SDKs' queries (JS, Python and Go
-- `streams`), written by POST /streams/v1/cycle in the same transaction as
-- the sink pushes and the source ack. Schema and table names follow the
-- reference (operators' SQL reads them); columns are ours.
CREATE SCHEMA IF NOT EXISTS queen_streams;

-- One row per registered query. name is the user-facing queryId, unique per
-- tenant (every row belongs to the default tenant until tenancy is on).
-- config_hash identifies the operator chain whose state the rows below hold.
CREATE TABLE queen_streams.queries (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id    uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001',
    name         text NOT NULL CHECK (name <> ''),
    source_queue text NOT NULL,
    sink_queue   text,
    config_hash  text NOT NULL CHECK (config_hash <> ''),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX queries_tenant_name_uk ON queen_streams.queries (tenant_id, name);

-- Operator state, sharded by the source partition whose lease the writing
-- worker holds. partition_id deliberately has no foreign key to
-- queen.partitions: deleting a queue must not silently drop query state.
CREATE TABLE queen_streams.state (
    query_id     uuid NOT NULL REFERENCES queen_streams.queries (id) ON DELETE CASCADE,
    partition_id uuid NOT NULL,
    key          text NOT NULL,
    value        jsonb NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (query_id, partition_id, key)
);
CREATE INDEX state_updated_at_idx ON queen_streams.state (updated_at);

-- Grants: the broker's own role only, never PUBLIC. The reference grants
-- these tables to PUBLIC "because the broker connects as one role", which
-- lets any role that can connect to the database read and rewrite stream
-- definitions and state behind the HTTP layer's back (SECURITY-REQUIREMENTS
-- STR-1). The broker applies migrations at boot with its own role, so
-- CURRENT_USER here is that role; it owns the objects anyway, and the
-- explicit grant documents the intent. The REVOKEs undo anything that
-- ALTER DEFAULT PRIVILEGES may have handed to PUBLIC.
REVOKE ALL ON SCHEMA queen_streams FROM PUBLIC;
REVOKE ALL ON queen_streams.queries, queen_streams.state FROM PUBLIC;
GRANT USAGE ON SCHEMA queen_streams TO CURRENT_USER;
GRANT SELECT, INSERT, UPDATE, DELETE ON queen_streams.queries, queen_streams.state TO CURRENT_USER;
