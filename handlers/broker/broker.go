// Package broker is the data plane: push (group commit, the queue cache,
// payload sealing, routing to the disk spool), pop (claims, watermarks, the
// long-poll wait), ack, transactions, stream cycles, dead letters, the
// maintenance switches and the data-plane metrics.
//
// It speaks domain types only (types.go) and returns the sentinel errors of
// errors.go; it never imports the wire types (gen/api) nor net/http. The
// HTTP adapter (package handlers) decodes a request, makes one call here and
// renders the answer. docs/architecture.md walks a push and a pop+ack
// through it.
//
// Lifecycle: New does no I/O and starts nothing; Start seeds the maintenance
// switches and starts the group commits, the maintenance reconcile, the
// shared re-poll of parked pops and the spool's drain; Stop commits what the group commits hold, stops everything
// and closes the spool. Both are idempotent.
package broker

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/crypto"
	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/handlers/spool"
	"github.com/queenforgo/queen/handlers/waiters"
)

// Defaults of Config; cmd/queen/config uses them for unset variables.
const (
	PopBatchDefault   = 1                // DEFAULT_BATCH_SIZE
	PopTimeoutDefault = 30 * time.Second // DEFAULT_TIMEOUT
	PopRepollDefault  = time.Second      // QUEEN_POP_REPOLL_MS
	// Group commit (QUEEN_PUSH_MAX_BATCH, QUEEN_PUSH_MAX_FLUSHES,
	// QUEEN_PUSH_PARALLEL_MIN), measured in docs/benchmarks.md.
	PushMaxBatchDefault    = 2000
	PushMaxFlushesDefault  = 3
	PushParallelMinDefault = 300
	// PushLingerDefault is how long, right after a push flush, the next one
	// may wait for the requests the last one answered (group_commit.go;
	// docs/benchmarks.md, "Performance round 2: push").
	PushLingerDefault = 2 * time.Millisecond
	// MaintenanceRefreshDefault is how often every broker re-reads the
	// switches, so that a flip made through one broker reaches all of them.
	MaintenanceRefreshDefault = 5 * time.Second
	// QueueCacheTTLDefault bounds how stale a cached queue row may be when
	// no announcement (QueueChanged) invalidated it.
	QueueCacheTTLDefault = 5 * time.Second
)

// Config is what New needs. Zero fields take their defaults (ConfigDefault).
type Config struct {
	Pool    *pgxpool.Pool
	Logger  *slog.Logger
	Metrics *metrics.Registry // nil: a registry of its own
	// Timings receives the durations of pushes, pops, acks and group-commit
	// flushes, for the latency histograms of /metrics/prometheus
	// (metrics.go); nil records none.
	Timings Timings

	// Cipher encrypts the payloads of queues with encryptionEnabled and
	// opens stored envelopes; nil means no QUEEN_ENCRYPTION_KEY (seal.go).
	Cipher *crypto.Cipher
	// Spool takes the pushes PostgreSQL cannot (and every push during push
	// maintenance). The broker owns it from New on: Start starts its drain,
	// Stop closes it. nil: such pushes fail with ErrSpoolUnavailable.
	Spool *spool.Spool
	// Notifier receives every announcement after this broker applied it
	// here (notifier.go); cmd/queen sets a transport that reaches the
	// other brokers. nil: this broker only.
	Notifier Notifier
	// ValidatePushFunc checks spooled records before their replay with the
	// same rules as a push (the spec's name rules, which the adapter owns);
	// a record it refuses is set aside by the spool. nil checks nothing.
	ValidatePushFunc func(items []PushItem) error

	DefaultBatch            int           // pop batch when the request has none
	DefaultTimeout          time.Duration // long-poll deadline when the request has none
	DefaultSubscriptionMode string        // for named groups whose pop names none
	// RepollInterval is how often the shared re-poll looks, in one
	// read-only statement for all parked long-polls, for what no wake-up
	// announces: leases that expired, delayed messages that came due,
	// window buffers that closed, and data committed by brokers that
	// announce nothing (repoll.go).
	RepollInterval time.Duration

	// PushMaxBatch caps the items (messages or acks) of one group-commit
	// flush. PushMaxFlushes is how many flushes of each kind run at once;
	// PushParallelMin is how many items must wait before a flush starts
	// beside a running one (group_commit.go).
	PushMaxBatch    int
	PushMaxFlushes  int
	PushParallelMin int
	// PushLinger: see PushLingerDefault; negative turns the wait off.
	PushLinger time.Duration

	MaintenanceRefresh time.Duration
	QueueCacheTTL      time.Duration
}

