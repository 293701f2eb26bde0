// Package handlers implements the broker's HTTP API: the strict server
// generated from openapi/openapi.yaml, backed by the sqlc queries in gen/db.
package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/auth"
	"github.com/queenforgo/queen/handlers/crypto"
	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/handlers/migration"
	"github.com/queenforgo/queen/handlers/spool"
	"github.com/queenforgo/queen/handlers/waiters"
)

// queueModeGroup is the consumer group of plain queue consumers: one shared
// cursor, competing consumers.
const queueModeGroup = "__QUEUE_MODE__"

// Config is what the broker's main passes to New.
type Config struct {
	Pool   *pgxpool.Pool
	Logger *slog.Logger

	// DefaultBatch is the pop batch when the request has none.
	DefaultBatch int
	// DefaultTimeout is the long-poll deadline when the request has none.
	DefaultTimeout time.Duration
	// DefaultSubscriptionMode applies to named groups whose pop names none.
	DefaultSubscriptionMode string
	// RepollInterval is how often a parked long-poll looks again on its own,
	// for data committed by other brokers and for leases that expired.
	RepollInterval time.Duration
	// MaxBodyBytes caps a request body; larger bodies answer 413.
	MaxBodyBytes int64
	// Version is reported by /health.
	Version string
	// PushMaxBatch caps the items (messages or acks) committed by one
	// group-commit flush.
	PushMaxBatch int
	// PushMaxFlushes is how many group-commit flushes of each kind (push,
	// ack) may run at once. PushParallelMin is how many items must be
	// waiting before a flush starts beside a running one: below it, requests
	// queue while a flush commits and the next flush takes them all, which
	// maximises messages per commit for small pushes; at or above it, the
	// waiting batch is worth its own commit (coalescer.go, docs/benchmarks.md).
	PushMaxFlushes  int
	PushParallelMin int
	// Auth, when set, guards every route with JWT authentication; nil means
	// auth is off and every client has full access (JWT-14).
	Auth *auth.Authenticator
	// Cipher, when set, encrypts the payloads of queues with
	// encryptionEnabled and decrypts stored envelopes; nil means no
	// QUEEN_ENCRYPTION_KEY (see payload_crypto.go).
	Cipher *crypto.Cipher
	// ServerID names this broker in the /auth/me identity (cell_slug).
	ServerID string
	// Dashboard, when set, answers the paths no route matches outside /api/
	// and /streams/ (main wires web.New()); nil answers them 404.
	Dashboard http.Handler
	// Metrics holds the data-plane counters (handlers/metrics); nil makes
	// a new registry.
	Metrics *metrics.Registry
	// StatsFlushFunc, when set, writes this broker's in-memory metrics to
	// the database (POST /api/v1/stats/refresh); main wires handlers/jobs.
	StatsFlushFunc func(ctx context.Context) error
	// BufferGaugesFunc, when set, reports the disk spool for
	// /metrics/prometheus; nil reports an empty, healthy spool.
	BufferGaugesFunc func() BufferGauges
	// Migration runs the pg_dump | pg_restore routes; nil answers them 501.
	Migration *migration.Runner
	// Spool, when set, takes the pushes PostgreSQL cannot (and every push
	// during push maintenance) and the server drains it (push_spool.go);
	// main opens and closes it. nil: such pushes answer 503.
	Spool *spool.Spool
	// MaintenanceRefresh is how often the maintenance switches are re-read
	// from queen.system_state (system.go); 0 means 5 s.
	MaintenanceRefresh time.Duration
}

// ConfigDefault fills the zero fields of a Config.
func ConfigDefault(c Config) Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = metrics.New()
	}
	if c.DefaultBatch <= 0 {
		c.DefaultBatch = 1
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = 30 * time.Second
	}
	if c.RepollInterval <= 0 {
		c.RepollInterval = time.Second
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 16 << 20
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.PushMaxBatch <= 0 {
		c.PushMaxBatch = 2000
	}
	// The defaults of cmd/queen/config, measured in docs/benchmarks.md.
	if c.PushMaxFlushes <= 0 {
		c.PushMaxFlushes = 3
	}
	if c.PushParallelMin <= 0 {
		c.PushParallelMin = 300
	}
	return c
}

