package proxy_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy/clientip"
	"github.com/queenforgo/queen/proxy/identity"
	"github.com/queenforgo/queen/proxy/throttle"
)

// A session's whole life: the login page, a wrong password, a login (its
// audit row), the session on /auth/me and on the data plane, a logout (its
// audit row) after which the same cookie is refused everywhere.
func TestSessionLifecycle(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	tn := p.bootstrap("acme")
	base := startProxy(t, p, withPeople(t, p))

	page := send(t, base, tn.Host, "GET", "/auth/login?next=%2Fqueues", nil)
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, page.header.Get("Content-Type"), "text/html")
	require.Contains(t, string(page.body), `name="next" value="/queues"`)
	require.Contains(t, string(page.body), `src="data:image/svg+xml;base64,PHN2Zy`, "the logo is inline: any same-origin URL would redirect to the login")

	bad := postLogin(t, base, tn.Host, "admin@acme.test", "wrong", "/")
	require.Equal(t, http.StatusUnauthorized, bad.status)
	require.Contains(t, string(bad.body), "Invalid email or password.")
	unknown := postLogin(t, base, tn.Host, "nobody@acme.test", "wrong", "/")
	require.Equal(t, http.StatusUnauthorized, unknown.status, "an unknown email looks the same")
	require.Contains(t, string(unknown.body), "Invalid email or password.")

	before := p.lastOp()
	ok := postLogin(t, base, tn.Host, "Admin@Acme.test", "pw-acme", "/queues?x=1")
	require.Equal(t, http.StatusSeeOther, ok.status)
	require.Equal(t, "/queues?x=1", ok.header.Get("Location"))
	setCookie := ok.header.Get("Set-Cookie")
	for _, attr := range []string{"queen_session=", "Path=/", "HttpOnly", "SameSite=Lax", "Max-Age=3600"} {
		require.Contains(t, setCookie, attr)
	}
	require.NotContains(t, setCookie, "Secure", "plain HTTP from an untrusted peer")
	require.Equal(t, []op{{Action: "login", Actor: "user", ActorID: &tn.Admin, Target: ptr(tn.Admin.String()), Meta: map[string]any{}}},
		p.opsAfter(before))
	cookie := login(t, base, tn.Host, "admin@acme.test", "pw-acme")

	me := send(t, base, tn.Host, "GET", "/auth/me", nil, withCookie(cookie))
	require.Equal(t, http.StatusOK, me.status, string(me.body))
	m := me.json(t)
	require.Equal(t, "admin@acme.test", m["email"])
	require.Equal(t, "admin", m["role"])
	require.Equal(t, tn.Admin.String(), m["sub"])
	require.Equal(t, []any{"read-only", "write-only", "read-write", "admin"}, m["access"])
	require.Equal(t, map[string]any{"id": tn.Cluster.String(), "slug": "acme"}, m["acting_cluster"])
	require.Len(t, m["clusters"], 1)

	// The cookie on the data plane, as the dashboard's fetches send it.
	require.Equal(t, http.StatusOK, send(t, base, tn.Host, "GET", "/api/v1/resources/queues", nil, withCookie(cookie)).status)
	require.Equal(t, http.StatusCreated, send(t, base, tn.Host, "POST", "/api/v1/push", jsonBody(t, push("q", 1)),
		withCookie(cookie), withHeader("Content-Type", "application/json")).status)
	// A top-level navigation to an API path does not carry the session.
	refused(t, send(t, base, tn.Host, "GET", "/api/v1/pop/queue/q", nil, withCookie(cookie), withHeader("Sec-Fetch-Mode", "navigate")),
		http.StatusUnauthorized, "unauthorized")
	require.Equal(t, http.StatusOK, send(t, base, tn.Host, "GET", "/api/v1/pop/queue/q", nil, withCookie(cookie),
		withHeader("Sec-Fetch-Mode", "cors")).status)

	// A short bearer for scripts.
	st := send(t, base, tn.Host, "GET", "/auth/session-token", nil, withCookie(cookie))
	require.Equal(t, http.StatusOK, st.status, string(st.body))
	bearer := st.json(t)["token"].(string)
	require.EqualValues(t, 900, st.json(t)["expires_in"])
	require.Equal(t, http.StatusOK, call(t, base, tn.Host, "GET", "/api/v1/resources/queues", bearer, nil).status)

	before = p.lastOp()
	out := send(t, base, tn.Host, "POST", "/auth/logout", nil, withCookie(cookie))
	require.Equal(t, http.StatusOK, out.status)
	require.JSONEq(t, `{"ok":true}`, string(out.body))
	require.Contains(t, out.header.Get("Set-Cookie"), "Max-Age=0")
	ops := p.opsAfter(before)
	require.Len(t, ops, 1)
	require.Equal(t, "session_revoked", ops[0].Action)
	require.Equal(t, &tn.Admin, ops[0].ActorID)

	refused(t, send(t, base, tn.Host, "GET", "/auth/me", nil, withCookie(cookie)), http.StatusUnauthorized, "unauthorized")
	refused(t, send(t, base, tn.Host, "GET", "/api/v1/resources/queues", nil, withCookie(cookie)), http.StatusUnauthorized, "unauthorized")
	require.Equal(t, http.StatusOK, call(t, base, tn.Host, "GET", "/api/v1/resources/queues", bearer, nil).status,
		"a short bearer handed out before the logout lives its 15 minutes")

	jwks := send(t, base, tn.Host, "GET", "/.well-known/jwks.json", nil)
	require.Equal(t, http.StatusOK, jwks.status)
	require.Len(t, jwks.json(t)["keys"], 1)
}

