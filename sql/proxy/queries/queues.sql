-- ClustersToReconcile lists the clusters whose broker inventory and retained
-- bytes the proxy polls (every QUEEN_PROXY_RECONCILE_MS and
-- QUEEN_PROXY_STORAGE_REFRESH_MS): all but those being
-- deleted (the cluster or its tenant) and those on a dead cell, with what the
-- poll needs of their cell and the plan's caps (overrides are merged in Go).
-- name: ClustersToReconcile :many
SELECT c.id, c.slug, c.broker_tenant_uuid, c.limit_overrides,
       ce.base_url, ce.cell_secret,
       p.max_queues, p.max_partitions_per_queue, p.max_retained_bytes
FROM queen_proxy.clusters c
JOIN queen_proxy.tenants t ON t.id = c.tenant_id
JOIN queen_proxy.cells ce ON ce.id = c.cell_id
JOIN queen_proxy.plans p ON p.id = c.plan_id
WHERE c.status <> 'deleting' AND t.status <> 'deleting' AND ce.status <> 'dead'
ORDER BY c.id;

-- QueuesReplace makes the cache of a cluster's queues what its broker
-- reported: the queues named are upserted with their partition counts, the
-- live rows of any other queue are marked deleted.
-- name: QueuesReplace :one
WITH live AS (
    SELECT unnest(@names::text[]) AS name, unnest(@partitions::integer[]) AS partitions_count
), gone AS (
    UPDATE queen_proxy.queues q SET deleted_at = now()
    WHERE q.cluster_id = @cluster_id AND q.deleted_at IS NULL AND NOT (q.name = ANY(@names::text[]))
    RETURNING 1
), upserted AS (
    INSERT INTO queen_proxy.queues (cluster_id, name, partitions_count)
    SELECT @cluster_id, name, partitions_count FROM live
    ON CONFLICT (cluster_id, name) WHERE deleted_at IS NULL
    DO UPDATE SET partitions_count = EXCLUDED.partitions_count
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone)::bigint AS deleted, (SELECT count(*) FROM upserted)::bigint AS live;

-- QueuesOfCluster is what the last reconcile (or any proxy's) wrote of a
-- cluster's queues.
-- name: QueuesOfCluster :many
SELECT name, partitions_count FROM queen_proxy.queues
WHERE cluster_id = @cluster_id AND deleted_at IS NULL
ORDER BY name;
