package route_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/proxy/route"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, path string
		want         routes.ProxyClass // Unclassified: refused with 404 route_blocked
	}{
		{"POST", "/api/v1/push", routes.ProxyProduce},
		{"POST", "/api/v1/transaction", routes.ProxyProduce},
		{"POST", "/api/v1/ack", routes.ProxyConsume},
		{"POST", "/api/v1/ack/batch", routes.ProxyConsume},
		{"POST", "/api/v1/lease/L1/extend", routes.ProxyConsume},
		{"GET", "/api/v1/pop/queue/orders", routes.ProxyConsume},
		{"GET", "/api/v1/pop/queue/orders/partition/p-1", routes.ProxyConsume},
		{"GET", "/api/v1/pop/queue/my%20queue", routes.ProxyConsume}, // an escape inside a parameter is the name's own
		{"POST", "/api/v1/configure", routes.ProxyQueueAdmin},
		{"DELETE", "/api/v1/consumer-groups/g", routes.ProxyQueueAdmin},
		{"DELETE", "/api/v1/consumer-groups/g/queues/q", routes.ProxyQueueAdmin},
		{"POST", "/api/v1/consumer-groups/g/queues/q/seek", routes.ProxyQueueAdmin},
		{"POST", "/api/v1/consumer-groups/g/queues/q/partitions/p/seek", routes.ProxyQueueAdmin},
		{"POST", "/api/v1/consumer-groups/g/subscription", routes.ProxyQueueAdmin},
		{"DELETE", "/api/v1/messages/P/T", routes.ProxyQueueAdmin},
		{"POST", "/api/v1/messages/P/T/retry", routes.ProxyQueueAdmin},
		{"POST", "/api/v1/messages/P/T/dlq", routes.ProxyQueueAdmin},
		{"POST", "/api/v1/dlq/D/replay", routes.ProxyQueueAdmin},
		{"DELETE", "/api/v1/dlq", routes.ProxyQueueAdmin},
		{"DELETE", "/api/v1/resources/queues/q", routes.ProxyQueueAdmin},
		{"DELETE", "/api/v1/queues/q/clear", routes.ProxyQueueAdmin},
		{"GET", "/api/v1/messages/P/retry", routes.ProxyRead}, // a message whose transaction id is "retry"
		{"DELETE", "/api/v1/messages/P/retry", routes.ProxyQueueAdmin},
		{"GET", "/health", routes.ProxyRead},
		{"HEAD", "/api/v1/messages", routes.ProxyRead},
		{"GET", "/api/v1/messages", routes.ProxyRead},
		{"GET", "/api/v1/dlq", routes.ProxyRead},
		{"GET", "/api/v1/resources/queues", routes.ProxyRead},
		{"GET", "/api/v1/resources/queues/q", routes.ProxyRead},
		{"GET", "/api/v1/resources/overview", routes.ProxyRead},
		{"GET", "/api/v1/consumer-groups", routes.ProxyRead},
		{"GET", "/api/v1/consumer-groups/lagging", routes.ProxyRead},
		{"GET", "/api/v1/status/queues", routes.ProxyRead},
		{"GET", "/api/v1/analytics/queue-lag", routes.Unclassified}, // per-queue series by name across tenants: operator
		{"GET", "/api/v1/traces/names", routes.ProxyRead},
		{"POST", "/api/v1/traces", routes.ProxyGatedOpen},
		{"POST", "/streams/v1/cycle", routes.ProxyGatedMixed},
		{"POST", "/streams/v1/queries", routes.ProxyGatedOpen},
		{"POST", "/streams/v1/state/get", routes.ProxyGatedOpen},

		// Operator routes (no operator sessions yet) and blocked ones.
		{"GET", "/api/v1/status", routes.Unclassified},
		{"GET", "/api/v1/status/buffers", routes.Unclassified},
		{"GET", "/api/v1/analytics/system-metrics", routes.Unclassified},
		{"GET", "/api/v1/analytics/worker-metrics", routes.Unclassified},
		{"GET", "/api/v1/analytics/postgres-stats", routes.Unclassified},
		{"GET", "/api/v1/system/maintenance", routes.Unclassified},
		{"POST", "/api/v1/system/maintenance", routes.Unclassified},
		{"POST", "/api/v1/system/maintenance/pop", routes.Unclassified},
		{"GET", "/metrics/prometheus", routes.Unclassified},
		{"GET", "/metrics", routes.Unclassified},
		{"GET", "/status", routes.Unclassified},
		{"POST", "/api/v1/stats/refresh", routes.Unclassified},
		{"GET", "/api/v1/migration/status", routes.Unclassified},
		{"POST", "/api/v1/migration/start", routes.Unclassified},
		{"GET", "/api/v1/pop", routes.Unclassified},
		{"GET", "/api/v1/pop/", routes.Unclassified},
		{"GET", "/auth/me", routes.Unclassified},
		{"GET", "/auth/login", routes.Unclassified},
		{"GET", "/api/v1/system/shared-state", routes.Unclassified},
		{"GET", "/internal/api/inter-instance/stats", routes.Unclassified},
		{"POST", "/internal/api/notify", routes.Unclassified},
		{"GET", "/internal/x", routes.Unclassified},
		{"GET", "/internalx", routes.Unclassified},
		{"DELETE", "/api/v1/resources/tenant", routes.Unclassified},

		// Methods outside the table.
		{"GET", "/api/v1/push", routes.Unclassified},
		{"PUT", "/api/v1/push", routes.Unclassified},
		{"GET", "/api/v1/fetch", routes.Unclassified},
		{"POST", "/api/v1/resources/queues", routes.Unclassified},
		{"PATCH", "/api/v1/messages/P/T", routes.Unclassified},
		{"GET", "/api/v1/messages/P/T/retry", routes.Unclassified},
		{"post", "/api/v1/push", routes.Unclassified},
		{"GET", "/streams/v1/cycle", routes.Unclassified},

		// Near misses, case, trailing slashes, unknown paths.
		{"POST", "/api/v1/pushall", routes.Unclassified},
		{"POST", "/api/v1/push/", routes.Unclassified},
		{"POST", "/api/v1/ack/batch/", routes.Unclassified},
		{"POST", "/API/v1/push", routes.Unclassified},
		{"POST", "/api/v1/messages/P/T/RETRY", routes.Unclassified},
		{"GET", "/api/v1/unknown", routes.Unclassified},
		{"POST", "/api/v2/push", routes.Unclassified},
		{"GET", "/api/", routes.Unclassified},
		{"GET", "/", routes.Unclassified},
		{"GET", "/api/v1/kvstore", routes.Unclassified},
		{"GET", "/api/v1/ephemerals", routes.Unclassified},

		// Paths that only match after normalisation, or could be read two ways.
		{"POST", "/api/v1%2Fpush", routes.Unclassified},
		{"POST", "/api/v1%2fpush", routes.Unclassified},
		{"POST", "/api/v1/p%75sh", routes.Unclassified},
		{"POST", "/api/v1/push/../system/maintenance", routes.Unclassified},
		{"POST", "/api/v1/./push", routes.Unclassified},
		{"POST", "//api/v1/push", routes.Unclassified},
		{"POST", "/api//v1/push", routes.Unclassified},
		{"POST", "/api/v1/%2e%2e/v1/push", routes.Unclassified},
		{"POST", "/api/v1/%2E/push", routes.Unclassified},
		{"GET", "/api/v1/pop/queue/a%2Fb", routes.Unclassified},
		{"GET", "/api/v1/pop/queue/a%5Cb", routes.Unclassified},
		{"GET", "/api/v1/pop/queue/a%00", routes.Unclassified},
		{"GET", "/api/v1/pop/queue/a%zz", routes.Unclassified},
		{"GET", "/api/v1/pop/queue/a%2", routes.Unclassified},
		{"GET", "/api/v1/pop/queue/a\\b", routes.Unclassified},
		{"GET", "/api/v1/pop/queue/a b", routes.Unclassified},
		{"GET", "/api/v1/pop/queue/\xc3\xa9", routes.Unclassified},
		{"GET", "/api/v1/pop/queue/" + strings.Repeat("a", route.MaxPathBytes), routes.Unclassified},
		{"GET", "api/v1/pop/queue/q", routes.Unclassified},
		{"GET", "", routes.Unclassified},
	}
	for _, tt := range tests {
		r, ok := route.Classify(tt.method, tt.path)
		if tt.want == routes.Unclassified {
			require.False(t, ok, "%s %s must be refused, got %s", tt.method, tt.path, r.Proxy)
			continue
		}
		require.True(t, ok, "%s %s must be forwardable", tt.method, tt.path)
		require.Equal(t, tt.want, r.Proxy, "%s %s", tt.method, tt.path)
	}
}