// The login never sends the browser off this origin, whatever next says.
func TestLoginNextStaysHome(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	p.cell("cell-1", "http://127.0.0.1:1", nil)
	tn := p.bootstrap("acme")
	base := startProxy(t, p, withPeople(t, p, func(c *identity.Config) { c.Throttle = throttle.New(throttle.Config{PerAddress: 100}) }))
	for _, next := range []string{"//evil.com", "/\\evil.com", "https://evil.com/", "http:evil.com", "/%2F%2Fevil.com",
		"%2F%2Fevil.com", "/%5Cevil.com", "/%09/evil.com", " /x", "/\t/evil.com", "javascript:alert(1)", "/x://y"} {
		a := postLogin(t, base, tn.Host, "admin@acme.test", "pw-acme", next)
		require.Equal(t, http.StatusSeeOther, a.status, next)
		require.Equal(t, "/", a.header.Get("Location"), "next %q", next)
	}
	a := postLogin(t, base, tn.Host, "admin@acme.test", "pw-acme", "/queues/orders?a=1#x")
	require.Equal(t, "/queues/orders?a=1#x", a.header.Get("Location"))
}

func TestSafeNext(t *testing.T) {
	t.Parallel()
	for next, want := range map[string]string{
		"/": "/", "/queues": "/queues", "/a/b?c=d&e=%2F": "/a/b?c=d&e=%2F", "": "/", "//evil": "/", "///evil": "/",
		"/\\evil": "/", "\\\\evil": "/", "/%2fevil": "/", "/%2F%2Fevil": "/", "/%2f/evil": "/", "/%5C%5Cevil": "/",
		"/%5Cevil": "/", "https://evil": "/", "evil": "/", "/a://b": "/", "/%00": "/", "/%0a/": "/", "/ok%20x": "/ok%20x",
		"/é": "/", "/%E9": "/%E9",
	} {
		require.Equal(t, want, identity.SafeNext(next), "next %q", next)
	}
}

