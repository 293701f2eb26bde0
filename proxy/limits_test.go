package proxy_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy"
)

func TestRateLimits(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	enforced := p.cluster("acme", "pro", "cell-1")
	shadowed := p.cluster("globex", "pro", "cell-1")
	for _, c := range []any{enforced, shadowed} {
		p.exec(`SELECT queen_proxy.set_limit_override($1, '{"max_req_per_sec": 1, "req_burst": 1, "max_msgs_per_sec": 5, "msgs_burst": 5}')`, c)
	}
	on := startProxy(t, p)
	off := startProxy(t, p, func(c *proxy.Config) { c.Enforce = false })

	key := p.key(enforced, "read", "produce")
	require.Equal(t, http.StatusOK, call(t, on, "acme.proxy.test", "GET", "/api/v1/resources/queues", key, nil).status)
	a := call(t, on, "acme.proxy.test", "GET", "/api/v1/resources/queues", key, nil)
	refused(t, a, http.StatusTooManyRequests, "rate_limited")
	secs, err := strconv.Atoi(a.header.Get("Retry-After"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, secs, 1)

	// Shadow mode lets the same traffic through.
	key = p.key(shadowed, "read", "produce")
	for range 3 {
		require.Equal(t, http.StatusOK, call(t, off, "globex.proxy.test", "GET", "/api/v1/resources/queues", key, nil).status)
	}
	require.Equal(t, http.StatusCreated, call(t, off, "globex.proxy.test", "POST", "/api/v1/push", key, push("q", 20)).status,
		"20 messages over a bucket of 5 pass in shadow mode")
	metrics := call(t, off, "globex.proxy.test", "GET", "/metrics/prometheus", "", nil)
	require.Contains(t, string(metrics.body), `queen_proxy_denials_total{code="rate_limited",shadow="true"}`)
}

// Size caps hold in shadow mode too: the body, the batch, one item's payload.
func TestSizeCaps(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	cluster := p.cluster("acme", "free", "cell-1") // 1000 items, 256 KiB payloads
	key := p.key(cluster, "produce")
	base := startProxy(t, p, func(c *proxy.Config) { c.Enforce = false; c.MaxBodyBytes = 1 << 20 })
	host := "acme.proxy.test"

	refused(t, call(t, base, host, "POST", "/api/v1/push", key, push("q", 1001)), http.StatusRequestEntityTooLarge, "payload_too_large")
	big := map[string]any{"items": []any{
		map[string]any{"queue": "q", "payload": "small"},
		map[string]any{"queue": "q", "payload": strings.Repeat("x", 300<<10)},
	}}
	a := call(t, base, host, "POST", "/api/v1/push", key, big)
	refused(t, a, http.StatusRequestEntityTooLarge, "payload_too_large")
	require.Contains(t, a.json(t)["error"], "item 1")
	huge := map[string]any{"items": []any{map[string]any{"queue": "q", "payload": strings.Repeat("x", 2<<20)}}}
	refused(t, call(t, base, host, "POST", "/api/v1/push", key, huge), http.StatusRequestEntityTooLarge, "payload_too_large")
	txn := map[string]any{"operations": []any{map[string]any{"type": "push", "items": push("q", 1001)["items"]}}}
	refused(t, call(t, base, host, "POST", "/api/v1/transaction", key, txn), http.StatusRequestEntityTooLarge, "payload_too_large")
	require.Equal(t, http.StatusCreated, call(t, base, host, "POST", "/api/v1/push", key, push("q", 1000)).status)
}

// Parked long-polls are capped per cell as well as per cluster.
func TestCellParkedCap(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	a := p.cluster("acme", "pro", "cell-1")
	b := p.cluster("globex", "pro", "cell-1")
	base := startProxy(t, p, func(c *proxy.Config) { c.CellMaxParked = 1 })
	keyA, keyB := p.key(a, "consume"), p.key(b, "consume")

	done := make(chan answer, 1)
	go func() {
		done <- call(t, base, "acme.proxy.test", "GET", "/api/v1/pop/queue/q?wait=true&timeout=3000", keyA, nil)
	}()
	require.Eventually(t, func() bool {
		m := string(call(t, base, "acme.proxy.test", "GET", "/metrics/prometheus", "", nil).body)
		return strings.Contains(m, "queen_proxy_parked_long_polls 1\n")
	}, 2*test5s, test10ms)
	r := call(t, base, "globex.proxy.test", "GET", "/api/v1/pop/queue/q?wait=true&timeout=1", keyB, nil)
	refused(t, r, http.StatusTooManyRequests, "rate_limited")
	require.Equal(t, "5", r.header.Get("Retry-After"))
	require.Equal(t, http.StatusNoContent, (<-done).status)
	require.Equal(t, http.StatusNoContent, call(t, base, "globex.proxy.test", "GET", "/api/v1/pop/queue/q?wait=false", keyB, nil).status,
		"a plain pop takes no slot")
}

// Statuses and plan features, checked before the credential.
func TestStatusAndFeatureGates(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	cluster := p.cluster("acme", "free", "cell-1")
	key := p.key(cluster, "produce", "consume", "read")
	base := startProxy(t, p)
	host := "acme.proxy.test"

	refused(t, call(t, base, host, "POST", "/api/v1/traces", key, map[string]any{}), http.StatusForbidden, "feature_gated")
	refused(t, call(t, base, host, "POST", "/streams/v1/cycle", "", map[string]any{}), http.StatusForbidden, "feature_gated")

	p.exec(`SELECT queen_proxy.set_cluster_status($1, 'push_blocked')`, cluster)
	require.Eventually(t, func() bool {
		return call(t, base, host, "POST", "/api/v1/push", key, push("q", 1)).status == http.StatusForbidden
	}, test5s, test10ms, "the status change arrives through NOTIFY")
	refused(t, call(t, base, host, "POST", "/api/v1/push", key, push("q", 1)), http.StatusForbidden, "push_blocked")
	require.Contains(t, []int{http.StatusOK, http.StatusNoContent}, call(t, base, host, "GET", "/api/v1/pop/queue/q", key, nil).status,
		"consumers still drain")

	p.exec(`SELECT queen_proxy.set_cluster_status($1, 'active')`, cluster)
	p.exec(`SELECT queen_proxy.set_tenant_status(queen_proxy.cluster_tenant($1), 'suspended')`, cluster)
	require.Eventually(t, func() bool {
		return call(t, base, host, "GET", "/api/v1/resources/queues", key, nil).status == http.StatusForbidden
	}, test5s, test10ms)
	refused(t, call(t, base, host, "GET", "/api/v1/resources/queues", "", nil), http.StatusForbidden, "cluster_suspended")

	p.exec(`SELECT queen_proxy.set_tenant_status(queen_proxy.cluster_tenant($1), 'deleting')`, cluster)
	require.Eventually(t, func() bool {
		a := call(t, base, host, "GET", "/api/v1/resources/queues", key, nil)
		return a.status == http.StatusForbidden && a.json(t)["code"] == "cluster_suspended"
	}, test5s, test10ms)
}