// Server implements api.StrictServerInterface.
type Server struct {
	cfg       Config
	pool      *pgxpool.Pool
	q         *db.Queries
	log       *slog.Logger
	queues    *queueCache
	waiters   *waiters.Registry
	pusher    *coalescer[pushItem, pushOutcome]
	validator *requestValidator
	acker     *coalescer[ackItem, api.AckResult]

	// watermarkAt is when this broker last advanced each (queue, group)
	// pop watermark after a non-empty scan (see watermarkDue).
	watermarkAt sync.Map

	// draining is set by the first shutdown signal: /health reports not
	// ready and parked long-polls end with an empty answer.
	draining atomic.Bool
	drainCh  chan struct{}

	payloads *payloadCrypto

	spool *spool.Spool // nil: no FILE_BUFFER_DIR
	maint *maintenance // system.go
}

var _ api.StrictServerInterface = (*Server)(nil)

// New builds the server and starts its push flushers; Close stops them.
func New(cfg Config) *Server {
	cfg = ConfigDefault(cfg)
	s := &Server{
		cfg:     cfg,
		pool:    cfg.Pool,
		q:       db.New(cfg.Pool),
		log:     cfg.Logger,
		queues:  newQueueCache(5 * time.Second),
		waiters: waiters.New(),
		drainCh: make(chan struct{}),
	}
	s.payloads = &payloadCrypto{cipher: cfg.Cipher, log: cfg.Logger}
	limits := coalescerLimits{MaxItems: cfg.PushMaxBatch, MaxFlushes: cfg.PushMaxFlushes, ParallelMin: cfg.PushParallelMin}
	s.pusher = newCoalescer(limits, s.pushDirect)
	s.acker = newCoalescer(limits, s.ackDirect)
	s.spool = cfg.Spool
	s.startReliability()
	return s
}

// Close flushes queued pushes and acks and stops the background work. Call it after
// the HTTP server has stopped taking requests. Idempotent.
func (s *Server) Close() {
	s.Drain()
	s.pusher.stop()
	s.acker.stop()
	s.stopReliability()
}

// Drain starts the graceful shutdown of the data plane: /health answers 503
// and parked long-polls return empty at once. Safe to call more than once.
func (s *Server) Drain() {
	if s.draining.CompareAndSwap(false, true) {
		close(s.drainCh)
	}
}

// Handler returns the whole HTTP chain: authentication (when Config.Auth is
// set), body limit, request validation against the spec, the generated
// router and the strict handlers.
func (s *Server) Handler() (http.Handler, error) {
	validator, err := newRequestValidator()
	if err != nil {
		return nil, err
	}
	s.validator = validator
	strict := api.NewStrictHandlerWithOptions(s, nil, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc:  s.requestError,
		ResponseErrorHandlerFunc: s.responseError,
	})
	mux := http.NewServeMux()
	mux.Handle("/", s.fallback())
	api.HandlerWithOptions(strict, api.StdHTTPServerOptions{
		BaseRouter:       mux,
		Middlewares:      []api.MiddlewareFunc{validator.middleware(s), withAuthorization},
		ErrorHandlerFunc: s.requestError,
	})
	h := s.limitBody(mux)
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

// notifyQueues wakes parked long-polls waiting on these queues.
func (s *Server) notifyQueues(ctx context.Context, names []string) {
	for _, name := range names {
		s.waiters.Notify(queueKey(name))
		if q, ok := s.queues.peek(name); ok {
			if q.Namespace != "" {
				s.waiters.Notify(namespaceKey(q.Namespace))
			}
			if q.Task != "" {
				s.waiters.Notify(taskKey(q.Task))
			}
		}
	}
}

func queueKey(name string) string   { return "q:" + name }
func namespaceKey(ns string) string { return "ns:" + ns }
func taskKey(task string) string    { return "task:" + task }
func ptr[T any](v T) *T             { return &v }
func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
