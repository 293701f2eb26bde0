-- ApiKeyLookup finds a live key by the hash of the presented key, with the
-- whole context of its cluster, in one indexed query.
-- name: ApiKeyLookup :one
SELECT k.id AS key_id, k.scopes,
       c.id, c.slug, c.status, c.broker_tenant_uuid, c.limit_overrides,
       t.id AS tenant_id, t.status AS tenant_status,
       ce.id AS cell_id, ce.base_url, ce.cell_secret, ce.status AS cell_status,
       p.code AS plan_code, p.max_req_per_sec, p.req_burst, p.max_msgs_per_sec, p.msgs_burst,
       p.max_queues, p.max_partitions_per_queue, p.max_parked_pops, p.max_payload_bytes,
       p.max_batch_items, p.max_retained_bytes, p.max_retention_seconds, p.monthly_msgs_quota,
       p.features
FROM queen_proxy.api_keys k
JOIN queen_proxy.clusters c ON c.id = k.cluster_id
JOIN queen_proxy.tenants t ON t.id = c.tenant_id
JOIN queen_proxy.cells ce ON ce.id = c.cell_id
JOIN queen_proxy.plans p ON p.id = c.plan_id
WHERE k.key_hash = @key_hash AND k.revoked_at IS NULL;

-- ApiKeysTouch records that keys were used, for a batch of keys in one
-- statement (the proxy flushes the keys it saw every few seconds).
-- name: ApiKeysTouch :exec
UPDATE queen_proxy.api_keys SET last_used_at = now() WHERE id = ANY(@ids::uuid[]);

-- ApiKeysOfCluster lists a cluster's keys, live first, for the console.
-- name: ApiKeysOfCluster :many
SELECT k.id, k.name, k.scopes, k.created_at, k.last_used_at, k.revoked_at, u.email AS created_by
FROM queen_proxy.api_keys k
LEFT JOIN queen_proxy.users u ON u.id = k.created_by
WHERE k.cluster_id = @cluster_id
ORDER BY k.revoked_at IS NOT NULL, k.created_at DESC, k.id;

-- ApiKeyConsoleIssue stores a key the console generated, with its audit
-- rows.
-- name: ApiKeyConsoleIssue :one
SELECT queen_proxy.console_issue_api_key(@cluster_id, @actor, @name, @key_hash, @scopes::text[])::uuid AS id;

-- ApiKeyConsoleRevoke revokes a live key of the cluster, with its audit
-- rows; any other key is no_data_found.
-- name: ApiKeyConsoleRevoke :exec
SELECT queen_proxy.console_revoke_api_key(@cluster_id, @actor, @key_id);
