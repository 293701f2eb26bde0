package handlers

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/handlers/auth"
	"github.com/queenforgo/queen/sql/pgtest"
)

const authSecret = "handlers-test-secret-0123456789abcdef"

// authBundle is a JWT-on broker on its own database, served over real HTTP.
type authBundle struct {
	t   *testing.T
	srv *Server
	url string
}

func setupAuth(t *testing.T, cfg auth.Config) *authBundle {
	t.Helper()
	a, err := auth.New(cfg)
	require.NoError(t, err)
	srv := newServer(t, testConfig{Pool: pgtest.NewPool(t), RepollInterval: 50 * time.Millisecond, MaxBodyBytes: 4096, Auth: a})
	h, err := srv.Handler()
	require.NoError(t, err)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Drain)
	return &authBundle{t: t, srv: srv, url: hs.URL}
}

// do sends a request with an optional Authorization header value. The
// answers are not checked against openapi.yaml: 401 and 403 come from the
// middleware, in front of the spec.
func (b *authBundle) do(method, path, authorization string, body []byte) (int, []byte) {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	require.NoError(b.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp.StatusCode, out
}

// signedHS signs HS256 claims with the test secret, as "Bearer <jwt>".
func signedHS(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(authSecret))
	require.NoError(t, err)
	return "Bearer " + s
}

func requireAuthError(t *testing.T, status int, body []byte, wantStatus int, want, context string) {
	t.Helper()
	require.Equal(t, wantStatus, status, "%s: %s", context, body)
	var e map[string]any
	require.NoError(t, json.Unmarshal(body, &e), "%s: %s", context, body)
	require.Equal(t, map[string]any{"error": want}, e, context)
}

// exampleRoutePath fills every {param} of a route template.
func exampleRoutePath(template string) string {
	segs := strings.Split(template, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			segs[i] = "x" + strings.Trim(s, "{}")
		}
	}
	return strings.Join(segs, "/")
}

// JWT-8 and JWT-9 through the whole chain: every route of routes.All, with
// a token per role set, is served (not 401/403) exactly when the role set
// passes the route's level, and is 403 "Insufficient permissions"
// otherwise; without a token every non-public route is 401.
func TestAuthRoleMatrix(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, auth.Config{Secret: authSecret})

	all := []routes.Access{routes.Public, routes.ReadOnly, routes.WriteOnly, routes.ReadWrite, routes.Admin}
	// Written out from JWT-8, not derived from the code under test. A
	// read-write token passes write-only routes ("WRITE_ONLY: holders of
	// write-only, read-write or admin"); read-only and write-only together
	// still do not make read-write.
	sets := []struct {
		name   string
		claims jwt.MapClaims
		passes []routes.Access
	}{
		{"no role", jwt.MapClaims{"sub": "nobody"}, []routes.Access{routes.Public}},
		{"unknown role", jwt.MapClaims{"role": "root"}, []routes.Access{routes.Public}},
		{"read-only", jwt.MapClaims{"role": "read-only"}, []routes.Access{routes.Public, routes.ReadOnly}},
		{"write-only", jwt.MapClaims{"role": "write-only"}, []routes.Access{routes.Public, routes.WriteOnly}},
		{"read-only+write-only", jwt.MapClaims{"roles": []string{"read-only", "write-only"}},
			[]routes.Access{routes.Public, routes.ReadOnly, routes.WriteOnly}},
		{"read-write", jwt.MapClaims{"role": "read-write"}, []routes.Access{routes.Public, routes.ReadOnly, routes.WriteOnly, routes.ReadWrite}},
		{"admin", jwt.MapClaims{"roles": []string{"admin"}}, all},
	}

	require.NotEmpty(t, routes.All)
	for _, r := range routes.All {
		require.Contains(t, all, r.Access, "%s %s has no known access level", r.Method, r.Path)
		path := exampleRoutePath(r.Path)
		var body []byte
		if r.Method == "POST" || r.Method == "PUT" {
			body = []byte(`{}`)
		}
		name := r.Method + " " + r.Path

		status, raw := b.do(r.Method, path, "", body)
		switch {
		case r.Access == routes.Public && r.Path == "/auth/me":
			// Public, and answers "signed out" itself (JWT-12).
			require.Equal(t, http.StatusUnauthorized, status, "%s without token: %s", name, raw)
			require.JSONEq(t, `{"error":"auth_required","code":"auth_required"}`, string(raw), name)
		case r.Access == routes.Public:
			require.NotContains(t, []int{401, 403}, status, "%s without token: %s", name, raw)
		default:
			requireAuthError(t, status, raw, http.StatusUnauthorized, "Authentication required", name+" without token")
		}

		for _, set := range sets {
			status, raw := b.do(r.Method, path, signedHS(t, set.claims), body)
			ctx := name + " as " + set.name
			if hasAccess(set.passes, r.Access) {
				require.NotContains(t, []int{401, 403}, status, "%s: %s", ctx, raw)
				require.NotContains(t, string(raw), "no route for", "%s: the route is not served", ctx)
			} else {
				requireAuthError(t, status, raw, http.StatusForbidden, "Insufficient permissions", ctx)
			}
		}
	}

	// Unknown API routes are read-write: an anonymous client cannot tell
	// them from protected ones.
	status, raw := b.do("GET", "/api/v1/nope", "", nil)
	requireAuthError(t, status, raw, http.StatusUnauthorized, "Authentication required", "unknown route")
	status, raw = b.do("GET", "/api/v1/nope", signedHS(t, jwt.MapClaims{"role": "read-only"}), nil)
	requireAuthError(t, status, raw, http.StatusForbidden, "Insufficient permissions", "unknown route")
	status, _ = b.do("GET", "/api/v1/nope", signedHS(t, jwt.MapClaims{"role": "read-write"}), nil)
	require.Equal(t, http.StatusNotFound, status)
}