// ConfigDefault fills the zero fields of a Config.
func ConfigDefault(c Config) Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = metrics.New()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.DefaultTimeout, PopTimeoutDefault)
	def(&c.RepollInterval, PopRepollDefault)
	def(&c.MaintenanceRefresh, MaintenanceRefreshDefault)
	def(&c.QueueCacheTTL, QueueCacheTTLDefault)
	if c.PushLinger == 0 {
		c.PushLinger = PushLingerDefault
	}
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	defInt(&c.DefaultBatch, PopBatchDefault)
	defInt(&c.PushMaxBatch, PushMaxBatchDefault)
	defInt(&c.PushMaxFlushes, PushMaxFlushesDefault)
	defInt(&c.PushParallelMin, PushParallelMinDefault)
	return c
}

// Broker is the data plane of one broker process. Its methods are safe for
// concurrent use between Start and Stop.
type Broker struct {
	cfg    Config
	pool   *pgxpool.Pool
	q      *db.Queries
	log    *slog.Logger
	rec    *metrics.Registry
	timed  Timings
	queues *queueCache
	wait   *waiters.Registry[waitKey]
	// looks holds the same parked pops by what the shared re-poll looks at
	// (repoll.go); repolled counts its work.
	looks    *waiters.Registry[lookKey]
	repolled repollStats
	// Wake-up generations, for the whole broker and per wait key, and
	// what looks found empty at which generation (known_empty.go).
	wakeGen atomic.Uint64
	rounds  atomic.Uint64 // shared re-poll rounds started
	emptyMu sync.Mutex
	gens    map[waitKey]uint64
	excused map[lookKey]uint64 // generations answered by woken pops
	empty   map[lookKey]emptyState
	// dueLooks is, per look key, how many autoAck pops parked on it are
	// woken and have not started the look for it (due_looks.go).
	dueLooks dueLooks
	notify   Notifier // local, then cfg.Notifier
	seal     *sealer
	spool    *spool.Spool // nil: no FILE_BUFFER_DIR
	maint    *maintenance

	pusher *coalescer[PushItem, PushResult]
	acker  *coalescer[AckItem, AckResult]
	// mover commits the cursor moves of served autoAck claims together
	// (move_commit.go).
	mover *coalescer[moveItem, moveResult]
	// reader commits autoAck reads together (read_commit.go).
	reader *coalescer[readItem, []db.PartitionConsumerAutoAckReadRow]
	// delivered is what this broker's pops delivered under a lease, for
	// their acks (delivered.go).
	delivered *deliveries

	// watermarkAt is when this broker last advanced each (queue, group)
	// pop watermark after a non-empty scan (watermark.go).
	watermarkAt sync.Map
	// popHints is each (queue, group)'s start hint, fullScanAt when a
	// pop last scanned without it (watermark.go).
	popHints   sync.Map
	fullScanAt sync.Map
	// floor bounds what pushes still in flight can stamp (push_floor.go).
	floor pushFloor
	// race is what this broker knows of its own autoAck claims
	// (autoack_race.go).
	race autoAckRace
	// hinted counts the woken pops that claimed the partition their
	// push offered (pushed_hint.go).
	hinted hintStats
	// shared is what autoAck reads returned, kept for the other groups
	// (read_share.go).
	shared sharedReads
	// recent is what recent scans listed for the next pops (recent_scan.go).
	recent recentScans

	// draining is set by Drain: parked long-polls end with an empty answer.
	draining  atomic.Bool
	drainCh   chan struct{}
	drainOnce sync.Once

	life    sync.Mutex
	started bool
	stopped bool
	loops   sync.WaitGroup
	stopCh  chan struct{}
}

