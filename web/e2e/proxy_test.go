package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy"
	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/proxy/console"
	"github.com/queenforgo/queen/proxy/forward"
	"github.com/queenforgo/queen/proxy/identity"
	"github.com/queenforgo/queen/proxy/session"
	"github.com/queenforgo/queen/proxy/usage"
	"github.com/queenforgo/queen/sql/migrate"
	"github.com/queenforgo/queen/sql/pgtest"
	"github.com/queenforgo/queen/sql/proxy/migrations"
)

// The dashboard and the console behind queen-proxy, in a browser: sign in,
// see the broker's dashboard through the proxy, issue a key in the console
// and use it from an HTTP client, revoke it and see it refused, sign out
// and be sent back to the login page by the dashboard.
func TestProxyInBrowser(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	b.workload()
	front := startFront(t, b.url)
	br := startBrowser(t)
	p := br.newPage(t, front.url)

	// No session: the dashboard sends the browser to the login page.
	p.run(chromedp.Navigate(front.url + "/#/queues"))
	p.waitJS(`location.pathname === '/auth/login' && !!document.getElementById('login-submit')`)
	require.Equal(t, "/", p.eval(`new URLSearchParams(location.search).get('next')`))
	p.typeInto(`#email`, "admin@acme.test")
	p.typeInto(`#password`, "wrong password")
	p.click(`#login-submit`)
	p.waitAcrossNavigation(`!!document.getElementById('login-error')`)
	p.waitText(`#login-error`, "Invalid email or password.")
	p.screenshot("proxy-login")
	p.typeInto(`#password`, "s3cret-acme")
	p.click(`#login-submit`)

	// The broker's own dashboard, through the proxy, on the session.
	p.waitAcrossNavigation(`location.pathname === '/' && document.getElementById('view') !== null && document.getElementById('view').dataset.ready === '1'`)
	p.open("/", "overview")
	p.waitText(`[data-stat="Queues"] .stat-value`, "3")
	p.waitText(`#identity-text`, "admin")
	p.waitText(`#health`, "connected")
	p.screenshot("proxy-dashboard")
	p.open("/queues", "queues")
	p.waitJS(`document.querySelector('tr[data-queue="orders"]') !== null`)

	// The console: issue a key, shown once.
	p.run(chromedp.Navigate(front.url + "/console"))
	p.waitJS(`document.body.dataset.ready === '1'`)
	p.waitText(`#overview-facts`, "acme")
	p.typeInto(`#key-name`, "browser-ci")
	p.click(`#key-issue`)
	p.waitJS(`/^qk_live_/.test(document.getElementById('new-key').textContent)`)
	key := p.textOf(`#new-key`)
	require.Regexp(t, regexp.MustCompile(`^qk_live_[A-Za-z0-9_-]{43}$`), key)
	p.waitJS(`document.querySelector('tr[data-key-name="browser-ci"]') !== null`)

	// An HTTP client uses it; its usage shows in the console's chart.
	for range 3 {
		require.Equal(t, http.StatusCreated, front.call(t, "POST", "/api/v1/push", key,
			`{"items":[{"queue":"orders","partition":"eu","payload":{"from":"curl"}}]}`))
	}
	require.Eventually(t, func() bool {
		require.NoError(t, front.meter.Flush(t.Context()))
		var n int64
		require.NoError(t, front.pool.QueryRow(t.Context(), `SELECT coalesce(sum(msgs), 0) FROM queen_proxy.usage_minutes`).Scan(&n))
		return n >= 3
	}, stepTimeout, 50*time.Millisecond)
	p.click(`#new-key-done`)
	p.run(chromedp.Navigate(front.url + "/console"))
	p.waitJS(`document.body.dataset.ready === '1'`)
	p.eval(`document.getElementById('usage-hours').value = '3'; document.getElementById('usage-hours').dispatchEvent(new Event('change')); 'ok'`)
	p.waitJS(`document.querySelector('#usage-chart canvas') !== null`)
	p.waitText(`#overview-facts`, "3")
	p.screenshot("proxy-console")

	// Revoke it in the console: the client is refused.
	p.eval(`window.confirm = () => true; 'ok'`)
	p.click(`tr[data-key-name="browser-ci"] .key-revoke`)
	p.waitText(`tr[data-key-name="browser-ci"]`, "revoked")
	require.Eventually(t, func() bool {
		return front.call(t, "GET", "/api/v1/resources/queues", key, "") == http.StatusUnauthorized
	}, stepTimeout, 20*time.Millisecond)

	// Sign out: the dashboard is behind the login again.
	p.click(`#sign-out`)
	p.waitAcrossNavigation(`location.pathname === '/auth/login'`)
	p.run(chromedp.Navigate(front.url + "/"))
	p.waitJS(`location.pathname === '/auth/login' && !!document.getElementById('login-submit')`)
}

