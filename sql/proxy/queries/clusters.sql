-- ClusterBySlug returns what the proxy needs to serve a cluster named by
-- the Host header: its status merged later with its tenant's, its cell, and
-- its plan's limits and overrides. An erased tenant's clusters are gone.
-- name: ClusterBySlug :one
SELECT c.id, c.slug, c.status, c.broker_tenant_uuid, c.limit_overrides,
       t.id AS tenant_id, t.status AS tenant_status,
       ce.id AS cell_id, ce.base_url, ce.cell_secret, ce.status AS cell_status,
       p.code AS plan_code, p.max_req_per_sec, p.req_burst, p.max_msgs_per_sec, p.msgs_burst,
       p.max_queues, p.max_partitions_per_queue, p.max_parked_pops, p.max_payload_bytes,
       p.max_batch_items, p.max_retained_bytes, p.max_retention_seconds, p.monthly_msgs_quota,
       p.features
FROM queen_proxy.clusters c
JOIN queen_proxy.tenants t ON t.id = c.tenant_id
JOIN queen_proxy.cells ce ON ce.id = c.cell_id
JOIN queen_proxy.plans p ON p.id = c.plan_id
WHERE c.slug = @slug;

-- ClusterByID is ClusterBySlug by id (x-queen-act-cluster may name a
-- cluster either way).
-- name: ClusterByID :one
SELECT c.id, c.slug, c.status, c.broker_tenant_uuid, c.limit_overrides,
       t.id AS tenant_id, t.status AS tenant_status,
       ce.id AS cell_id, ce.base_url, ce.cell_secret, ce.status AS cell_status,
       p.code AS plan_code, p.max_req_per_sec, p.req_burst, p.max_msgs_per_sec, p.msgs_burst,
       p.max_queues, p.max_partitions_per_queue, p.max_parked_pops, p.max_payload_bytes,
       p.max_batch_items, p.max_retained_bytes, p.max_retention_seconds, p.monthly_msgs_quota,
       p.features
FROM queen_proxy.clusters c
JOIN queen_proxy.tenants t ON t.id = c.tenant_id
JOIN queen_proxy.cells ce ON ce.id = c.cell_id
JOIN queen_proxy.plans p ON p.id = c.plan_id
WHERE c.id = @id;

-- ClustersOfUser lists the clusters a user has a role on, for /auth/me.
-- name: ClustersOfUser :many
SELECT c.id, c.slug, r.role, t.slug AS tenant_slug, t.id AS tenant_id, c.status,
       t.status AS tenant_status, ce.slug AS cell_slug
FROM queen_proxy.cluster_roles r
JOIN queen_proxy.clusters c ON c.id = r.cluster_id
JOIN queen_proxy.tenants t ON t.id = c.tenant_id
JOIN queen_proxy.cells ce ON ce.id = c.cell_id
WHERE r.user_id = @user_id
ORDER BY t.slug, c.slug;

-- ClustersAll lists every cluster, for a live operator's /auth/me (an
-- operator is admin everywhere).
-- name: ClustersAll :many
SELECT c.id, c.slug, t.slug AS tenant_slug, t.id AS tenant_id, c.status,
       t.status AS tenant_status, ce.slug AS cell_slug
FROM queen_proxy.clusters c
JOIN queen_proxy.tenants t ON t.id = c.tenant_id
JOIN queen_proxy.cells ce ON ce.id = c.cell_id
ORDER BY t.slug, c.slug;

-- ClusterMonthMsgs is the messages counted this UTC month and the
-- effective monthly quota (0: unlimited), for the console.
-- name: ClusterMonthMsgs :one
SELECT queen_proxy.cluster_month_msgs(@cluster_id, (now() AT TIME ZONE 'UTC')::date)::bigint AS msgs,
       coalesce(queen_proxy.cluster_monthly_quota(@cluster_id), 0)::bigint AS quota;
