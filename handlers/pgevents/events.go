// Package pgevents carries broker events through PostgreSQL LISTEN/NOTIFY:
// brokers that share a database wake each other's long-polls, and share
// queue configuration changes and the maintenance switches, with no peer
// list at all. It is the alternative to the mesh (package mesh) with the
// same shape, so cmd/queen can wire either behind the broker's notifier:
// the same outbound methods, and a Handler with the same methods as
// mesh.Handler. With the mesh on, brokers announce through the mesh, but
// the listener still runs: the SQL API notifies from SQL.
//
// # Use
//
//	ev, err := pgevents.New(pgevents.Config{Pool: pool, ServerID: id, Logger: log})
//	err = ev.Start(ctx, handler)   // starts the listener and the publisher
//	ev.QueuesReady(tenant, queues) // coalesced; never blocks
//	ev.QueueConfigChanged(tenant, queue, deleted)
//	ev.MaintenanceChanged(push, pop)
//	err = ev.Stop(ctx)             // idempotent
//
// # Wire
//
// Channel queen_events; each payload is a JSON object of at most MaxPayload
// bytes: {"v":1,"from":"<server id>","type":"ready","tenant":"<uuid>",
// "queues":["a","b"]}. type is ready (queues has at least one name),
// queue_config (queues named were configured; "deleted":true when they
// were deleted) or maintenance ("push" and/or "pop" booleans, no tenant:
// the switches are broker-wide). A batch that does not fit is split over
// several notifications, never truncated. from is absent when the sender is
// not a broker; a broker ignores what carries its own from, so ServerID
// must be unique among the brokers on a database. A received event without
// a valid tenant reaches the handler with tenant "" ("every tenant with
// these queue names").
//
// # Delivery
//
// One dedicated connection LISTENs, and reconnects with jittered
// exponential backoff when it is lost; events sent while it was down are
// missed, which the long-poll re-poll and the reconcile loop heal.
// Publishing goes through the pool from one goroutine: ready queues are
// coalesced (the first after a quiet spell goes at once, then at most one
// batch per Coalesce window), other events wait in a bounded queue, and a
// full queue or a failed NOTIFY drops the event and counts it. A NOTIFY
// costs a round trip and a commit; at high push rates the mesh is cheaper.
package pgevents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/gen/db"
)

// Channel is the LISTEN/NOTIFY channel of broker events.
const Channel = "queen_events"

// MaxPayload is the largest payload sent, under PostgreSQL's 8000-byte
// NOTIFY limit.
const MaxPayload = 7900

// DefaultTenant is the tenant of a broker without tenancy; an outbound call
// with an empty tenant announces it.
const DefaultTenant = "00000000-0000-0000-0000-000000000001"

// Defaults of Config.
const (
	// CoalesceDefault: a NOTIFY costs both the broker and PostgreSQL a
	// round trip and a transaction, and under a steady push load the broker
	// hears its own too; with a 2 ms window that was one per push flush and
	// about a tenth of the push's CPU (docs/benchmarks.md, "Round 3:
	// push"). The first announcement after a quiet spell still goes at
	// once; under load another broker's long-poll waits at most this much
	// longer.
	CoalesceDefault       = 10 * time.Millisecond
	ReconnectMinDefault   = 250 * time.Millisecond
	ReconnectMaxDefault   = 5 * time.Second
	PublishTimeoutDefault = 5 * time.Second
	ControlQueueDefault   = 256
)

// Config is the input of New. Zero durations and sizes take their defaults.
type Config struct {
	// Pool publishes; the listener opens its own connection with the pool's
	// connection settings.
	Pool *pgxpool.Pool
	// ServerID is the "from" of this broker's events, which its own
	// listener ignores; unique per broker on the database. Required.
	ServerID       string
	Coalesce       time.Duration // how long ready queues gather before the next batch
	ReconnectMin   time.Duration // first listener reconnect delay, doubled per failure
	ReconnectMax   time.Duration // largest reconnect delay
	PublishTimeout time.Duration // one NOTIFY, pool wait included
	ControlQueue   int           // configuration and maintenance events waiting to be sent
	Logger         *slog.Logger  // nil discards
}

// Handler receives other brokers' (and the SQL API's) events, on the
// listener's goroutine: its methods must be quick and must not block. A
// tenant of "" means "every tenant with these queue names".
type Handler interface {
	QueuesReady(tenant string, queues []string)
	QueueConfigChanged(tenant, queue string, deleted bool)
	PushMaintenanceChanged(enabled bool)
	PopMaintenanceChanged(enabled bool)
}

