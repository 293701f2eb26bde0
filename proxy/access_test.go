package proxy_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy"
)

// The key × scope × route-class matrix, against a real broker: a scope that
// permits the class reaches the broker (whatever it answers), one that does
// not is 403 forbidden, and blocked or operator routes are 404 for every key.
func TestKeyScopeClassMatrix(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	cluster := p.cluster("acme", "pro", "cell-1")
	base := startProxy(t, p)
	host := "acme.proxy.test"

	scopes := []string{"produce", "consume", "admin", "read"}
	keys := map[string]string{}
	for _, s := range scopes {
		keys[s] = p.key(cluster, s)
	}
	// One route of each class, with the scopes that may reach it.
	tests := []struct {
		class, method, path string
		body                any
		permit              []string
	}{
		{"produce", "POST", "/api/v1/push", push("m", 1), []string{"produce"}},
		{"produce", "POST", "/api/v1/transaction", map[string]any{"operations": []any{map[string]any{"type": "push", "queue": "m", "payload": 1}}}, []string{"produce"}},
		{"consume", "GET", "/api/v1/pop/queue/m?batch=1", nil, []string{"consume"}},
		{"consume", "POST", "/api/v1/ack", map[string]any{"transactionId": "x", "partitionId": "00000000-0000-0000-0000-000000000000", "status": "completed"}, []string{"consume"}},
		{"queue-admin", "POST", "/api/v1/configure", map[string]any{"queue": "m"}, []string{"admin"}},
		{"queue-admin", "DELETE", "/api/v1/resources/queues/nope", nil, []string{"admin"}},
		{"read", "GET", "/api/v1/resources/queues", nil, []string{"read", "admin"}},
		{"read", "GET", "/health", nil, []string{"read", "admin"}},
		{"gated-open", "POST", "/api/v1/traces", map[string]any{"transactionId": "x", "partitionId": "00000000-0000-0000-0000-000000000000", "data": map[string]any{}}, []string{"produce", "consume"}},
		{"gated-mixed", "POST", "/streams/v1/cycle", map[string]any{}, []string{"produce", "consume"}},
	}
	for _, tt := range tests {
		for _, s := range scopes {
			a := call(t, base, host, tt.method, tt.path, keys[s], tt.body)
			if contains(tt.permit, s) {
				require.False(t, byProxy(a), "%s %s (%s) with %s must reach the broker: %d %s",
					tt.method, tt.path, tt.class, s, a.status, a.body)
				require.NotEmpty(t, a.header.Get("X-Queen-Request-Id"))
				continue
			}
			refused(t, a, http.StatusForbidden, "forbidden")
		}
	}
	for _, blocked := range []struct{ method, path string }{
		{"GET", "/api/v1/status"}, {"POST", "/api/v1/system/maintenance"}, {"GET", "/metrics"},
		{"GET", "/api/v1/pop?namespace=x"}, {"POST", "/api/v1/migration/start"}, {"GET", "/api/v1/push"},
	} {
		for _, s := range scopes {
			refused(t, call(t, base, host, blocked.method, blocked.path, keys[s], nil), http.StatusNotFound, "route_blocked")
		}
	}
}

// Authentication and binding: no credential, an unknown key, a key of
// another cluster, a key in a cookie, an act-as header with a key.
func TestKeyBinding(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	acme := p.cluster("acme", "pro", "cell-1")
	p.cluster("globex", "pro", "cell-1")
	base := startProxy(t, p)
	key := p.key(acme, "read")

	require.Equal(t, http.StatusOK, call(t, base, "acme.proxy.test", "GET", "/api/v1/resources/queues", key, nil).status)
	require.Equal(t, http.StatusOK, call(t, base, "ACME.proxy.test.:443", "GET", "/api/v1/resources/queues", key, nil).status,
		"the host is canonicalised")
	refused(t, call(t, base, "globex.proxy.test", "GET", "/api/v1/resources/queues", key, nil), http.StatusForbidden, "forbidden")
	refused(t, call(t, base, "acme.proxy.test", "GET", "/api/v1/resources/queues", "", nil), http.StatusUnauthorized, "unauthorized")
	refused(t, call(t, base, "acme.proxy.test", "GET", "/api/v1/resources/queues", "qk_live_random", nil), http.StatusUnauthorized, "unauthorized")
	refused(t, call(t, base, "acme.proxy.test", "GET", "/api/v1/resources/queues", "", nil, "Cookie", "queen_session="+key),
		http.StatusUnauthorized, "unauthorized")
	refused(t, call(t, base, "acme.proxy.test", "GET", "/api/v1/resources/queues", key, nil, "X-Queen-Act-Cluster", "globex"),
		http.StatusForbidden, "forbidden")
	refused(t, call(t, base, "nobody.proxy.test", "GET", "/api/v1/resources/queues", key, nil), http.StatusMisdirectedRequest, "cluster_unknown")
	refused(t, call(t, base, "127.0.0.1", "GET", "/api/v1/resources/queues", key, nil), http.StatusMisdirectedRequest, "cluster_unknown")
	// A blocked path is refused before the host or the credential matter.
	refused(t, call(t, base, "nobody.proxy.test", "GET", "/api/v1/status", "", nil), http.StatusNotFound, "route_blocked")
}

