package handlers

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers/auth"
	"github.com/queenforgo/queen/handlers/broker"
)

// raw sends a request with headers (name, value pairs) and returns the
// answer unchecked: the tenant and auth refusals come from middleware in
// front of the spec.
func (b *testBundle) raw(method, path string, body any, headers ...string) (int, string) {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(b.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp.StatusCode, string(out)
}

// queueTenant is the tenant that owns queue name; "" when none does.
func (b *testBundle) queueTenants(name string) []string {
	b.t.Helper()
	rows, err := b.pool.Query(b.t.Context(), `SELECT tenant_id::text FROM queen.queues WHERE name = $1 ORDER BY 1`, name)
	require.NoError(b.t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(b.t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(b.t, rows.Err())
	return out
}

const badTenantHeader = `{"error":"invalid x-queen-tenant header (must be a UUID)"}`

// TEN-3: the header's shape check, and that both cases name one tenant.
func TestTenantHeaderTable(t *testing.T) {
	t.Parallel()
	b := setupTenancy(t)
	for i, tc := range []struct {
		name, header string
		want         string // the tenant; "" means 400
	}{
		{"canonical", tenantA, tenantA},
		{"upper case", strings.ToUpper(tenantA), tenantA},
		{"mixed case and padded", "  " + upperHex(tenantA)[:10] + tenantA[10:] + "\t", tenantA},
		{"empty", "", broker.DefaultTenant},
		{"white space", "   ", broker.DefaultTenant},
		{"the default tenant", broker.DefaultTenant, broker.DefaultTenant},
		{"no dashes", strings.ReplaceAll(tenantA, "-", ""), ""},
		{"37 characters", tenantA + "0", ""},
		{"35 characters", tenantA[:35], ""},
		{"dash misplaced", "0a0a0a0a0-000-4000-8000-00000000000a", ""},
		{"non-hex", "0g0a0a0a-0000-4000-8000-00000000000a", ""},
		{"non-ASCII", "0a0a0a0a-0000-4000-8000-00000000000é", ""},
		{"braces", "{" + tenantA + "}", ""},
		{"urn", "urn:uuid:" + tenantA, ""},
		{"a name", "acme", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			queue := "hdr" + string(rune('a'+i))
			status, body := b.raw("POST", "/api/v1/push", map[string]any{"items": []any{item(queue, "", "", 1)}},
				"x-queen-tenant", tc.header)
			if tc.want == "" {
				require.Equal(t, http.StatusBadRequest, status)
				require.JSONEq(t, badTenantHeader, body)
				require.Empty(t, b.queueTenants(queue), "a refused request changes nothing")
				return
			}
			require.Equal(t, http.StatusCreated, status, body)
			require.Equal(t, []string{tc.want}, b.queueTenants(queue))
		})
	}
	// Upper and lower case address the same queue.
	b.raw("POST", "/api/v1/push", map[string]any{"items": []any{item("same", "", "k", 1)}}, "x-queen-tenant", tenantB)
	status, body := b.raw("GET", "/api/v1/pop/queue/same", nil, "x-queen-tenant", strings.ToUpper(tenantB))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"transactionId":"k"`)
	// Two headers for one request are refused, and the refusal comes before
	// anything else: here before the body is even read.
	status, body = b.raw("POST", "/api/v1/push", "not json", "x-queen-tenant", tenantA, "x-queen-tenant", tenantB)
	require.Equal(t, http.StatusBadRequest, status)
	require.JSONEq(t, badTenantHeader, body)
}

// TEN-1: with tenancy off the header is never read.
func TestTenancyOffIgnoresTheHeader(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, h := range []string{tenantA, "not a uuid"} {
		status, body := b.raw("POST", "/api/v1/push", map[string]any{"items": []any{item("off", "", h, 1)}}, "x-queen-tenant", h)
		require.Equal(t, http.StatusCreated, status, body)
	}
	status, body := b.raw("POST", "/api/v1/push", map[string]any{"items": []any{item("off", "", "twice", 1)}},
		"x-queen-tenant", tenantA, "x-queen-tenant", tenantB)
	require.Equal(t, http.StatusCreated, status, "not even a repeated header is looked at: %s", body)
	require.Equal(t, []string{broker.DefaultTenant}, b.queueTenants("off"))
	var id struct {
		Tenancy  bool   `json:"tenancy"`
		TenantID string `json:"tenant_id"`
	}
	b.as(tenantA).doJSON("GET", "/auth/me", nil, http.StatusOK, &id)
	require.False(t, id.Tenancy)
	require.Equal(t, broker.DefaultTenant, id.TenantID)
}

// The claim rule (QUEEN_TENANT_CLAIM): a token carrying the claim fixes the
// tenant, a header naming another one is 403, a missing header takes the
// claim; a token without it keeps the header rule.
func TestTenantClaimFixesTheTenant(t *testing.T) {
	t.Parallel()
	a, err := auth.New(auth.Config{Secret: authSecret, TenantClaim: "tenant"})
	require.NoError(t, err)
	b := setup(t, setupOpts{repoll: 50 * time.Millisecond, config: func(c *testConfig) { c.Auth, c.Tenancy = a, true }})
	token := func(claims jwt.MapClaims) string {
		claims["role"] = "admin"
		return signedHS(t, claims)
	}
	bound := token(jwt.MapClaims{"sub": "svc-a", "tenant": strings.ToUpper(tenantA)})
	free := token(jwt.MapClaims{"sub": "ops"})
	pushTo := func(queue, authz string, headers ...string) (int, string) {
		return b.raw("POST", "/api/v1/push", map[string]any{"items": []any{item(queue, "", "", 1)}},
			append([]string{"Authorization", authz}, headers...)...)
	}

	status, body := pushTo("c1", bound)
	require.Equal(t, http.StatusCreated, status, body)
	require.Equal(t, []string{tenantA}, b.queueTenants("c1"), "no header: the claim's tenant")
	status, body = pushTo("c2", bound, "x-queen-tenant", tenantA)
	require.Equal(t, http.StatusCreated, status, body)
	require.Equal(t, []string{tenantA}, b.queueTenants("c2"), "a header that agrees")
	status, body = pushTo("c3", bound, "x-queen-tenant", tenantB)
	require.Equal(t, http.StatusForbidden, status)
	require.JSONEq(t, `{"error":"x-queen-tenant does not match the tenant of the token"}`, body)
	status, _ = pushTo("c3", bound, "x-queen-tenant", broker.DefaultTenant)
	require.Equal(t, http.StatusForbidden, status, "the default tenant is another tenant too")
	require.Empty(t, b.queueTenants("c3"))
	status, body = pushTo("c4", bound, "x-queen-tenant", "nope")
	require.Equal(t, http.StatusBadRequest, status, "the header's shape is checked first")
	require.JSONEq(t, badTenantHeader, body)

	status, body = pushTo("c5", free, "x-queen-tenant", tenantB)
	require.Equal(t, http.StatusCreated, status, body)
	require.Equal(t, []string{tenantB}, b.queueTenants("c5"), "a token without the claim: the header rule")
	status, _ = pushTo("c6", free)
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, []string{broker.DefaultTenant}, b.queueTenants("c6"))

	status, body = pushTo("c7", token(jwt.MapClaims{"tenant": "acme"}))
	require.Equal(t, http.StatusForbidden, status)
	require.JSONEq(t, `{"error":"the token's tenant claim is not a UUID"}`, body)
	status, _ = pushTo("c7", token(jwt.MapClaims{"tenant": 42}))
	require.Equal(t, http.StatusUnauthorized, status, "a claim that is not a string cannot bind: the token is refused")
	require.Empty(t, b.queueTenants("c7"))

	// The identity says which tenant, and that the token fixed it.
	status, body = b.raw("GET", "/auth/me", nil, "Authorization", bound)
	require.Equal(t, http.StatusOK, status, body)
	var id struct {
		Tenancy         bool   `json:"tenancy"`
		TenantID        string `json:"tenant_id"`
		TenantFromToken bool   `json:"tenant_from_token"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &id))
	require.Equal(t, struct {
		Tenancy         bool   `json:"tenancy"`
		TenantID        string `json:"tenant_id"`
		TenantFromToken bool   `json:"tenant_from_token"`
	}{true, tenantA, true}, id)
	_, body = b.raw("GET", "/auth/me", nil, "Authorization", free, "x-queen-tenant", tenantB)
	require.NoError(t, json.Unmarshal([]byte(body), &id))
	require.Equal(t, tenantB, id.TenantID)
	require.False(t, id.TenantFromToken)
}

