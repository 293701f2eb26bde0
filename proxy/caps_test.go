package proxy_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	pxdbq "github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/proxy"
	"github.com/queenforgo/queen/proxy/inventory"
)

// newInventory is the proxy's inventory on pxdb p; the tests run its passes
// themselves (Reconcile) unless they Start its loops. The storage refresh
// runs every interval too, or every storage[0] when given.
func newInventory(t testing.TB, p *pxdb, interval time.Duration, log *syncBuffer, storage ...time.Duration) *inventory.Inventory {
	t.Helper()
	cfg := inventory.Config{Pool: p.pool, Interval: interval, StorageInterval: interval, DBTimeout: 5 * time.Second,
		UpstreamTimeout: 10 * time.Second, TenantHeader: true}
	if len(storage) > 0 {
		cfg.StorageInterval = storage[0]
	}
	if log != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
	}
	return inventory.New(cfg)
}

// with puts the inventory (and, when not nil, a log) in a proxy's config.
func with(inv *inventory.Inventory, enforce bool, log *syncBuffer) proxyOptions {
	return func(c *proxy.Config) {
		c.Inventory = inv
		c.Enforce = enforce
		if log != nil {
			c.Logger = slog.New(slog.NewTextHandler(log, nil))
		}
	}
}

// syncBuffer is a log the proxy writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// to is a push of one item to queue and partition ("" for none).
func to(queue, partition string) map[string]any {
	item := map[string]any{"queue": queue, "payload": map[string]any{"n": 1}}
	if partition != "" {
		item["partition"] = partition
	}
	return map[string]any{"items": []any{item}}
}

// cached is the queues cache pxdb holds for a cluster: name -> partitions.
func (p *pxdb) cached(cluster uuid.UUID) map[string]int {
	p.t.Helper()
	rows, err := pxdbq.New(p.pool).QueuesOfCluster(p.t.Context(), cluster)
	require.NoError(p.t, err)
	out := map[string]int{}
	for _, r := range rows {
		out[r.Name] = int(r.PartitionsCount)
	}
	return out
}

