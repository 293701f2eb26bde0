-- The proxy's own state ("pxdb"): who the customers are, which cluster of
-- which cell serves them, their plans, keys and the audit trail. Schema
-- queen_proxy is created here too (sql/migrate creates it before the history
-- table), so that sqlc, which reads this folder, knows it.
CREATE SCHEMA IF NOT EXISTS queen_proxy;

--
-- pgcrypto supplies bcrypt (crypt/gen_salt) and random bytes for the keys
-- the SQL control plane mints. It is a trusted extension: the database owner
-- may install it.
CREATE EXTENSION IF NOT EXISTS pgcrypto WITH SCHEMA public;

-- A DNS label: tenant, cluster and cell slugs end up in host names.
CREATE DOMAIN queen_proxy.slug AS text
    CHECK (VALUE ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$');

CREATE TABLE queen_proxy.tenants (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    slug       queen_proxy.slug NOT NULL UNIQUE,
    name       text NOT NULL CHECK (btrim(name) <> ''),
    status     text NOT NULL DEFAULT 'active'
               CHECK (status IN ('active', 'grace', 'suspended', 'deleting')),
    created_at timestamptz NOT NULL DEFAULT now(),
    -- Set by delete_tenant: the row stays (audit rows point at it) with its
    -- slug and name replaced.
    erased_at  timestamptz
);

CREATE TABLE queen_proxy.users (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id     uuid NOT NULL REFERENCES queen_proxy.tenants (id) ON DELETE CASCADE,
    -- Globally unique: a login names one user.
    email         text NOT NULL UNIQUE CHECK (email = lower(email) AND email ~ '^[^@\s]+@[^@\s]+$'),
    password_hash text CHECK (password_hash ~ '^\$2[aby]\$[0-9]{2}\$'),
    name          text,
    is_operator   boolean NOT NULL DEFAULT false,
    last_login_at timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX users_tenant ON queen_proxy.users (tenant_id);
CREATE INDEX users_operators ON queen_proxy.users (id) WHERE is_operator;

CREATE TABLE queen_proxy.identities (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id     uuid NOT NULL REFERENCES queen_proxy.users (id) ON DELETE CASCADE,
    provider    text NOT NULL CHECK (provider IN ('local', 'google', 'github')),
    provider_id text NOT NULL CHECK (provider_id <> ''),
    email       text,
    verified    boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (provider, provider_id)
);
CREATE INDEX identities_user ON queen_proxy.identities (user_id);

-- Limits: NULL is unlimited, a set value is positive. features: a missing
-- key means false.
CREATE TABLE queen_proxy.plans (
    id                       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    code                     text NOT NULL UNIQUE CHECK (code ~ '^[a-z][a-z0-9-]*$'),
    cell_class               text NOT NULL DEFAULT 'shared' CHECK (cell_class IN ('shared', 'dedicated')),
    max_req_per_sec          integer CHECK (max_req_per_sec > 0),
    req_burst                integer CHECK (req_burst > 0),
    max_msgs_per_sec         integer CHECK (max_msgs_per_sec > 0),
    msgs_burst               integer CHECK (msgs_burst > 0),
    max_queues               integer CHECK (max_queues > 0),
    max_partitions_per_queue integer CHECK (max_partitions_per_queue > 0),
    max_parked_pops          integer CHECK (max_parked_pops > 0),
    max_payload_bytes        integer CHECK (max_payload_bytes > 0),
    max_batch_items          integer CHECK (max_batch_items > 0),
    max_retained_bytes       bigint CHECK (max_retained_bytes > 0),
    max_retention_seconds    integer CHECK (max_retention_seconds > 0),
    monthly_msgs_quota       bigint CHECK (monthly_msgs_quota > 0),
    features                 jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(features) = 'object'),
    created_at               timestamptz NOT NULL DEFAULT now()
);

INSERT INTO queen_proxy.plans (code, cell_class, max_req_per_sec, req_burst, max_msgs_per_sec, msgs_burst,
    max_queues, max_partitions_per_queue, max_parked_pops, max_payload_bytes, max_batch_items,
    max_retained_bytes, max_retention_seconds, features) VALUES
    ('free', 'shared', 5, 25, 20, 100, 20, 8, 50, 262144, 1000,
        1073741824, 604800, '{"kv": true, "timers": true, "ephemeral": true}'),
    ('dev', 'shared', 10, 50, 40, 200, 50, 16, 150, 524288, 2000,
        3221225472, 1209600, '{"kv": true, "timers": true, "ephemeral": true}'),
    ('pro', 'shared', 50, 200, 200, 800, 200, 32, 1000, 1048576, 5000,
        21474836480, 2592000, '{"kv": true, "timers": true, "ephemeral": true, "streams": true, "traces": true}'),
    ('dedicated-s', 'dedicated', 200, 800, 600, 2000, 1000, 64, 5000, 4194304, 10000,
        214748364800, 7776000, '{"kv": true, "timers": true, "ephemeral": true, "streams": true, "traces": true}');

-- A cell is one broker cluster with its own PostgreSQL. Operators insert
-- cells by hand; no function creates one.
CREATE TABLE queen_proxy.cells (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    slug           queen_proxy.slug NOT NULL UNIQUE,
    region         text NOT NULL DEFAULT '',
    -- The forwarding target: scheme, host, port and an optional path prefix.
    base_url       text NOT NULL CHECK (base_url ~ '^https?://[^/?#]+(/[^?#]*)?$'),
    class          text NOT NULL DEFAULT 'shared' CHECK (class IN ('shared', 'dedicated')),
    capacity_slots integer NOT NULL DEFAULT 0 CHECK (capacity_slots >= 0),
    used_slots     integer NOT NULL DEFAULT 0 CHECK (used_slots >= 0),
    broker_version text,
    status         text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'draining', 'dead')),
    -- The bearer the proxy presents to the broker (a JWT the broker accepts
    -- when its JWT auth is on); NULL sends no Authorization header.
    cell_secret    text,
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE queen_proxy.clusters (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id          uuid NOT NULL REFERENCES queen_proxy.tenants (id) ON DELETE CASCADE,
    cell_id            uuid NOT NULL REFERENCES queen_proxy.cells (id) ON DELETE RESTRICT,
    plan_id            uuid NOT NULL REFERENCES queen_proxy.plans (id) ON DELETE RESTRICT,
    -- Globally unique: it is the subdomain.
    slug               queen_proxy.slug NOT NULL UNIQUE,
    -- The tenant the broker sees in x-queen-tenant: its own value, never the
    -- tenant id, so that two clusters of one tenant on one cell stay apart.
    broker_tenant_uuid uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    status             text NOT NULL DEFAULT 'active'
                       CHECK (status IN ('active', 'push_blocked', 'suspended', 'deleting')),
    limit_overrides    jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(limit_overrides) = 'object'),
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX clusters_tenant ON queen_proxy.clusters (tenant_id);
CREATE INDEX clusters_cell ON queen_proxy.clusters (cell_id);