// Events is one broker's end of the NOTIFY channel.
type Events struct {
	cfg Config
	q   *db.Queries
	log *slog.Logger

	kick chan struct{}

	mu       sync.Mutex // guards the fields below
	ready    map[string]map[string]struct{}
	control  []event
	started  bool
	stopped  bool
	cancel   context.CancelFunc
	handlers Handler
	wg       sync.WaitGroup

	running   atomic.Bool
	listening atomic.Bool
	pid       atomic.Uint32
	stats     counters
}

// New checks the configuration and builds an Events. It does no I/O.
func New(cfg Config) (*Events, error) {
	if cfg.Pool == nil {
		return nil, errors.New("pgevents: Pool is required")
	}
	if cfg.ServerID == "" {
		return nil, errors.New("pgevents: ServerID is required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Coalesce, CoalesceDefault)
	def(&cfg.ReconnectMin, ReconnectMinDefault)
	def(&cfg.ReconnectMax, ReconnectMaxDefault)
	def(&cfg.PublishTimeout, PublishTimeoutDefault)
	cfg.ReconnectMax = max(cfg.ReconnectMax, cfg.ReconnectMin)
	if cfg.ControlQueue <= 0 {
		cfg.ControlQueue = ControlQueueDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Events{
		cfg:   cfg,
		q:     db.New(cfg.Pool),
		log:   cfg.Logger.With(slog.String("component", "pgevents")),
		kick:  make(chan struct{}, 1),
		ready: make(map[string]map[string]struct{}),
	}, nil
}

// Start starts the listener and the publisher; they run until Stop or until
// ctx ends. The database need not be up: the listener keeps retrying.
func (e *Events) Start(ctx context.Context, h Handler) error {
	if h == nil {
		return errors.New("pgevents: Start needs a Handler")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started || e.stopped {
		return errors.New("pgevents: already started")
	}
	e.started, e.handlers = true, h
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.cancel = cancel
	context.AfterFunc(ctx, e.shutdown)
	e.running.Store(true)
	e.wg.Add(2)
	go func() {
		defer e.wg.Done()
		e.listen(runCtx)
	}()
	go func() {
		defer e.wg.Done()
		e.publish(runCtx)
	}()
	return nil
}

// Stop ends the listener and the publisher (events not yet sent are
// dropped) and waits for them until ctx ends. Idempotent; safe without
// Start.
func (e *Events) Stop(ctx context.Context) error {
	e.shutdown()
	done := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pgevents: stop: %w", ctx.Err())
	}
}

func (e *Events) shutdown() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	e.stopped = true
	e.running.Store(false)
	if e.cancel != nil {
		e.cancel()
	}
}

// Listening reports whether the LISTEN connection is up.
func (e *Events) Listening() bool { return e.listening.Load() }

// QueuesReady announces that messages became poppable (or a lease was
// released) in these queues of the tenant ("" = DefaultTenant).
func (e *Events) QueuesReady(tenant string, queues []string) {
	if !e.running.Load() {
		return
	}
	if tenant == "" {
		tenant = DefaultTenant
	}
	e.mu.Lock()
	set := e.ready[tenant]
	for _, q := range queues {
		if q == "" {
			continue
		}
		if set == nil {
			set = make(map[string]struct{}, len(queues))
			e.ready[tenant] = set
		}
		set[q] = struct{}{}
	}
	e.mu.Unlock()
	e.wake()
}

// QueueConfigChanged announces that a queue was configured or deleted, so
// that other brokers drop its cached settings (lease time, encryption flag).
func (e *Events) QueueConfigChanged(tenant, queue string, deleted bool) {
	if queue == "" {
		return
	}
	if tenant == "" {
		tenant = DefaultTenant
	}
	e.enqueue(event{Type: TypeQueueConfig, Tenant: tenant, Queues: []string{queue}, Deleted: deleted})
}

// MaintenanceChanged announces both maintenance switches' current state.
func (e *Events) MaintenanceChanged(push, pop bool) {
	e.enqueue(event{Type: TypeMaintenance, Push: &push, Pop: &pop})
}

func (e *Events) enqueue(ev event) {
	if !e.running.Load() {
		return
	}
	e.mu.Lock()
	full := len(e.control) >= e.cfg.ControlQueue
	if !full {
		e.control = append(e.control, ev)
	}
	e.mu.Unlock()
	if full {
		e.stats.dropped.Add(1)
		return
	}
	e.wake()
}

func (e *Events) wake() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}