func hasAccess[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// JWT-13: producerSub comes from the token's sub, never from the body.
func TestAuthProducerSubFromToken(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, auth.Config{Secret: authSecret})
	push := func(authz, queue string) {
		t.Helper()
		body := `{"items":[{"queue":"` + queue + `","payload":{"n":1},"producerSub":"evil"}]}`
		status, raw := b.do("POST", "/api/v1/push", authz, []byte(body))
		require.Equal(t, http.StatusCreated, status, "%s", raw)
	}
	popSub := func(queue string) any {
		t.Helper()
		status, raw := b.do("GET", "/api/v1/pop/queue/"+queue, signedHS(t, jwt.MapClaims{"role": "read-write"}), nil)
		require.Equal(t, http.StatusOK, status, "%s", raw)
		var p struct {
			Messages []map[string]any `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(raw, &p))
		require.Len(t, p.Messages, 1)
		return p.Messages[0]["producerSub"]
	}

	push(signedHS(t, jwt.MapClaims{"sub": "svc-a", "role": "write-only"}), "subq")
	require.Equal(t, "svc-a", popSub("subq"))
	// A token without sub pushes anonymously; the body still does not count.
	push(signedHS(t, jwt.MapClaims{"role": "read-write"}), "anonq")
	require.Nil(t, popSub("anonq"))
}

// JWT-13/JWT-14 with auth off: no subject, and every route is open.
func TestAuthOffIsOpen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.doJSON("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "open", "payload": 1, "producerSub": "evil"}}}, http.StatusCreated, nil)
	p := b.pop("/api/v1/pop/queue/open")
	require.NotNil(t, p)
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM queen.messages WHERE producer_sub IS NOT NULL").Scan(&n))
	require.Zero(t, n)
	b.doJSON("DELETE", "/api/v1/resources/queues/open", nil, http.StatusOK, nil)
}

// JWT-15: auth is the outermost layer, and failures are short JSON errors
// that do not echo the token.
func TestAuthOutermostAndRefusals(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	now := time.Now()
	b := setupAuth(t, auth.Config{
		Algorithm: "RS256", PublicKey: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})),
		Issuer: "https://idp", NowFunc: func() time.Time { return now },
	})
	rs := func(claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
		require.NoError(t, err)
		return s
	}
	big := []byte(`{"items":[{"queue":"q","payload":"` + strings.Repeat("x", 8192) + `"}]}`)
	status, raw := b.do("POST", "/api/v1/push", "", big)
	requireAuthError(t, status, raw, http.StatusUnauthorized, "Authentication required", "oversized body without token")
	writer := rs(jwt.MapClaims{"role": "write-only", "iss": "https://idp"})
	status, _ = b.do("POST", "/api/v1/push", "bearer "+writer, big)
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	status, raw = b.do("POST", "/api/v1/push", writer, []byte(`{"items":[{"queue":"q","payload":1}]}`))
	require.Equal(t, http.StatusCreated, status, "a bare token works: %s", raw)

	for _, tc := range []struct {
		name, authz, want string
	}{
		{"hs token against rs config", signedHS(t, jwt.MapClaims{"role": "admin"}), "Unsupported token algorithm"},
		{"alg none", "Bearer eyJhbGciOiJub25lIn0.eyJyb2xlIjoiYWRtaW4ifQ.", "Bad token header"},
		{"expired", "Bearer " + rs(jwt.MapClaims{"role": "admin", "iss": "https://idp", "exp": now.Unix() - 31}), "Token has expired"},
		{"not yet valid", "Bearer " + rs(jwt.MapClaims{"role": "admin", "iss": "https://idp", "nbf": now.Unix() + 31}), "Token not yet valid"},
		{"wrong issuer", "Bearer " + rs(jwt.MapClaims{"role": "admin", "iss": "https://evil"}), "Invalid token issuer"},
		{"garbage", "Bearer garbage", "Malformed token"},
	} {
		status, raw := b.do("GET", "/api/v1/dlq", tc.authz, nil)
		requireAuthError(t, status, raw, http.StatusUnauthorized, tc.want, tc.name)
		require.NotContains(t, string(raw), strings.TrimPrefix(tc.authz, "Bearer "), tc.name)
	}
}
