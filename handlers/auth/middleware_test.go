package auth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

type subjectKey struct{}

// serve runs one request through the middleware in front of a handler that
// answers 200 with the subject it was given.
func serve(t *testing.T, a *Authenticator, method, target, authz string) (int, string, http.Header) {
	t.Helper()
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sub, _ := r.Context().Value(subjectKey{}).(string)
		_, _ = w.Write([]byte("sub=" + sub))
	})
	h := a.Middleware(next, func(ctx context.Context, sub string) context.Context {
		return context.WithValue(ctx, subjectKey{}, sub)
	})
	req := httptest.NewRequest(method, target, nil)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Body.String(), w.Header()
}

func requireJSONError(t *testing.T, status int, body string, header http.Header, wantStatus int, want string) {
	t.Helper()
	require.Equal(t, wantStatus, status, body)
	require.Equal(t, "application/json", header.Get("Content-Type"))
	var e map[string]string
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	require.Equal(t, map[string]string{"error": want}, e)
}

func TestMiddleware(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	a := newAuth(t, Config{Secret: testSecret, Logger: logs.logger()})
	admin := hs256(t, jwt.MapClaims{"sub": "svc-a", "role": "admin"})
	ro := hs256(t, jwt.MapClaims{"sub": "reader", "role": "read-only"})
	anon := hs256(t, jwt.MapClaims{"role": "read-write"})

	// JWT-3: the three spellings of the same token.
	for _, h := range []string{"Bearer " + admin, "bearer " + admin, admin} {
		status, body, _ := serve(t, a, "GET", "/api/v1/pop/queue/q", h)
		require.Equal(t, http.StatusOK, status, body)
		require.Equal(t, "sub=svc-a", body, "sub reaches the handler")
	}
	status, body, _ := serve(t, a, "GET", "/api/v1/pop/queue/q", "Bearer "+anon)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "sub=", body, "no sub, no subject")

	status, body, header := serve(t, a, "GET", "/api/v1/pop/queue/q", "")
	requireJSONError(t, status, body, header, http.StatusUnauthorized, "Authentication required")
	require.Equal(t, "Bearer", header.Get("WWW-Authenticate"))
	status, body, header = serve(t, a, "GET", "/api/v1/pop/queue/q", "Bearer nope")
	requireJSONError(t, status, body, header, http.StatusUnauthorized, "Malformed token")
	status, body, header = serve(t, a, "GET", "/api/v1/pop/queue/q", "Bearer "+ro)
	requireJSONError(t, status, body, header, http.StatusForbidden, "Insufficient permissions")
	status, _, _ = serve(t, a, "GET", "/api/v1/dlq", "Bearer "+ro)
	require.Equal(t, http.StatusOK, status)

	// Unknown routes are read-write: no token 401, read-only 403.
	status, body, header = serve(t, a, "GET", "/api/v1/nope", "")
	requireJSONError(t, status, body, header, http.StatusUnauthorized, "Authentication required")
	status, body, header = serve(t, a, "GET", "/api/v1/nope", "Bearer "+ro)
	requireJSONError(t, status, body, header, http.StatusForbidden, "Insufficient permissions")

	// Public routes need no token and carry no identity even with one.
	status, body, _ = serve(t, a, "GET", "/health", "Bearer "+admin)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "sub=", body)

	require.NotContains(t, logs.String(), admin, "tokens are never logged")
	require.NotContains(t, logs.String(), ro)
	require.Contains(t, logs.String(), "request refused")
}

// JWT-10, JWT-11 and CFG-2: skip paths open what they name, and nothing can
// close the public routes.
func TestMiddlewareSkipPaths(t *testing.T) {
	t.Parallel()
	none := newAuth(t, Config{Secret: testSecret, SkipPaths: []string{}})
	for _, target := range []string{"/health", "/metrics", "/metrics/prometheus", "/", "/assets/index.js", "/favicon.ico", "/auth/me", "/auth/login"} {
		status, body, _ := serve(t, none, "GET", target, "")
		require.Equal(t, http.StatusOK, status, "%s: %s", target, body)
	}
	status, _, _ := serve(t, none, "POST", "/auth/logout", "")
	require.Equal(t, http.StatusOK, status)
	status, _, _ = serve(t, none, "GET", "/status", "")
	require.Equal(t, http.StatusUnauthorized, status)

	custom := newAuth(t, Config{Secret: testSecret, SkipPaths: []string{"/status", "/api/v1/dlq"}})
	status, _, _ = serve(t, custom, "GET", "/status", "")
	require.Equal(t, http.StatusOK, status)
	status, _, _ = serve(t, custom, "GET", "/api/v1/dlq", "")
	require.Equal(t, http.StatusOK, status)
	status, _, _ = serve(t, custom, "GET", "/api/v1/d%6cq", "")
	require.Equal(t, http.StatusUnauthorized, status, "an escaped spelling is not skipped")

	// The documented footgun: a prefix entry opens everything under it.
	open := newAuth(t, Config{Secret: testSecret, SkipPaths: []string{"/api/v1/"}})
	status, body, _ := serve(t, open, "DELETE", "/api/v1/resources/queues/q", "Bearer "+hs256(t, jwt.MapClaims{"sub": "x", "role": "admin"}))
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "sub=", body, "a skipped path is served with no identity")
}

// JWT-5: a server-side key problem is a 500 with a fixed message.
func TestMiddlewareServerKeyProblem(t *testing.T) {
	t.Parallel()
	a := newAuth(t, Config{Algorithm: "auto", PublicKey: pemOf(t, &rsaKeyA().PublicKey)})
	status, body, header := serve(t, a, "GET", "/api/v1/dlq", "Bearer "+hs256(t, jwt.MapClaims{"role": "admin"}))
	requireJSONError(t, status, body, header, http.StatusInternalServerError, "HS secret not configured")
	require.False(t, strings.Contains(body, testSecret))
}
