package proxy_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Two clusters of two tenants on one cell, with the same queue names, never
// see each other's messages; a client-sent x-queen-tenant naming the other
// cluster's broker tenant changes nothing. Needs the broker's native
// tenancy (issue 13).
func TestTwoClustersOnOneCellIsolated(t *testing.T) {
	t.Parallel()
	broker := startBroker(t, "QUEEN_TENANCY_HEADER=true", "QUEEN_KV_TRUSTED_PROXY=true")
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	acme := p.cluster("acme", "pro", "cell-1")
	globex := p.cluster("globex", "pro", "cell-1")
	base := startProxy(t, p)
	ka := p.key(acme, "produce", "consume", "read")
	kg := p.key(globex, "produce", "consume", "read")
	acmeTenant := p.id(`SELECT broker_tenant_uuid FROM queen_proxy.clusters WHERE id = $1`, acme)

	require.Equal(t, http.StatusCreated, call(t, base, "acme.proxy.test", "POST", "/api/v1/push", ka, push("orders", 3)).status)
	require.Equal(t, http.StatusCreated, call(t, base, "globex.proxy.test", "POST", "/api/v1/push", kg, push("orders", 2),
		"X-Queen-Tenant", acmeTenant.String()).status)

	a := call(t, base, "globex.proxy.test", "GET", "/api/v1/pop/queue/orders?batch=10", kg, nil,
		"X-Queen-Tenant", acmeTenant.String())
	require.Equal(t, http.StatusOK, a.status, string(a.body))
	require.Len(t, a.json(t)["messages"], 2, "globex sees its own two messages only")
	a = call(t, base, "acme.proxy.test", "GET", "/api/v1/pop/queue/orders?batch=10", ka, nil)
	require.Equal(t, http.StatusOK, a.status, string(a.body))
	require.Len(t, a.json(t)["messages"], 3, "acme sees its own three messages only")

	queues := call(t, base, "globex.proxy.test", "GET", "/api/v1/resources/queues/orders", kg, nil)
	require.Equal(t, http.StatusOK, queues.status, string(queues.body))
	require.NotContains(t, string(queues.body), `"total":5`)
}