// The queue and partition caps, enforced: pushes, transactions and
// configure; what the broker refused does not count; the reconcile reads
// what was created behind the proxy and fills the pxdb cache.
func TestQueueAndPartitionCaps(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	cluster := p.cluster("acme", "pro", "cell-1")
	p.exec(`SELECT queen_proxy.set_limit_override($1, '{"max_queues": 3, "max_partitions_per_queue": 2}')`, cluster)
	key := p.key(cluster, "produce", "admin", "read")
	inv := newInventory(t, p, time.Hour, nil)
	require.NoError(t, inv.Reconcile(t.Context()))
	base := startProxy(t, p, with(inv, true, nil))
	host := "acme.proxy.test"
	pushTo := func(body any) answer { return call(t, base, host, "POST", "/api/v1/push", key, body) }

	require.Equal(t, http.StatusCreated, pushTo(to("q1", "a")).status)
	require.Equal(t, http.StatusCreated, pushTo(to("q1", "")).status, "no partition is Default")
	a := pushTo(to("q1", "b"))
	refused(t, a, http.StatusForbidden, "quota_exceeded")
	require.Contains(t, a.json(t)["error"], `partition "b"`)
	require.Equal(t, http.StatusCreated, pushTo(to("q1", "Default")).status, "an existing partition is not new")
	two := map[string]any{"items": []any{
		map[string]any{"queue": "q2", "partition": "x", "payload": 1},
		map[string]any{"queue": "q2", "partition": "y", "payload": 2},
		map[string]any{"queue": "q2", "partition": "z", "payload": 3},
	}}
	refused(t, pushTo(two), http.StatusForbidden, "quota_exceeded")
	require.Equal(t, http.StatusCreated, pushTo(map[string]any{"items": two["items"].([]any)[:2]}).status)

	// A push the broker refuses (a name it does not accept) takes no place.
	require.Equal(t, http.StatusBadRequest, pushTo(to("bad name", "")).status)
	// Configure creates a queue: the third and last.
	require.Equal(t, http.StatusOK, call(t, base, host, "POST", "/api/v1/configure", key, map[string]any{"queue": "q3"}).status)
	a = call(t, base, host, "POST", "/api/v1/configure", key, map[string]any{"queue": "q4"})
	refused(t, a, http.StatusForbidden, "quota_exceeded")
	require.Contains(t, a.json(t)["error"], `queue "q4"`)
	refused(t, pushTo(to("q4", "")), http.StatusForbidden, "quota_exceeded")

	// Transactions: each push op is admitted, acks are not.
	txn := func(ops ...any) answer {
		return call(t, base, host, "POST", "/api/v1/transaction", key, map[string]any{"operations": ops})
	}
	refused(t, txn(map[string]any{"type": "push", "items": to("q4", "")["items"]}), http.StatusForbidden, "quota_exceeded")
	refused(t, txn(map[string]any{"type": "push", "queue": "q3", "partition": "p1", "payload": 1},
		map[string]any{"type": "push", "queue": "q3", "partition": "p2", "payload": 1}), http.StatusForbidden, "quota_exceeded")
	a = txn(map[string]any{"type": "push", "queue": "q3", "partition": "p1", "payload": 1},
		map[string]any{"type": "push", "items": to("q1", "a")["items"]})
	require.Equal(t, http.StatusOK, a.status, string(a.body))

	// Queues made behind the proxy count at the next reconcile; the cache in
	// pxdb is the broker's inventory.
	raw, err := http.Post(broker+"/api/v1/configure", "application/json", strings.NewReader(`{"queue":"behind"}`))
	require.NoError(t, err)
	raw.Body.Close()
	require.Equal(t, http.StatusOK, raw.StatusCode)
	require.NoError(t, inv.Reconcile(t.Context()))
	require.Equal(t, map[string]int{"q1": 2, "q2": 2, "q3": 2, "behind": 1}, p.cached(cluster))
	refused(t, call(t, base, host, "POST", "/api/v1/configure", key, map[string]any{"queue": "q3b"}), http.StatusForbidden, "quota_exceeded")

	// Deleted queues leave the cache and free their places.
	require.Equal(t, http.StatusOK, call(t, base, host, "DELETE", "/api/v1/resources/queues/behind", key, nil).status)
	require.Equal(t, http.StatusOK, call(t, base, host, "DELETE", "/api/v1/resources/queues/q3", key, nil).status)
	require.NoError(t, inv.Reconcile(t.Context()))
	require.NotContains(t, p.cached(cluster), "behind")
	require.Equal(t, 1, p.count(`SELECT count(*) FROM queen_proxy.queues WHERE cluster_id = $1 AND name = 'behind' AND deleted_at IS NOT NULL`, cluster))
	require.Equal(t, http.StatusCreated, pushTo(to("q4", "")).status)

	// A queue deleted or partitions cleared through the proxy free their
	// places at once.
	refused(t, pushTo(to("q5", "")), http.StatusForbidden, "quota_exceeded")
	require.Equal(t, http.StatusOK, call(t, base, host, "DELETE", "/api/v1/resources/queues/q4", key, nil).status)
	require.Equal(t, http.StatusCreated, pushTo(to("q5", "")).status)
	refused(t, pushTo(to("q1", "c")), http.StatusForbidden, "quota_exceeded")
	require.Equal(t, http.StatusOK, call(t, base, host, "DELETE", "/api/v1/queues/q1/clear?partition=a", key, nil).status)
	require.Equal(t, http.StatusCreated, pushTo(to("q1", "c")).status)
	refused(t, pushTo(to("q1", "d")), http.StatusForbidden, "quota_exceeded")
	require.Equal(t, http.StatusOK, call(t, base, host, "DELETE", "/api/v1/queues/q1/clear", key, nil).status)
	require.Equal(t, http.StatusCreated, pushTo(map[string]any{"items": []any{
		map[string]any{"queue": "q1", "partition": "d", "payload": 1},
		map[string]any{"queue": "q1", "partition": "e", "payload": 2},
	}}).status)
}