// waitAcrossNavigation is waitJS for a condition that a navigation under
// way (a form post, a redirect) will make true: a poll the navigation ends
// is started again in the new document, until stepTimeout.
func (p *page) waitAcrossNavigation(expr string) {
	p.t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		ctx, cancel := context.WithDeadline(p.ctx, deadline)
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(time.Until(deadline))))
		cancel()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			p.t.Fatalf("waiting for %s: %v\n--- page text ---\n%s", expr, err, p.text())
		}
	}
}

// front is queen-proxy in process, in front of one broker, with pxdb on a
// harness database and one tenant, acme, on the default cluster (the
// browser's host is an IP, which names no cluster).
type front struct {
	url   string
	pool  *pgxpool.Pool
	meter *usage.Meter
}

func startFront(t *testing.T, brokerURL string) *front {
	t.Helper()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, pgtest.NewEmptyDB(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, migrate.ApplySet(ctx, pool, migrate.Set{Schema: migrations.Schema, FS: migrations.FS, LockKey: migrations.LockKey}, nil))
	_, err = pool.Exec(ctx, `INSERT INTO queen_proxy.cells (slug, base_url) VALUES ('cell-1', $1)`, brokerURL)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT queen_proxy.bootstrap_tenant('acme', 'Acme', 'acme', 'pro', 'cell-1', 'admin@acme.test', 's3cret-acme')`)
	require.NoError(t, err)

	cat := catalog.New(catalog.Config{Pool: pool, StaleGrace: time.Minute})
	cat.Start()
	t.Cleanup(cat.Stop)
	require.Eventually(t, cat.Listening, stepTimeout, 10*time.Millisecond)
	_, sk, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(sk)
	require.NoError(t, err)
	tokens, err := session.New(session.Config{Issuer: "queen-proxy",
		Ed25519PEM: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))})
	require.NoError(t, err)
	meter, err := usage.New(usage.Config{Pool: pool, SpoolDir: t.TempDir()})
	require.NoError(t, err)
	h, err := proxy.New(proxy.Config{
		Catalog: cat, DefaultCluster: "acme", TenantHeader: true,
		UpstreamTimeout: 35 * time.Second, LongPollMax: 90 * time.Second, LongPollMargin: 10 * time.Second,
		MaxBodyBytes: 16 << 20, MaxBatchItems: 10000, CellMaxParked: 5000,
		Forwarder: forward.New(forward.Config{ConnectTimeout: 2 * time.Second}),
		Identity: identity.New(identity.Config{Tokens: tokens, Catalog: cat, Pool: pool,
			Cookie: session.Cookie{Name: "queen_session", TTL: time.Hour}}),
		Console: console.New(console.Config{Pool: pool}),
		Meter:   meter,
	})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &front{url: srv.URL, pool: pool, meter: meter}
}

// call sends a request with an API key, as curl would, and returns the
// status.
func (f *front) call(t *testing.T, method, path, key, body string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, f.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}
