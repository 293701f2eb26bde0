package proxy_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy"
	"github.com/queenforgo/queen/proxy/console"
	"github.com/queenforgo/queen/proxy/identity"
	"github.com/queenforgo/queen/proxy/session"
)

// The people side of the harness: sessions, the console, and the users of
// a bootstrapped tenant.

// edKey is a PKCS#8 PEM Ed25519 private key.
func edKey(t testing.TB) string {
	t.Helper()
	_, sk, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(sk)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// withPeople wires sessions (a fresh Ed25519 key), the console and
// operators (enabled) into a proxy on pxdb p; edits tune the identity.
func withPeople(t testing.TB, p *pxdb, edits ...func(*identity.Config)) proxyOptions {
	return func(cfg *proxy.Config) {
		tokens, err := session.New(session.Config{Ed25519PEM: edKey(t), Issuer: "queen-proxy"})
		require.NoError(t, err)
		icfg := identity.Config{Tokens: tokens, Cookie: session.Cookie{Name: "queen_session", TTL: time.Hour},
			Catalog: cfg.Catalog, Pool: p.pool, OperatorEnabled: true, Timeout: 5 * time.Second}
		for _, e := range edits {
			e(&icfg)
		}
		cfg.Identity = identity.New(icfg)
		cfg.Console = console.New(console.Config{Pool: p.pool})
	}
}

// tenant is a bootstrapped tenant: its cluster, admin and first key.
type tenant struct {
	ID, Cluster, Admin uuid.UUID
	Key                string
	Host               string
}

// bootstrap onboards a tenant with bootstrap_tenant (admin password
// "pw-"+slug) on cell "cell-1".
func (p *pxdb) bootstrap(slug string) tenant {
	p.t.Helper()
	var raw []byte
	require.NoError(p.t, p.pool.QueryRow(p.t.Context(),
		`SELECT queen_proxy.bootstrap_tenant($1, $1, $1, 'pro', 'cell-1', $2, $3)`, slug, "admin@"+slug+".test", "pw-"+slug).Scan(&raw))
	var b struct {
		TenantID  uuid.UUID `json:"tenant_id"`
		ClusterID uuid.UUID `json:"cluster_id"`
		UserID    uuid.UUID `json:"user_id"`
		APIKey    string    `json:"api_key"`
	}
	require.NoError(p.t, json.Unmarshal(raw, &b))
	return tenant{ID: b.TenantID, Cluster: b.ClusterID, Admin: b.UserID, Key: b.APIKey, Host: slug + ".proxy.test"}
}

// user creates a user of the tenant with a password and, unless role is
// "", a role on its cluster.
func (p *pxdb) user(tn tenant, email, role string) uuid.UUID {
	p.t.Helper()
	id := p.id(`SELECT queen_proxy.create_user($1, $2, public.crypt('pw', public.gen_salt('bf', 4)))`, tn.ID, email)
	if role != "" {
		p.exec(`SELECT queen_proxy.grant_cluster_role($1, $2, $3)`, tn.Cluster, email, role)
	}
	return id
}

// op is one audit row, as the golden tests compare them.
type op struct {
	Action  string
	Actor   string
	ActorID *uuid.UUID
	Target  *string
	Meta    map[string]any
}

func (p *pxdb) lastOp() int64 {
	p.t.Helper()
	var id int64
	require.NoError(p.t, p.pool.QueryRow(p.t.Context(), `SELECT coalesce(max(id), 0) FROM queen_proxy.operations`).Scan(&id))
	return id
}

func (p *pxdb) opsAfter(id int64) []op {
	p.t.Helper()
	rows, err := p.pool.Query(p.t.Context(),
		`SELECT action, actor, actor_id, target, meta FROM queen_proxy.operations WHERE id > $1 ORDER BY id`, id)
	require.NoError(p.t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (op, error) {
		var o op
		err := r.Scan(&o.Action, &o.Actor, &o.ActorID, &o.Target, &o.Meta)
		return o, err
	})
	require.NoError(p.t, err)
	return out
}

func ptr[T any](v T) *T { return &v }

// noRedirect is a client that hands back redirects instead of following.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// send is call with a client that does not follow redirects and edits to
// the request (cookies, headers).
func send(t testing.TB, base, host, method, path string, body io.Reader, edits ...func(*http.Request)) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, body)
	require.NoError(t, err)
	req.Host = host
	for _, e := range edits {
		e(req)
	}
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{status: resp.StatusCode, header: resp.Header, body: raw}
}

// withCookie sends the session cookie; same-origin marks the request as
// the browser marks its own page's requests.
func withCookie(c *http.Cookie) func(*http.Request) {
	return func(r *http.Request) {
		r.AddCookie(c)
		r.Header.Set("Sec-Fetch-Site", "same-origin")
	}
}

func withHeader(kv ...string) func(*http.Request) {
	return func(r *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			r.Header.Set(kv[i], kv[i+1])
		}
	}
}

func jsonBody(t testing.TB, v any) io.Reader {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return strings.NewReader(string(raw))
}

// login posts the form and returns the session cookie.
func login(t testing.TB, base, host, email, password string) *http.Cookie {
	t.Helper()
	a := postLogin(t, base, host, email, password, "/")
	require.Equal(t, http.StatusSeeOther, a.status, string(a.body))
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == "queen_session" && c.Value != "" {
			return &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	t.Fatal("no session cookie set")
	return nil
}

func postLogin(t testing.TB, base, host, email, password, next string, edits ...func(*http.Request)) answer {
	t.Helper()
	form := url.Values{"email": {email}, "password": {password}, "next": {next}}
	return send(t, base, host, "POST", "/auth/login", strings.NewReader(form.Encode()),
		append([]func(*http.Request){withHeader("Content-Type", "application/x-www-form-urlencoded")}, edits...)...)
}