// byProxy reports whether the proxy answered itself: its refusals carry a
// code, the broker's errors do not.
func byProxy(a answer) bool {
	var m map[string]any
	if json.Unmarshal(a.body, &m) != nil {
		return false
	}
	_, ok := m["code"]
	return ok
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// On a shared host the key names the cluster: each key reaches its own, a
// host that names no cluster and an unknown key learn nothing (401, not
// 421). The proxy's metrics count what happened, without naming clusters.
func TestSharedHostAndMetrics(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	acme := p.cluster("acme", "pro", "cell-1")
	globex := p.cluster("globex", "free", "cell-1")
	base := startProxy(t, p, func(c *proxy.Config) { c.SharedHosts = []string{"api.queen.test"} })
	host := "API.queen.test:443"

	require.Equal(t, http.StatusCreated, call(t, base, host, "POST", "/api/v1/push", p.key(acme, "produce"), push("q", 1)).status)
	refused(t, call(t, base, host, "POST", "/api/v1/traces", p.key(globex, "produce"), map[string]any{}),
		http.StatusForbidden, "feature_gated") // globex's plan, not acme's
	refused(t, call(t, base, host, "GET", "/api/v1/resources/queues", "qk_live_nobody", nil), http.StatusUnauthorized, "unauthorized")
	refused(t, call(t, base, host, "GET", "/api/v1/resources/queues", "", nil), http.StatusUnauthorized, "unauthorized")

	m := string(call(t, base, host, "GET", "/metrics/prometheus", "", nil).body)
	require.Contains(t, m, `queen_proxy_requests_total{class="produce",code="201"} 1`)
	require.Contains(t, m, `queen_proxy_requests_total{class="read",code="401"} 2`)
	require.Contains(t, m, `queen_proxy_upstream_duration_seconds_count{class="produce"} 1`)
	require.Contains(t, m, `queen_proxy_denials_total{code="feature_gated",shadow="false"} 1`)
	require.NotContains(t, m, "acme")
}

// QUEEN_PROXY_DEFAULT_CLUSTER serves hosts that name no cluster: an IP and a
// bare localhost, the official clients' default URL. A host with a label
// still names its own cluster, and an unknown one is still 421.
func TestDefaultCluster(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	acme := p.cluster("acme", "pro", "cell-1")
	globex := p.cluster("globex", "pro", "cell-1")
	base := startProxy(t, p, func(c *proxy.Config) { c.DefaultCluster = "acme" })
	key := p.key(acme, "read")

	for _, host := range []string{"localhost:6711", "LOCALHOST.", "127.0.0.1:6711", "[::1]:6711", "acme.localhost"} {
		require.Equal(t, http.StatusOK, call(t, base, host, "GET", "/api/v1/resources/queues", key, nil).status, host)
	}
	refused(t, call(t, base, "globex.localhost", "GET", "/api/v1/resources/queues", key, nil), http.StatusForbidden, "forbidden")
	require.Equal(t, http.StatusOK,
		call(t, base, "globex.localhost", "GET", "/api/v1/resources/queues", p.key(globex, "read"), nil).status)
	refused(t, call(t, base, "nobody.localhost", "GET", "/api/v1/resources/queues", key, nil), http.StatusMisdirectedRequest, "cluster_unknown")
}