// Every operation of the spec is classified, and each forwardable one is
// reachable through its own template (with plain parameter values).
func TestEveryOperationClassified(t *testing.T) {
	t.Parallel()
	for _, r := range routes.All {
		require.NotEqual(t, routes.Unclassified, r.Proxy, "%s %s has no x-queen-proxy in openapi.yaml", r.Method, r.Path)
		path := strings.NewReplacer("{", "x", "}", "").Replace(r.Path)
		got, ok := route.Classify(r.Method, path)
		switch r.Proxy {
		case routes.ProxyBlocked, routes.ProxyOperator:
			require.False(t, ok, "%s %s", r.Method, r.Path)
		default:
			require.True(t, ok, "%s %s", r.Method, r.Path)
			require.Equal(t, r.OperationID, got.OperationID)
		}
	}
}

// FuzzClassify: whatever Classify lets through names an operation of the
// table exactly, in a form that decoding cannot change.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"/api/v1/push", "/api/v1/pop/queue/q", "/api/v1/p%75sh", "//api/v1/push",
		"/api/v1/push/../x", "/api/v1/pop/queue/a%2Fb", "/api/v1/messages/P/T/retry", "/health"} {
		f.Add("POST", s)
		f.Add("GET", s)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		r, ok := route.Classify(method, path)
		if !ok {
			return
		}
		require.Equal(t, r.Method == method || (method == "HEAD" && r.Method == "GET"), true)
		m, matched := routes.Match(method, path)
		require.True(t, matched)
		require.Equal(t, r, m)
		decoded, err := url.PathUnescape(path)
		require.NoError(t, err)
		require.NotContains(t, decoded, "//")
		require.NotContains(t, decoded, "/./")
		require.NotContains(t, decoded, "/../")
		require.NotContains(t, path, "\\")
		require.NotEqual(t, routes.ProxyBlocked, r.Proxy)
		require.NotEqual(t, routes.ProxyOperator, r.Proxy)
		require.NotEqual(t, routes.Unclassified, r.Proxy)
	})
}