// New builds a broker. It does no I/O and starts nothing.
func New(cfg Config) *Broker {
	cfg = ConfigDefault(cfg)
	b := &Broker{
		cfg:     cfg,
		pool:    cfg.Pool,
		q:       db.New(cfg.Pool),
		log:     cfg.Logger,
		rec:     cfg.Metrics,
		timed:   cfg.Timings,
		queues:  newQueueCache(cfg.QueueCacheTTL),
		wait:    waiters.New[waitKey](),
		looks:   waiters.New[lookKey](),
		gens:    make(map[waitKey]uint64),
		excused: make(map[lookKey]uint64),
		empty:   make(map[lookKey]emptyState),
		seal:    &sealer{cipher: cfg.Cipher, log: cfg.Logger},
		spool:   cfg.Spool,
		maint:   newMaintenance(),
		drainCh: make(chan struct{}),
		stopCh:  make(chan struct{}),
	}
	b.delivered = newDeliveries(deliveriesMax)
	b.notify = b.Local()
	if cfg.Notifier != nil {
		b.notify = tee{b.Local(), cfg.Notifier}
	}
	limits := coalescerLimits{MaxItems: cfg.PushMaxBatch, MaxFlushes: cfg.PushMaxFlushes, ParallelMin: cfg.PushParallelMin}
	if b.timed == nil {
		b.timed = noTimings{}
	}
	pushLimits := limits
	pushLimits.Linger = cfg.PushLinger
	b.pusher = newCoalescer(pushLimits, b.pushDirect)
	b.pusher.flushed = func(items int, d time.Duration) { b.timed.Flush(FlushPush, items, d) }
	b.acker = newCoalescer(limits, b.ackDirect)
	b.acker.flushed = func(items int, d time.Duration) { b.timed.Flush(FlushAck, items, d) }
	b.mover = newMover(b)
	b.reader = newReader(b)
	return b
}

// Start seeds the maintenance switches from the database (bounded, best
// effort: a database down at boot leaves them off until the reconcile
// reaches it), then starts the group commits, the reconcile loop, the
// shared re-poll and the spool's drain. Idempotent; a stopped broker does not start again.
func (b *Broker) Start(ctx context.Context) error {
	b.life.Lock()
	defer b.life.Unlock()
	if b.started || b.stopped {
		return nil
	}
	b.started = true
	seedCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := b.reconcileMaintenance(seedCtx); err != nil {
		b.log.Warn("read maintenance switches at boot; both stay off until the database answers", "err", err)
	}
	cancel()
	b.pusher.start()
	b.acker.start()
	b.mover.start()
	b.reader.start()
	b.loops.Add(2)
	go func() {
		defer b.loops.Done()
		b.maintenanceLoop(b.cfg.MaintenanceRefresh)
	}()
	go func() {
		defer b.loops.Done()
		b.repollLoop(b.cfg.RepollInterval)
	}()
	if b.spool != nil {
		b.spool.StartDrain(b.ReplaySpooled)
	}
	return nil
}

// Stop ends parked long-polls, commits what the group commits hold, stops
// the reconcile loop and the drain, and closes the spool (what it still
// holds is replayed by the next start). Call it after the HTTP server
// stopped taking requests and before the pool closes. Idempotent.
func (b *Broker) Stop(context.Context) error {
	b.Drain()
	b.life.Lock()
	defer b.life.Unlock()
	if b.stopped {
		return nil
	}
	b.stopped = true
	b.pusher.stop()
	b.acker.stop()
	b.mover.stop()
	b.reader.stop()
	close(b.stopCh)
	b.loops.Wait()
	if b.spool != nil {
		return b.spool.Close()
	}
	return nil
}

// Drain starts the graceful shutdown of the data plane: parked long-polls
// return empty at once and new ones do not park. Idempotent.
func (b *Broker) Drain() {
	b.drainOnce.Do(func() {
		b.draining.Store(true)
		close(b.drainCh)
		// Parked pops wait on no channel (parked_pop.go): wake every
		// one; each sees draining and ends empty.
		b.wait.NotifyMatching(func(waitKey) bool { return true })
	})
}

// Draining reports whether Drain was called (/health answers 503).
func (b *Broker) Draining() bool { return b.draining.Load() }

// Metrics is the registry the data plane records into.
func (b *Broker) Metrics() *metrics.Registry { return b.rec }

// key is the QueueKey of queue in tenant.
func key(tenant, queue string) QueueKey { return QueueKey{Tenant: tenant, Queue: queue} }

func ptr[T any](v T) *T { return &v }