CREATE TABLE queen_proxy.cluster_roles (
    user_id    uuid NOT NULL REFERENCES queen_proxy.users (id) ON DELETE CASCADE,
    cluster_id uuid NOT NULL REFERENCES queen_proxy.clusters (id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('admin', 'producer', 'consumer', 'viewer')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, cluster_id)
);
CREATE INDEX cluster_roles_cluster ON queen_proxy.cluster_roles (cluster_id);

-- Keys are stored as the lowercase hex SHA-256 of the whole key string; the
-- plaintext is shown once and never stored.
CREATE TABLE queen_proxy.api_keys (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    cluster_id   uuid NOT NULL REFERENCES queen_proxy.clusters (id) ON DELETE CASCADE,
    name         text NOT NULL CHECK (btrim(name) <> ''),
    key_hash     text NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
    scopes       text[] NOT NULL CHECK (cardinality(scopes) > 0
                     AND scopes <@ ARRAY['produce', 'consume', 'admin', 'read']::text[]),
    created_by   uuid REFERENCES queen_proxy.users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_keys_cluster ON queen_proxy.api_keys (cluster_id);

-- Session JWTs revoked before their expiry (logout), by jti.
CREATE TABLE queen_proxy.revoked_tokens (
    jti        text PRIMARY KEY CHECK (btrim(jti) <> ''),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX revoked_tokens_expires ON queen_proxy.revoked_tokens (expires_at);

-- A cache of each cluster's queues, for the queue and partition caps.
CREATE TABLE queen_proxy.queues (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    cluster_id       uuid NOT NULL REFERENCES queen_proxy.clusters (id) ON DELETE CASCADE,
    name             text NOT NULL,
    partitions_count integer NOT NULL DEFAULT 0 CHECK (partitions_count >= 0),
    created_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz
);
CREATE UNIQUE INDEX queues_cluster_name ON queen_proxy.queues (cluster_id, name) WHERE deleted_at IS NULL;

-- Usage per cluster, minute and class of operation. Flushes add to a row.
CREATE TABLE queen_proxy.usage_minutes (
    cluster_id uuid NOT NULL REFERENCES queen_proxy.clusters (id) ON DELETE CASCADE,
    minute     timestamptz NOT NULL CHECK (minute = date_trunc('minute', minute)),
    op_class   text NOT NULL CHECK (op_class IN ('push', 'delivery', 'txn', 'configure', 'read')),
    msgs       bigint NOT NULL DEFAULT 0 CHECK (msgs >= 0),
    reqs       bigint NOT NULL DEFAULT 0 CHECK (reqs >= 0),
    bytes_in   bigint NOT NULL DEFAULT 0 CHECK (bytes_in >= 0),
    bytes_out  bigint NOT NULL DEFAULT 0 CHECK (bytes_out >= 0),
    PRIMARY KEY (cluster_id, minute, op_class)
);

-- Closed UTC days, recomputed from usage_minutes by rollup_usage_days.
CREATE TABLE queen_proxy.usage_days (
    cluster_id uuid NOT NULL REFERENCES queen_proxy.clusters (id) ON DELETE CASCADE,
    day        date NOT NULL,
    op_class   text NOT NULL CHECK (op_class IN ('push', 'delivery', 'txn', 'configure', 'read')),
    msgs       bigint NOT NULL DEFAULT 0 CHECK (msgs >= 0),
    reqs       bigint NOT NULL DEFAULT 0 CHECK (reqs >= 0),
    bytes_in   bigint NOT NULL DEFAULT 0 CHECK (bytes_in >= 0),
    bytes_out  bigint NOT NULL DEFAULT 0 CHECK (bytes_out >= 0),
    PRIMARY KEY (cluster_id, day, op_class)
);

-- Events for systems outside the proxy (billing, mail). The proxy only
-- inserts.
CREATE TABLE queen_proxy.outbox (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text NOT NULL CHECK (btrim(kind) <> ''),
    payload     jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    consumed_at timestamptz
);
CREATE INDEX outbox_pending ON queen_proxy.outbox (id) WHERE consumed_at IS NULL;

-- The audit trail: one row per control-plane change. Append-only, enforced
-- here and not by convention (DECISIONS §6): the triggers below refuse
-- UPDATE, DELETE and TRUNCATE for every role, the owner and superusers
-- included, and the role that runs these migrations (the proxy's runtime
-- role) keeps only INSERT and SELECT. id gives the order of the trail.
--
-- cluster_id has no foreign key: an audit row outlives the cluster it names.
-- Rows never hold an email or a name, only ids, so erasing a tenant
-- (delete_tenant) anonymises its users and leaves the trail whole.
CREATE TABLE queen_proxy.operations (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES queen_proxy.tenants (id),
    cluster_id uuid,
    actor      text NOT NULL CHECK (actor IN ('user', 'api_key', 'control_plane', 'system')),
    actor_id   uuid,
    action     text NOT NULL CHECK (btrim(action) <> ''),
    target     text,
    meta       jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX operations_tenant_at ON queen_proxy.operations (tenant_id, at DESC);
CREATE INDEX operations_cluster_at ON queen_proxy.operations (cluster_id, at DESC) WHERE cluster_id IS NOT NULL;

CREATE FUNCTION queen_proxy.operations_append_only() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'queen_proxy.operations is append-only: % is refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

-- Statement triggers fire even when no row matches, so an UPDATE with an
-- empty WHERE is refused as loudly as one that hits rows.
CREATE TRIGGER operations_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON queen_proxy.operations
    FOR EACH STATEMENT EXECUTE FUNCTION queen_proxy.operations_append_only();

-- The owner keeps INSERT, SELECT and REFERENCES; nobody is granted the rest.
REVOKE ALL ON queen_proxy.operations FROM PUBLIC;
REVOKE UPDATE, DELETE, TRUNCATE ON queen_proxy.operations FROM CURRENT_USER;