// The throttle engages per address after ten attempts a minute, and per
// account after five wrong passwords, and releases on the injected clock.
// X-Forwarded-For counts only from a trusted proxy.
func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	p := newPXDB(t)
	p.cell("cell-1", "http://127.0.0.1:1", nil)
	tn := p.bootstrap("acme")
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	th := throttle.New(throttle.Config{NowFunc: clock})
	base := startProxy(t, p, withPeople(t, p, func(c *identity.Config) { c.Throttle = th }))
	from := func(ip string) func(*http.Request) { return withHeader("X-Forwarded-For", ip) }

	for i := range 10 {
		a := postLogin(t, base, tn.Host, "u"+string(rune('a'+i))+"@acme.test", "x", "/", from("198.51.100.1"))
		require.Equal(t, http.StatusUnauthorized, a.status, "attempt %d", i+1)
	}
	a := postLogin(t, base, tn.Host, "admin@acme.test", "pw-acme", "/", from("198.51.100.2"))
	refused(t, a, http.StatusTooManyRequests, "rate_limited")
	require.Equal(t, "60", a.header.Get("Retry-After"), "X-Forwarded-For from an untrusted peer is ignored: one address")
	html := postLogin(t, base, tn.Host, "admin@acme.test", "pw-acme", "/", withHeader("Accept", "text/html"))
	require.Equal(t, http.StatusTooManyRequests, html.status)
	require.Contains(t, string(html.body), "Too many attempts")

	now = now.Add(time.Minute)
	require.Equal(t, http.StatusSeeOther, postLogin(t, base, tn.Host, "admin@acme.test", "pw-acme", "/").status, "released")

	// Per account, from addresses a trusted proxy vouches for.
	now = now.Add(time.Minute)
	trusting := startProxy(t, p, withPeople(t, p, func(c *identity.Config) {
		c.Throttle = th
		c.Trusted = mustTrust(t, "loopback")
	}))
	for i := range 5 {
		a := postLogin(t, trusting, tn.Host, "admin@acme.test", "wrong", "/", from("203.0.113."+string(rune('1'+i))))
		require.Equal(t, http.StatusUnauthorized, a.status, "failure %d", i+1)
	}
	locked := postLogin(t, trusting, tn.Host, "admin@acme.test", "pw-acme", "/", from("203.0.113.9"))
	refused(t, locked, http.StatusTooManyRequests, "rate_limited")
	require.Equal(t, "1", locked.header.Get("Retry-After"))
	require.Equal(t, http.StatusUnauthorized, postLogin(t, trusting, tn.Host, "other@acme.test", "x", "/", from("203.0.113.9")).status,
		"another account is not locked")
	now = now.Add(time.Second)
	require.Equal(t, http.StatusSeeOther, postLogin(t, trusting, tn.Host, "admin@acme.test", "pw-acme", "/", from("203.0.113.9")).status,
		"the backoff released")
}

// What a session may do is its live role on the cluster (PROXY.md §4.1); a
// role removed is refused once the grant's announcement arrives.
func TestSessionRoles(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	tn := p.bootstrap("acme")
	other := p.bootstrap("globex")
	p.user(tn, "viewer@acme.test", "viewer")
	base := startProxy(t, p, withPeople(t, p))
	cookie := login(t, base, tn.Host, "viewer@acme.test", "pw")
	pushReq := func(c *http.Cookie, extra ...func(*http.Request)) answer {
		return send(t, base, tn.Host, "POST", "/api/v1/push", jsonBody(t, push("q", 1)),
			append([]func(*http.Request){withCookie(c), withHeader("Content-Type", "application/json")}, extra...)...)
	}

	require.Equal(t, http.StatusOK, send(t, base, tn.Host, "GET", "/api/v1/resources/queues", nil, withCookie(cookie)).status)
	refused(t, pushReq(cookie), http.StatusForbidden, "forbidden")
	refused(t, send(t, base, tn.Host, "GET", "/api/v1/status", nil, withCookie(cookie)), http.StatusNotFound, "route_blocked")

	p.exec(`SELECT queen_proxy.grant_cluster_role($1, 'viewer@acme.test', 'producer')`, tn.Cluster)
	require.Eventually(t, func() bool { return pushReq(cookie).status == http.StatusCreated }, test5s, test10ms)
	p.exec(`SELECT queen_proxy.revoke_cluster_role($1, 'viewer@acme.test')`, tn.Cluster)
	require.Eventually(t, func() bool { return pushReq(cookie).status == http.StatusForbidden }, test5s, test10ms)
	a := send(t, base, tn.Host, "GET", "/api/v1/resources/queues", nil, withCookie(cookie))
	refused(t, a, http.StatusForbidden, "forbidden")
	require.Contains(t, string(a.body), "no role on this cluster")

	// x-queen-act-cluster: honoured for a session with a role there, the
	// same refusal for an unknown cluster and one without a role; refused
	// for a key and without a credential.
	admin := login(t, base, tn.Host, "admin@acme.test", "pw-acme")
	require.Equal(t, http.StatusOK, send(t, base, "127.0.0.1", "GET", "/api/v1/resources/queues", nil, withCookie(admin),
		withHeader("X-Queen-Act-Cluster", tn.Cluster.String())).status, "any host, by id")
	for _, act := range []string{"globex", other.Cluster.String(), "nope"} {
		a := send(t, base, tn.Host, "GET", "/api/v1/resources/queues", nil, withCookie(admin), withHeader("X-Queen-Act-Cluster", act))
		refused(t, a, http.StatusForbidden, "forbidden")
		require.Contains(t, string(a.body), "no such cluster, or no role on it")
	}
	refused(t, call(t, base, tn.Host, "GET", "/api/v1/resources/queues", tn.Key, nil, "X-Queen-Act-Cluster", "acme"), http.StatusForbidden, "forbidden")
	refused(t, call(t, base, tn.Host, "GET", "/api/v1/resources/queues", "", nil, "X-Queen-Act-Cluster", "acme"), http.StatusUnauthorized, "unauthorized")

	// A live operator reaches the operator routes; an operator flag is live
	// at once (user:<id>).
	refused(t, send(t, base, tn.Host, "GET", "/api/v1/status", nil, withCookie(admin)), http.StatusNotFound, "route_blocked")
	p.exec(`SELECT queen_proxy.set_operator('admin@acme.test', true)`)
	require.Eventually(t, func() bool {
		return send(t, base, tn.Host, "GET", "/api/v1/status", nil, withCookie(admin)).status == http.StatusOK
	}, test5s, test10ms)
	refused(t, call(t, base, tn.Host, "GET", "/api/v1/status", tn.Key, nil), http.StatusNotFound, "route_blocked")
}