func (p *pxdb) count(sql string, args ...any) int {
	p.t.Helper()
	var n int
	require.NoError(p.t, p.pool.QueryRow(p.t.Context(), sql, args...).Scan(&n), sql)
	return n
}

// In shadow mode the caps and the retention ceiling are logged and counted,
// and the request goes through.
func TestCapsShadowMode(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	cluster := p.cluster("acme", "free", "cell-1") // retention ceiling 7 days
	p.exec(`SELECT queen_proxy.set_limit_override($1, '{"max_queues": 1, "max_partitions_per_queue": 1}')`, cluster)
	key := p.key(cluster, "produce", "admin", "read")
	inv := newInventory(t, p, time.Hour, nil)
	require.NoError(t, inv.Reconcile(t.Context()))
	log := &syncBuffer{}
	base := startProxy(t, p, with(inv, false, log))
	host := "acme.proxy.test"

	require.Equal(t, http.StatusCreated, call(t, base, host, "POST", "/api/v1/push", key, to("q1", "")).status)
	require.Equal(t, http.StatusCreated, call(t, base, host, "POST", "/api/v1/push", key, to("q1", "other")).status)
	require.Equal(t, http.StatusCreated, call(t, base, host, "POST", "/api/v1/push", key, to("q2", "")).status)
	a := call(t, base, host, "POST", "/api/v1/configure", key,
		map[string]any{"queue": "q1", "options": map[string]any{"retentionSeconds": 8 * 86400}})
	require.Equal(t, http.StatusOK, a.status, string(a.body))
	require.EqualValues(t, 8*86400, a.json(t)["options"].(map[string]any)["retentionSeconds"], "forwarded as asked")

	out := log.String()
	require.Contains(t, out, `msg=would_block cluster=acme limit="partition \"other\" would be partition 2 of queue \"q1\", over the limit of 1"`)
	require.Contains(t, out, `limit="queue \"q2\" would be queue 2 of this cluster, over the limit of 1"`)
	require.Contains(t, out, `limit="retentionSeconds 691200 is over the plan's retention ceiling of 604800 seconds"`)
	metrics := string(call(t, base, host, "GET", "/metrics/prometheus", "", nil).body)
	require.Contains(t, metrics, `queen_proxy_denials_total{code="quota_exceeded",shadow="true"} 3`)
}

// The retention ceiling on configure: above it is refused, never clamped;
// at it, or 0 (no retention), passes.
func TestRetentionCeiling(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	cluster := p.cluster("acme", "free", "cell-1") // 7 days, no override
	key := p.key(cluster, "admin", "read")
	base := startProxy(t, p, with(newInventory(t, p, time.Hour, nil), true, nil))
	host := "acme.proxy.test"
	configure := func(options map[string]any) answer {
		return call(t, base, host, "POST", "/api/v1/configure", key, map[string]any{"queue": "q", "options": options})
	}

	a := configure(map[string]any{"retentionSeconds": 604801})
	refused(t, a, http.StatusForbidden, "quota_exceeded")
	require.Contains(t, a.json(t)["error"], "retentionSeconds 604801")
	refused(t, configure(map[string]any{"completedRetentionSeconds": 1e15}), http.StatusForbidden, "quota_exceeded")
	require.Equal(t, http.StatusNotFound, call(t, base, host, "GET", "/api/v1/resources/queues/q", key, nil).status,
		"a refused configure reaches nothing")
	for _, ok := range []map[string]any{{"retentionSeconds": 604800, "completedRetentionSeconds": 3600}, {"retentionSeconds": 0}, nil} {
		a = configure(ok)
		require.Equal(t, http.StatusOK, a.status, string(a.body))
	}

	p.exec(`SELECT queen_proxy.set_limit_override($1, '{"max_retention_seconds": 700000}')`, cluster)
	require.Eventually(t, func() bool {
		return configure(map[string]any{"retentionSeconds": 604801}).status == http.StatusOK
	}, test5s, test10ms, "an override raises the ceiling (through NOTIFY)")
}