// TEN-5: the cell-wide surfaces ignore the tenant. Prometheus counts the
// queue under its name, with no tenant label; the status is the cell's.
func TestTenancyCellWideSurfaces(t *testing.T) {
	t.Parallel()
	b := setupTenancy(t)
	a := b.as(tenantA)
	a.push(item("metered", "", "", 1))
	// A long-poll parked on the queue puts it in the per-queue gauge.
	var wg sync.WaitGroup
	wg.Go(func() {
		a.pop("/api/v1/pop/queue/metered?consumerGroup=g&subscriptionMode=new&wait=true&timeout=30000")
	})
	t.Cleanup(wg.Wait)
	t.Cleanup(b.srv.Drain)
	require.Eventually(t, func() bool { return b.srv.b.Parked(broker.QueueKey{Tenant: tenantA, Queue: "metered"}) == 1 },
		10*time.Second, 5*time.Millisecond)
	status, body := b.raw("GET", "/metrics/prometheus", nil, "x-queen-tenant", tenantB)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `queen_parked_long_polls{queue="metered"} 1`)
	require.NotContains(t, body, "tenant")
	require.NotContains(t, body, tenantA)
	var st struct {
		Queues []struct {
			Name string `json:"name"`
		} `json:"queues"`
	}
	b.as(tenantB).doJSON("GET", "/api/v1/status", nil, http.StatusOK, &st)
	require.Len(t, st.Queues, 1, "the status lists the cell's queues whatever the tenant")
	require.Equal(t, "metered", st.Queues[0].Name)
}
