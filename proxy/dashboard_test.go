package proxy_test

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// The dashboard is the cluster's broker's own web app, and every byte of
// it needs a live human session: without one, a redirect to the login that
// no cache keeps and that brings the browser back where it was.
func TestDashboardBehindSession(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	tn := p.bootstrap("acme")
	p.bootstrap("globex")
	base := startProxy(t, p, withPeople(t, p))

	redirected := func(a answer, want string) {
		t.Helper()
		require.Equal(t, http.StatusFound, a.status, string(a.body))
		require.Equal(t, "no-store", a.header.Get("Cache-Control"))
		loc, err := url.Parse(a.header.Get("Location"))
		require.NoError(t, err)
		require.Equal(t, "/auth/login", loc.Path)
		require.Equal(t, want, loc.Query().Get("next"))
		require.Empty(t, a.body)
	}
	redirected(send(t, base, tn.Host, "GET", "/", nil), "/")
	redirected(send(t, base, tn.Host, "GET", "/queues/orders?x=1&y=%2F", nil), "/queues/orders?x=1&y=%2F")
	redirected(send(t, base, tn.Host, "GET", "/favicon.svg", nil), "/favicon.svg")
	redirected(send(t, base, tn.Host, "GET", "/", nil, withHeader("Authorization", "Bearer "+tn.Key)), "/")
	redirected(send(t, base, tn.Host, "GET", "/", nil, withHeader("Cookie", "queen_session="+tn.Key)), "/")
	redirected(send(t, base, tn.Host, "GET", "/", nil, withHeader("Cookie", "queen_session=garbage")), "/")

	cookie := login(t, base, tn.Host, "admin@acme.test", "pw-acme")
	index := send(t, base, tn.Host, "GET", "/", nil, withCookie(cookie))
	require.Equal(t, http.StatusOK, index.status, string(index.body))
	require.Contains(t, index.header.Get("Content-Type"), "text/html")
	require.Contains(t, string(index.body), `<title>Queen</title>`)
	route := send(t, base, tn.Host, "GET", "/queues/orders", nil, withCookie(cookie))
	require.Equal(t, http.StatusOK, route.status, "a client route gets the index")
	require.Equal(t, string(index.body), string(route.body))

	asset := regexp.MustCompile(`src="(/assets/v-[0-9a-f]+/app\.js)"`).FindStringSubmatch(string(index.body))
	require.Len(t, asset, 2, "the index links its versioned assets")
	js := send(t, base, tn.Host, "GET", asset[1], nil, withCookie(cookie))
	require.Equal(t, http.StatusOK, js.status)
	require.Equal(t, "private, max-age=31536000, immutable", js.header.Get("Cache-Control"), "behind a session, never public")
	redirected(send(t, base, tn.Host, "GET", asset[1], nil), asset[1])

	// The app's own API calls go through with the same cookie.
	require.Equal(t, http.StatusOK, send(t, base, tn.Host, "GET", "/health", nil, withCookie(cookie)).status)

	// Someone else's session is no way in; a logged-out one neither.
	globex := login(t, base, "globex.proxy.test", "admin@globex.test", "pw-globex")
	refused(t, send(t, base, tn.Host, "GET", "/", nil, withCookie(globex)), http.StatusForbidden, "forbidden")
	require.Equal(t, http.StatusOK, send(t, base, tn.Host, "POST", "/auth/logout", nil, withCookie(cookie)).status)
	redirected(send(t, base, tn.Host, "GET", "/", nil, withCookie(cookie)), "/")

	for _, bad := range []string{"/a/../auth/me", "//x", "/a%2Fb"} {
		refused(t, send(t, base, tn.Host, "GET", bad, nil), http.StatusNotFound, "route_blocked")
	}
	refused(t, send(t, base, tn.Host, "POST", "/", nil), http.StatusNotFound, "route_blocked")
}
