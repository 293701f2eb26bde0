package auth

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// QUEEN_TENANT_CLAIM: the configured claim reaches the identity and the
// request context as the token has it; one that is not a string refuses
// the token, since ignoring it would unbind the token from its tenant.
func TestTenantClaim(t *testing.T) {
	t.Parallel()
	a := newAuth(t, Config{Secret: testSecret, TenantClaim: "tid"})
	id, err := a.ParseToken(t.Context(), hs256(t, jwt.MapClaims{"sub": "s", "tid": "ABC", "role": "admin"}))
	require.NoError(t, err)
	require.Equal(t, "ABC", id.Tenant, "as the token has it: the adapter checks the shape")
	require.Equal(t, "s", id.Subject)
	id, err = a.ParseToken(t.Context(), hs256(t, jwt.MapClaims{"sub": "s"}))
	require.NoError(t, err)
	require.Empty(t, id.Tenant, "no claim: no tenant")
	_, err = a.ParseToken(t.Context(), hs256(t, jwt.MapClaims{"tid": 7}))
	requireRefused(t, err, http.StatusUnauthorized, "Invalid token claims")

	// Without TenantClaim the claim is not read at all.
	plain := newAuth(t, Config{Secret: testSecret})
	id, err = plain.ParseToken(t.Context(), hs256(t, jwt.MapClaims{"tid": 7, "tenant": "x"}))
	require.NoError(t, err)
	require.Empty(t, id.Tenant)

	// The middleware hands the claim on; a public route carries none.
	var seen []string
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, TenantFrom(r.Context()))
	}), nil)
	for _, target := range []string{"/api/v1/pop/queue/q", "/health"} {
		req := httptest.NewRequest("GET", target, nil)
		req.Header.Set("Authorization", "Bearer "+hs256(t, jwt.MapClaims{"tid": "t-1", "role": "admin"}))
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	require.Equal(t, []string{"t-1", ""}, seen)
}
