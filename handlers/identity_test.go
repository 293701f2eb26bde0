package handlers

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/handlers/auth"
	"github.com/queenforgo/queen/sql/pgtest"
)

// setupWith is setup with a Config of the test's choosing: a fresh
// database unless cfg.Pool is set, and a short repoll. Answers are checked
// against openapi.yaml.
func setupWith(t *testing.T, cfg testConfig) *testBundle {
	t.Helper()
	if cfg.Pool == nil {
		cfg.Pool = pgtest.NewPool(t)
	}
	cfg.RepollInterval = 50 * time.Millisecond
	srv := newServer(t, cfg)
	h, err := srv.Handler()
	require.NoError(t, err)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Drain)
	return newBundle(t, srv, cfg.Pool, hs.URL)
}

// withToken sends an Authorization header (when not empty).
func withToken(authorization string) func(*http.Request) {
	return func(r *http.Request) {
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
	}
}

// noRedirect sends one request and returns the answer as is.
func noRedirect(t *testing.T, method, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type wireIdentity struct {
	UserID        string   `json:"user_id"`
	Role          string   `json:"role"`
	IsOperator    bool     `json:"is_operator"`
	Standalone    bool     `json:"standalone"`
	Auth          string   `json:"auth"`
	Sub           *string  `json:"sub"`
	Roles         []string `json:"roles"`
	Access        []string `json:"access"`
	Cluster       any      `json:"cluster"`
	ActingCluster struct {
		ID string `json:"id"`
	} `json:"acting_cluster"`
	Clusters []struct {
		ID       string `json:"id"`
		Role     string `json:"role"`
		TenantID string `json:"tenant_id"`
		CellSlug string `json:"cell_slug"`
	} `json:"clusters"`
}

// JWT-12 with auth off: the dashboard boots as a full admin; login sends it
// home; logout is a no-op.
func TestIdentityRoutesAuthOff(t *testing.T) {
	t.Parallel()
	b := setupWith(t, testConfig{ServerID: "broker-7"})
	var id wireIdentity
	b.doJSON("GET", "/auth/me", nil, http.StatusOK, &id)
	require.Equal(t, "standalone", id.UserID)
	require.Equal(t, "admin", id.Role)
	require.True(t, id.IsOperator)
	require.True(t, id.Standalone)
	require.Equal(t, "off", id.Auth)
	require.Nil(t, id.Sub)
	require.Nil(t, id.Cluster)
	require.Equal(t, []string{"admin"}, id.Roles)
	require.Equal(t, []string{"read-only", "write-only", "read-write", "admin"}, id.Access)
	require.Equal(t, "local", id.ActingCluster.ID)
	require.Len(t, id.Clusters, 1)
	require.Equal(t, "admin", id.Clusters[0].Role)
	require.Equal(t, "00000000-0000-0000-0000-000000000001", id.Clusters[0].TenantID)
	require.Equal(t, "broker-7", id.Clusters[0].CellSlug)

	resp := noRedirect(t, "GET", b.url+"/auth/login")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/", resp.Header.Get("Location"))

	var out map[string]any
	b.doJSON("POST", "/auth/logout", nil, http.StatusOK, &out)
	require.Equal(t, map[string]any{"ok": true}, out)
}

// JWT-12 with auth on: without a valid token /auth/me is 401 auth_required
// (the reference's answer); with one it describes the token. The routes are
// public whatever JWT_SKIP_PATHS says (JWT-11).
func TestIdentityRoutesAuthOn(t *testing.T) {
	t.Parallel()
	a, err := auth.New(auth.Config{Secret: authSecret, SkipPaths: []string{}})
	require.NoError(t, err)
	b := setupWith(t, testConfig{Auth: a})
	for _, p := range []string{"/auth/me", "/auth/login", "/auth/logout"} {
		method := "GET"
		if p == "/auth/logout" {
			method = "POST"
		}
		require.Equal(t, routes.Public, auth.Classify(method, p), p)
	}

	for name, authz := range map[string]string{
		"no token":  "",
		"garbage":   "Bearer garbage",
		"expired":   signedHS(t, jwt.MapClaims{"sub": "alice", "role": "admin", "exp": time.Now().Add(-time.Hour).Unix()}),
		"wrong key": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJyb2xlIjoiYWRtaW4ifQ.c2lnbmF0dXJl",
	} {
		status, raw := b.doWithHeaders("GET", "/auth/me", nil, withToken(authz))
		require.Equal(t, http.StatusUnauthorized, status, name)
		require.JSONEq(t, `{"error":"auth_required","code":"auth_required"}`, string(raw), name)
	}

	for _, tc := range []struct {
		name    string
		claims  jwt.MapClaims
		user    string
		role    string
		roles   []string
		access  []string
		isAdmin bool
	}{
		{"read-write", jwt.MapClaims{"sub": "alice", "role": "read-write"}, "alice", "read-write",
			[]string{"read-write"}, []string{"read-only", "write-only", "read-write"}, false},
		{"admin via array", jwt.MapClaims{"sub": "root", "roles": []string{"read-only", "admin"}}, "root", "admin",
			[]string{"admin"}, []string{"read-only", "write-only", "read-write", "admin"}, true},
		{"read-only and write-only", jwt.MapClaims{"sub": "split", "roles": []string{"write-only", "read-only"}}, "split", "read-only",
			[]string{"read-only", "write-only"}, []string{"read-only", "write-only"}, false},
		{"no role, no sub", jwt.MapClaims{"role": "root"}, "", "none", []string{}, []string{}, false},
	} {
		var id wireIdentity
		status, raw := b.doWithHeaders("GET", "/auth/me", nil, withToken(signedHS(t, tc.claims)))
		require.Equal(t, http.StatusOK, status, "%s: %s", tc.name, raw)
		require.NoError(t, json.Unmarshal(raw, &id))
		require.Equal(t, "jwt", id.Auth, tc.name)
		require.Equal(t, tc.user, id.UserID, tc.name)
		if tc.user == "" {
			require.Nil(t, id.Sub, tc.name)
		} else {
			require.Equal(t, tc.user, *id.Sub, tc.name)
		}
		require.Equal(t, tc.role, id.Role, tc.name)
		require.Equal(t, tc.role, id.Clusters[0].Role, tc.name)
		require.Equal(t, tc.roles, id.Roles, tc.name)
		require.Equal(t, tc.access, id.Access, tc.name)
		require.Equal(t, tc.isAdmin, id.IsOperator, tc.name)
	}

	resp := noRedirect(t, "GET", b.url+"/auth/login")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(page), "This broker requires authentication")
	require.NotContains(t, string(page), "<script")

	var out map[string]any
	b.doJSON("POST", "/auth/logout", nil, http.StatusOK, &out)
	require.Equal(t, map[string]any{"ok": true}, out)
}