// A state-changing request carrying the session cookie must come from the
// proxy's own origin.
func TestCSRF(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	tn := p.bootstrap("acme")
	base := startProxy(t, p, withPeople(t, p))
	cookie := login(t, base, tn.Host, "admin@acme.test", "pw-acme")
	origin := "http://" + tn.Host
	post := func(path string, headers ...string) answer {
		return send(t, base, tn.Host, "POST", path, jsonBody(t, push("q", 1)), func(r *http.Request) {
			r.AddCookie(cookie)
			r.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(headers); i += 2 {
				r.Header.Set(headers[i], headers[i+1])
			}
		})
	}
	for _, h := range [][]string{
		{"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Site", "same-site"}, {"Sec-Fetch-Site", "none"},
		{"Origin", "http://evil.test"}, {"Origin", "https://" + tn.Host}, {"Origin", "null"}, {},
	} {
		refused(t, post("/api/v1/push", h...), http.StatusForbidden, "csrf_rejected")
		refused(t, post("/api/console/keys", h...), http.StatusForbidden, "csrf_rejected")
		refused(t, post("/auth/logout", h...), http.StatusForbidden, "csrf_rejected")
	}
	require.Equal(t, http.StatusCreated, post("/api/v1/push", "Sec-Fetch-Site", "same-origin").status)
	require.Equal(t, http.StatusCreated, post("/api/v1/push", "Origin", strings.ToUpper(origin[:4])+origin[4:]).status)
	require.Equal(t, http.StatusCreated, post("/api/v1/push", "Authorization", "Bearer "+tn.Key).status,
		"an explicit credential wins over the cookie: nothing ambient to forge")
	require.Equal(t, http.StatusOK, send(t, base, tn.Host, "GET", "/api/v1/resources/queues", nil, func(r *http.Request) {
		r.AddCookie(cookie)
		r.Header.Set("Sec-Fetch-Site", "cross-site")
	}).status, "reads are not state-changing")
	// Still logged in: none of the forged logouts went through.
	require.Equal(t, http.StatusOK, send(t, base, tn.Host, "GET", "/auth/me", nil, withCookie(cookie)).status)
}

func mustTrust(t testing.TB, spec string) clientip.Trusted {
	t.Helper()
	tr, err := clientip.Parse(spec)
	require.NoError(t, err)
	return tr
}
