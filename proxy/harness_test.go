package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/cmdtest"
	"github.com/queenforgo/queen/proxy"
	"github.com/queenforgo/queen/proxy/apikey"
	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/proxy/forward"
	"github.com/queenforgo/queen/proxy/limit"
	"github.com/queenforgo/queen/proxy/metrics"
	"github.com/queenforgo/queen/sql/migrate"
	"github.com/queenforgo/queen/sql/pgtest"
	"github.com/queenforgo/queen/sql/proxy/migrations"
)

// The tests of this package run the real broker (cmd/queen, built once per
// test process) against a harness database, and the proxy in process in
// front of it, with pxdb on another harness database.

func TestMain(m *testing.M) { pgtest.Main(m) }

// startBroker runs a broker on a fresh database and returns its base URL.
func startBroker(t testing.TB, extraEnv ...string) string {
	t.Helper()
	bin := cmdtest.Binary(t, "cmd/queen")
	u, err := url.Parse(pgtest.NewDB(t))
	require.NoError(t, err)
	port := freePort(t)
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PG") || strings.HasPrefix(name, "JWT_") || strings.HasPrefix(name, "QUEEN_") ||
			strings.HasPrefix(name, "FILE_BUFFER_") || name == "PORT" || name == "LOG_LEVEL" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PG_HOST="+u.Hostname(), "PG_PORT="+u.Port(), "PG_USER="+u.User.Username(),
		"PG_DB="+strings.TrimPrefix(u.Path, "/"), "QUEEN_BIND_ADDR=127.0.0.1", "PORT="+strconv.Itoa(port),
		"QUEEN_POP_REPOLL_MS=50", "DB_POOL_SIZE=5", "LOG_LEVEL=warn")
	cmd := exec.Command(bin)
	cmd.Env = append(env, extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	var mu sync.Mutex
	var log []string
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			log = append(log, sc.Text())
			mu.Unlock()
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		if t.Failed() {
			mu.Lock()
			t.Logf("broker log:\n%s", strings.Join(log, "\n"))
			mu.Unlock()
		}
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 20*time.Millisecond, "broker did not become healthy")
	return base
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// pxdb is the proxy's control-plane database of one test.
type pxdb struct {
	t    testing.TB
	pool *pgxpool.Pool
}

func newPXDB(t testing.TB) *pxdb {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), pgtest.NewEmptyDB(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, migrate.ApplySet(t.Context(), pool,
		migrate.Set{Schema: migrations.Schema, FS: migrations.FS, LockKey: migrations.LockKey}, nil))
	return &pxdb{t: t, pool: pool}
}

func (p *pxdb) exec(sql string, args ...any) {
	p.t.Helper()
	_, err := p.pool.Exec(p.t.Context(), sql, args...)
	require.NoError(p.t, err, sql)
}

func (p *pxdb) id(sql string, args ...any) uuid.UUID {
	p.t.Helper()
	var id uuid.UUID
	require.NoError(p.t, p.pool.QueryRow(p.t.Context(), sql, args...).Scan(&id), sql)
	return id
}

// cell registers a broker as a cell; secret nil sends no Authorization.
func (p *pxdb) cell(slug, baseURL string, secret *string) {
	p.exec(`INSERT INTO queen_proxy.cells (slug, base_url, cell_secret) VALUES ($1, $2, $3)`, slug, baseURL, secret)
}

// cluster creates a tenant and a cluster on a cell with a plan.
func (p *pxdb) cluster(slug, plan, cell string) uuid.UUID {
	tenant := p.id(`SELECT queen_proxy.create_tenant($1, $1)`, "t-"+slug)
	return p.id(`SELECT queen_proxy.create_cluster($1, $2, $3, $4)`, tenant, slug, plan, cell)
}

// key issues a key with scopes and returns it.
func (p *pxdb) key(cluster uuid.UUID, scopes ...string) string {
	p.t.Helper()
	key, hash, err := apikey.Generate("test")
	require.NoError(p.t, err)
	p.exec(`SELECT queen_proxy.issue_api_key($1, 'k', $2, $3)`, cluster, hash, scopes)
	return key
}

// proxyOptions tweak the in-process proxy.
type proxyOptions func(*proxy.Config)

// startProxy serves the pipeline in process on pxdb p (nil: dev-static
// only) and returns its base URL.
func startProxy(t testing.TB, p *pxdb, opts ...proxyOptions) string {
	t.Helper()
	m := metrics.New()
	cfg := proxy.Config{
		UpstreamTimeout: 35 * time.Second,
		LongPollMax:     90 * time.Second,
		LongPollMargin:  10 * time.Second,
		MaxBodyBytes:    16 << 20,
		MaxBatchItems:   10000,
		CellMaxParked:   5000,
		Enforce:         true,
		TenantHeader:    true,
		Forwarder:       forward.New(forward.Config{ConnectTimeout: 2 * time.Second, ObserveFunc: proxy.ObserveUpstream(m)}),
		Limiter:         limit.New(nil),
		Metrics:         m,
	}
	if p != nil {
		c := catalog.New(catalog.Config{Pool: p.pool, StaleGrace: time.Minute, Timeout: 5 * time.Second})
		c.Start()
		t.Cleanup(c.Stop)
		require.Eventually(t, c.Listening, 10*time.Second, 10*time.Millisecond)
		cfg.Catalog = c
	}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := proxy.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// answer is one response, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(a.body, &m), string(a.body))
	return m
}

// call sends method path with Host host (the cluster's subdomain) and the
// key as bearer ("" for none).
func call(t testing.TB, base, host, method, path, key string, body any, header ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, rd)
	require.NoError(t, err)
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{status: resp.StatusCode, header: resp.Header, body: raw}
}

// refused asserts the envelope of a refusal.
func refused(t testing.TB, a answer, status int, code string) {
	t.Helper()
	require.Equal(t, status, a.status, string(a.body))
	require.Equal(t, "application/json", a.header.Get("Content-Type"))
	require.Equal(t, code, a.json(t)["code"], string(a.body))
	require.NotEmpty(t, a.json(t)["error"])
}

func push(queue string, n int) map[string]any {
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"queue": queue, "partition": "p", "payload": map[string]any{"i": i}}
	}
	return map[string]any{"items": items}
}

func newForwarder() *forward.Forwarder {
	return forward.New(forward.Config{ConnectTimeout: 2 * time.Second})
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// Deadlines and ticks of the require.Eventually polls.
const (
	test5s   = 5 * time.Second
	test10ms = 10 * time.Millisecond
)
