// Package proxy is queen-proxy's HTTP handler: the front door that lets a
// Queen cell serve many customers (docs/proxy.md). A request goes to one of:
//
//   - the proxy's own routes: /healthz, /metrics/prometheus,
//     /.well-known/jwks.json, /auth/* (proxy/identity and /auth/me), the
//     console page /console and its API /api/console/*, and the operator
//     API /api/operator/* (proxy/console);
//   - the gateway, for the broker's paths (/api/, /streams/, /internal/,
//     /health, /status, /metrics): classify the method and raw path against
//     the spec's table (proxy/route), anything it cannot name exactly being
//     404 route_blocked before any credential is read; resolve the cluster
//     from the Host header (or the key on a shared host, or
//     x-queen-act-cluster for a session), then its status and plan feature
//     gates; authenticate the API key or the session and check its scopes
//     or role against the class; the cluster's limits; forward to the
//     cluster's cell with the cell's credential and the cluster's tenant
//     (proxy/forward); meter (proxy/usage);
//   - the dashboard, every other path: the broker's own web app, forwarded
//     from the cluster's cell for a live human session only.
//
// Before any of these but /healthz and /metrics/prometheus, a
// state-changing request authenticated by the session cookie must come from
// the proxy's own origin (csrf.go).
package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/proxy/console"
	"github.com/queenforgo/queen/proxy/forward"
	"github.com/queenforgo/queen/proxy/identity"
	"github.com/queenforgo/queen/proxy/inventory"
	"github.com/queenforgo/queen/proxy/limit"
	"github.com/queenforgo/queen/proxy/metrics"
	"github.com/queenforgo/queen/proxy/session"
	"github.com/queenforgo/queen/proxy/usage"
)

// DevCell is the dev-static upstream: one broker, no pxdb routing, every
// plan feature on and no limits.
type DevCell struct {
	BaseURL string  // QUEEN_PROXY_DEV_CELL_URL
	Token   *string // QUEEN_PROXY_DEV_CELL_TOKEN
	Tenant  string  // QUEEN_PROXY_DEV_TENANT
}

// Config is what New needs. Either Catalog or DevCell (or both) is set.
type Config struct {
	Catalog         *catalog.Catalog // pxdb; nil without PXDB_HOST
	DevCell         *DevCell         // dev-static; wins over host resolution
	SharedHosts     []string         // QUEEN_PROXY_SHARED_HOSTS: full host names, lower case
	DefaultCluster  string           // QUEEN_PROXY_DEFAULT_CLUSTER
	DevInsecure     bool             // QUEEN_PROXY_DEV_INSECURE: no authentication at all
	UpstreamTimeout time.Duration    // QUEEN_PROXY_UPSTREAM_TIMEOUT_MS
	LongPollMax     time.Duration    // QUEEN_PROXY_LONGPOLL_MAX_MS
	LongPollMargin  time.Duration    // QUEEN_PROXY_LONGPOLL_MARGIN_MS
	MaxBodyBytes    int64            // QUEEN_PROXY_MAX_BODY_BYTES
	MaxBatchItems   int64            // QUEEN_PROXY_MAX_BATCH_ITEMS: when the plan sets none
	CellMaxParked   int64            // QUEEN_PROXY_CELL_MAX_PARKED
	Enforce         bool             // QUEEN_PROXY_ENFORCE: false logs rate denials instead
	TenantHeader    bool             // QUEEN_PROXY_TENANT_HEADER
	Forwarder       *forward.Forwarder
	Limiter         *limit.Limiter
	Metrics         *metrics.Metrics
	Logger          *slog.Logger
	// Identity resolves sessions and serves /auth; nil is a proxy nobody
	// can sign in to.
	Identity *identity.Identity
	// Console serves the console page and the console and operator APIs;
	// nil without pxdb.
	Console *console.Console
	// Meter counts usage per cluster; nil meters nothing (no pxdb).
	Meter *usage.Meter
	// Inventory holds each cluster's queues and storage flag for the queue
	// and partition caps and the retained-bytes quota; nil checks none (no
	// pxdb).
	Inventory *inventory.Inventory
}

// Proxy is the handler.
type Proxy struct {
	cfg     Config
	shared  map[string]bool
	devCell *cluster // nil unless dev-static
}

// cluster is what the pipeline knows about the cluster a request is for.
type cluster struct {
	catalog.Cluster
	target forward.Target
	static bool // dev-static: no gates, no limits
}

// New returns the handler. cfg.DevCell.BaseURL must be a valid http(s) URL
// (the config checked it).
func New(cfg Config) (*Proxy, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Limiter == nil {
		cfg.Limiter = limit.New(nil)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if cfg.Identity == nil {
		none, err := session.New(session.Config{})
		if err != nil {
			return nil, err
		}
		cfg.Identity = identity.New(identity.Config{Tokens: none, Cookie: session.Cookie{Name: "queen_session"}})
	}
	p := &Proxy{cfg: cfg, shared: map[string]bool{}}
	for _, h := range cfg.SharedHosts {
		p.shared[canonicalHost(h)] = true
	}
	if d := cfg.DevCell; d != nil {
		target, err := newTarget(d.BaseURL, d.Token, d.Tenant, cfg.TenantHeader)
		if err != nil {
			return nil, err
		}
		p.devCell = &cluster{Cluster: catalog.Cluster{Slug: "dev", Status: catalog.StatusActive}, target: target, static: true}
	}
	return p, nil
}

// ServeHTTP runs the pipeline.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{ResponseWriter: w}
	id := newRequestID()
	rec.Header().Set(forward.HeaderRequestID, id)
	class := p.serve(rec, r, id)
	status := rec.status
	if status == 0 {
		status = 499 // the client left before anything was written
	}
	p.cfg.Metrics.Request(class, status)
}

// healthz is /healthz (PROXY.md §7.1): it checks neither pxdb nor a broker,
// and counts the shared hosts without naming them.
func (p *Proxy) healthz(w http.ResponseWriter) {
	body, _ := json.Marshal(map[string]any{
		"status": "ok", "enforce": p.cfg.Enforce, "tenant_header": p.cfg.TenantHeader,
		"shared_hosts": len(p.shared),
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// recorder remembers the status written and counts the body bytes, and
// lets ReverseProxy flush through it (http.ResponseController finds the
// writer with Unwrap).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// canonicalHost lower-cases a Host header and strips its port and a
// trailing root dot.
func canonicalHost(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	if strings.HasPrefix(h, "[") { // an IPv6 literal, maybe with a port
		if i := strings.IndexByte(h, ']'); i > 0 {
			return h[:i+1]
		}
		return h
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	return strings.TrimSuffix(h, ".")
}

type classKey struct{}

// ObserveUpstream is the forwarder's ObserveFunc: it records the broker's
// latency under the request's route class.
func ObserveUpstream(m *metrics.Metrics) func(*http.Request, time.Duration) {
	return func(r *http.Request, d time.Duration) {
		class, _ := r.Context().Value(classKey{}).(string)
		m.Upstream(class, d)
	}
}

// tenantOf renders a broker tenant the way the broker expects it.
func tenantOf(id uuid.UUID) string { return id.String() }