// randomPayload is n characters that PostgreSQL cannot compress much.
func randomPayload(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n/2)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// The storage quota: set by the storage refresh that finds the cluster over
// its max_retained_bytes, enforced in shadow mode, on pushes and
// transactions only, and lifted by the first refresh under the limit. The
// inventory pass is an hour away: the flag moves on the refresh alone.
func TestStorageQuota(t *testing.T) {
	t.Parallel()
	broker := startBroker(t, "QUEEN_TENANCY_HEADER=true", "QUEEN_KV_TRUSTED_PROXY=true")
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	acme := p.cluster("acme", "pro", "cell-1")
	globex := p.cluster("globex", "pro", "cell-1")
	p.exec(`SELECT queen_proxy.set_limit_override($1, '{"max_retained_bytes": 4000}')`, acme)
	p.exec(`SELECT queen_proxy.set_limit_override($1, '{"max_retained_bytes": 4000}')`, globex)
	ka := p.key(acme, "produce", "consume", "admin", "read")
	kg := p.key(globex, "produce", "read")
	log := &syncBuffer{}
	inv := newInventory(t, p, time.Hour, log, 50*time.Millisecond)
	inv.Start()
	t.Cleanup(inv.Stop)
	base := startProxy(t, p, with(inv, false, log)) // shadow mode: the flag holds anyway
	host := "acme.proxy.test"

	items := []any{}
	for range 3 {
		items = append(items, map[string]any{"queue": "big", "payload": randomPayload(t, 1500)})
	}
	require.Equal(t, http.StatusCreated, call(t, base, host, "POST", "/api/v1/push", ka, map[string]any{"items": items}).status)
	require.Eventually(t, func() bool {
		return call(t, base, host, "POST", "/api/v1/push", ka, to("small", "")).status == http.StatusForbidden
	}, test5s, test10ms, "a storage refresh finds 4500 bytes over 4000")
	refused(t, call(t, base, host, "POST", "/api/v1/push", ka, to("small", "")), http.StatusForbidden, "storage_quota_exceeded")
	txn := map[string]any{"operations": []any{map[string]any{"type": "push", "queue": "small", "payload": 1}}}
	refused(t, call(t, base, host, "POST", "/api/v1/transaction", ka, txn), http.StatusForbidden, "storage_quota_exceeded")
	require.Contains(t, log.String(), "storage quota exceeded")
	require.Equal(t, http.StatusCreated, call(t, base, "globex.proxy.test", "POST", "/api/v1/push", kg, to("big", "")).status,
		"another tenant on the cell is not over")

	// Reads, pops and deletes go on; the first reconcile under the limit
	// lifts the flag.
	a := call(t, base, host, "GET", "/api/v1/pop/queue/big?batch=1", ka, nil)
	require.Equal(t, http.StatusOK, a.status, string(a.body))
	require.Equal(t, http.StatusOK, call(t, base, host, "DELETE", "/api/v1/resources/queues/big", ka, nil).status)
	// The next storage read waits 20 times the last read's duration
	// (inventory's storageSpacing): a read slowed to 300 ms by a loaded CI
	// machine puts the lift 6 s away, past test5s.
	require.Eventually(t, func() bool {
		return call(t, base, host, "POST", "/api/v1/push", ka, to("small", "")).status == http.StatusCreated
	}, 30*time.Second, test10ms, "the first storage read under the limit lifts the flag")
	require.Contains(t, log.String(), "storage quota lifted")
}
