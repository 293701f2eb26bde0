package handlers

import (
	"io"
	"net/http"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers/auth"
)

// dashboardStub stands in for web.New(): it names the path it was asked.
var dashboardStub = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "dashboard "+r.URL.Path)
})

func getRaw(t *testing.T, url, authorization string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, res.Header.Get("Content-Type"), string(b)
}

// Config.Dashboard answers what no route matches, except under /api/ and
// /streams/, which keep their JSON 404; the routes of the spec are untouched.
func TestDashboardFallback(t *testing.T) {
	t.Parallel()
	b := setupWith(t, testConfig{Dashboard: dashboardStub})
	for _, p := range []string{"/", "/queues/orders", "/assets/app.js", "/favicon.svg"} {
		status, _, body := getRaw(t, b.url+p, "")
		require.Equal(t, http.StatusOK, status, p)
		require.Equal(t, "dashboard "+p, body)
	}
	for _, p := range []string{"/api/v1/nope", "/streams/v1/nope"} {
		status, ctype, body := getRaw(t, b.url+p, "")
		require.Equal(t, http.StatusNotFound, status, p)
		require.Equal(t, "application/json", ctype, p)
		require.Contains(t, body, "no route for GET "+p)
	}
	status, _, body := getRaw(t, b.url+"/health", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `"status"`)

	// Without a dashboard, the non-API paths stay a plain 404.
	plain := setupWith(t, testConfig{})
	status, ctype, _ := getRaw(t, plain.url+"/", "")
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "text/plain; charset=utf-8", ctype)
}

// With JWT on, auth runs before the dashboard: the shell is public (JWT-11),
// a client route is read-write like any other path outside the spec (JWT-9).
func TestDashboardBehindAuth(t *testing.T) {
	t.Parallel()
	a, err := auth.New(auth.Config{Secret: authSecret, SkipPaths: []string{}})
	require.NoError(t, err)
	b := setupWith(t, testConfig{Auth: a, Dashboard: dashboardStub})
	for _, p := range []string{"/", "/assets/v-0123456789ab/app.js", "/favicon.svg"} {
		status, _, body := getRaw(t, b.url+p, "")
		require.Equal(t, http.StatusOK, status, p)
		require.Equal(t, "dashboard "+p, body)
	}
	status, _, _ := getRaw(t, b.url+"/queues", "")
	require.Equal(t, http.StatusUnauthorized, status)
	status, _, body := getRaw(t, b.url+"/queues", signedHS(t, jwt.MapClaims{"sub": "ops", "role": "read-write"}))
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "dashboard /queues", body)
}
