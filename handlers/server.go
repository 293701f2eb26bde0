// Package handlers is the broker's HTTP adapter: the strict server generated
// from openapi/openapi.yaml. Every data-plane operation decodes its request,
// makes one call to the data plane (handlers/broker) and renders the typed
// response the spec declares; the dashboard's read routes (the *_reads.go
// files, the only ones here that import gen/db) read the sqlc queries
// directly. One file per spec tag; docs/architecture.md has the map.
package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/aggcache"
	"github.com/queenforgo/queen/handlers/auth"
	"github.com/queenforgo/queen/handlers/broker"
	"github.com/queenforgo/queen/handlers/longpoll"
	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/handlers/metrics/exposition"
	"github.com/queenforgo/queen/handlers/migration"
)

// queueModeGroup is the consumer group of plain queue consumers.
const queueModeGroup = broker.QueueModeGroup

// MaxBodyBytesDefault caps a request body when Config.MaxBodyBytes is 0
// (QUEEN_MAX_BODY_BYTES).
const MaxBodyBytesDefault = 16 << 20

// Config is what the broker's main passes to New.
type Config struct {
	// Broker is the data plane every data-plane operation calls; its
	// lifecycle (Start, Stop) belongs to main.
	Broker *broker.Broker
	// Pool serves the dashboard's read routes and /health.
	Pool   *pgxpool.Pool
	Logger *slog.Logger

	// MaxBodyBytes caps a request body; larger bodies answer 413.
	MaxBodyBytes int64
	// Version is reported by /health.
	Version string
	// Auth, when set, guards every route with JWT authentication; nil means
	// auth is off and every client has full access (JWT-14).
	Auth *auth.Authenticator
	// ServerID names this broker in the /auth/me identity (cell_slug).
	ServerID string
	// Dashboard, when set, answers the paths no route matches outside /api/
	// and /streams/ (main wires web.New()); nil answers them 404.
	Dashboard http.Handler
	// StatsFlushFunc, when set, writes this broker's in-memory metrics to
	// the database (POST /api/v1/stats/refresh); main wires handlers/jobs.
	StatsFlushFunc func(ctx context.Context) error
	// Migration runs the pg_dump | pg_restore routes; nil answers them 501.
	Migration *migration.Runner
	// Collectors are added to /metrics/prometheus beside the built-in
	// families (handlers/metrics/exposition): main passes the broker's
	// Timings (the latency and group-commit histograms) here, and any other
	// part of the process that exposes families (the mesh's counters) plugs
	// in the same way.
	Collectors []prometheus.Collector
	// Tenancy (QUEEN_TENANCY_HEADER) reads each request's tenant from
	// x-queen-tenant, or from the token's claim (Auth's TenantClaim); off,
	// every request is the default tenant and the header is never read
	// (tenant.go, docs/tenancy.md).
	Tenancy bool
	// SharedState reports the broker-to-broker transports for the stats
	// route and /metrics/prometheus (shared_state.go); main wires the mesh
	// and PostgreSQL NOTIFY. nil reports no mesh.
	SharedState SharedState
	// AnswerCache, when set, keeps the expensive answers of the aggregate
	// read routes the dashboard polls for a few seconds (answer_cache.go);
	// nil computes every answer live. main wires one; the pool's owner
	// calls its Wait before closing the pool.
	AnswerCache *aggcache.Cache
	// LongPolls, when set, is the listener the http.Server serves: a pop
	// that parks for a second or more over HTTP/1.1 is then held outside
	// net/http and answered through it (handlers/longpoll). nil keeps
	// every parked pop in its handler's goroutine.
	LongPolls *longpoll.Listener
}

// ConfigDefault fills the zero fields of a Config.
func ConfigDefault(c Config) Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = MaxBodyBytesDefault
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	return c
}

// Server implements api.StrictServerInterface: each operation decodes its
// request, makes one broker call (or, for the dashboard's read routes, reads
// gen/db) and returns the typed response the spec declares.
type Server struct {
	cfg       Config
	b         *broker.Broker
	pool      *pgxpool.Pool
	log       *slog.Logger
	metrics   *metrics.Registry
	validator *requestValidator
	exp       *exposition.Exposition
	counting  countFlights // queue counts, one pass for the requests that ask at once (queue_counts_reads.go)
}

var _ api.StrictServerInterface = (*Server)(nil)

// New builds the server. It does no I/O and starts nothing.
func New(cfg Config) *Server {
	cfg = ConfigDefault(cfg)
	return &Server{
		cfg: cfg, b: cfg.Broker, pool: cfg.Pool, log: cfg.Logger,
		metrics: cfg.Broker.Metrics(),
	}
}

// Drain starts the graceful shutdown: /health answers 503 and parked
// long-polls return empty at once (the broker's Drain). Idempotent.
func (s *Server) Drain() { s.b.Drain() }

// Handler returns the whole HTTP chain: authentication (when Config.Auth is
// set), the request's tenant (when Config.Tenancy is on), body limit,
// request validation against the spec, the generated router and the strict
// handlers.
func (s *Server) Handler() (http.Handler, error) {
	validator, err := sharedValidator()
	if err != nil {
		return nil, err
	}
	s.validator = validator
	s.exp, err = exposition.New(exposition.Config{
		Metrics: s.metrics, Broker: s.b, Pool: s.pool, Logger: s.log, Collectors: append(slices.Clip(s.cfg.Collectors), sharedStateCollector{s}, newRepollCollector(s), newSharedReadCollector(s)),
	})
	if err != nil {
		return nil, err
	}
	strict := api.NewStrictHandlerWithOptions(s, []api.StrictMiddlewareFunc{s.clearAnswersAfter, s.holdLongPolls}, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc:  s.requestError,
		ResponseErrorHandlerFunc: s.responseError,
	})
	mux := http.NewServeMux()
	mux.Handle("/", s.fallback())
	api.HandlerWithOptions(strict, api.StdHTTPServerOptions{
		BaseRouter: mux,
		// The last is outermost: authorization, validation, then the push
		// and batch ack routes' own decoders (push_fast.go) in front of the
		// strict handler.
		Middlewares:      []api.MiddlewareFunc{s.fastBodyPath, validator.middleware(s), withAuthorization},
		ErrorHandlerFunc: s.requestError,
	})
	h := s.withTenant(s.limitBody(mux))
	if s.cfg.Auth != nil {
		// Outermost: a request without a valid token learns nothing from
		// the layers behind, not even that its body is too large.
		h = s.cfg.Auth.Middleware(h, WithSubject)
	}
	return h, nil
}

// limitBody caps request bodies so that one client cannot make the broker
// buffer an unbounded payload.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.cfg.MaxBodyBytes {
			writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// notFound answers unknown API paths with a JSON 404 (the reference sends
// plain text, which the clients cannot parse).
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/api/") || strings.HasPrefix(r.URL.Path, "/streams/") {
		writeError(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
		return
	}
	http.NotFound(w, r)
}

func ptr[T any](v T) *T { return &v }
func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
