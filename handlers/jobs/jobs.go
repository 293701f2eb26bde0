// Package jobs runs the broker's background services: the metrics collector
// (per-minute throughput, lag and process rows, see handlers/metrics), the
// retention and eviction of messages, the cleanup of old metrics rows, and
// the statistics watch (statswatch.go).
//
// Every service is safe with several brokers on one database: a broker's
// collector writes only its own rows (additive upserts), and retention,
// eviction and cleanup run on one broker at a time under an advisory lock
// taken per run (a broker that finds it taken skips the run). Their cost
// follows activity, not size: the collector writes one row per queue that
// saw traffic in the minute, and the deletions walk the messages' created_at
// index from the oldest message, so idle partitions are never visited.
//
// Time is injected: the loops pass the wall clock to Tick, RunRetention,
// RunEviction and RunCleanup, and tests call those directly with the time
// they want.
package jobs

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/handlers/planmode"
)

// Defaults of Config. The intervals are the reference broker's.
const (
	SampleIntervalDefault    = time.Second
	RetentionIntervalDefault = 5 * time.Minute
	EvictionIntervalDefault  = time.Minute
	CleanupIntervalDefault   = time.Hour
	// MetricsRetentionDefault bounds the per-minute worker and queue rows.
	MetricsRetentionDefault = 7 * 24 * time.Hour
	// HistoryRetentionDefault bounds system metrics and retention history
	// (METRICS_RETENTION_DAYS in the reference: 90).
	HistoryRetentionDefault = 90 * 24 * time.Hour
	// PartitionRetentionDefault is how long an empty partition is kept
	// after its last message (PARTITION_CLEANUP_DAYS in the reference: 30).
	PartitionRetentionDefault = 30 * 24 * time.Hour
	BatchSizeDefault          = 1000
	MaxBatchesDefault         = 100
)

// Advisory lock keys: one per job kind, so retention and eviction of
// different brokers may overlap but never run twice at once.
const (
	lockRetention int64 = 0x7175656e72657431 // "queenret1"
	lockEviction  int64 = 0x7175656e65766331 // "queenevc1"
	lockCleanup   int64 = 0x7175656e636c6e31 // "queencln1"
)

// Config is what New needs.
type Config struct {
	Pool    *pgxpool.Pool
	Metrics *metrics.Registry
	Logger  *slog.Logger

	// Hostname, Port and PID name this broker in the metrics rows.
	Hostname string
	Port     int
	PID      int

	SampleInterval    time.Duration
	RetentionInterval time.Duration
	EvictionInterval  time.Duration
	CleanupInterval   time.Duration
	// StatsWatchInterval: how often RunStatsWatch looks at the statistics.
	StatsWatchInterval time.Duration
	MetricsRetention   time.Duration
	HistoryRetention   time.Duration
	// PartitionRetention: empty partitions whose last message is older go.
	PartitionRetention time.Duration
	// BatchSize is the most rows one DELETE removes; MaxBatches the most
	// DELETEs per queue and kind in one run, so a run stays short and the
	// rest waits for the next one.
	BatchSize  int
	MaxBatches int

	// JobQueueFunc, when set, reports work waiting inside the broker (for
	// the job-queue gauge); nil reports 0.
	JobQueueFunc func() int
}

// ConfigDefault fills the zero fields of a Config.
func ConfigDefault(c Config) Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = metrics.New()
	}
	if c.Hostname == "" {
		c.Hostname, _ = os.Hostname()
		if c.Hostname == "" {
			c.Hostname = "localhost"
		}
	}
	if c.PID == 0 {
		c.PID = os.Getpid()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.SampleInterval, SampleIntervalDefault)
	def(&c.RetentionInterval, RetentionIntervalDefault)
	def(&c.EvictionInterval, EvictionIntervalDefault)
	def(&c.CleanupInterval, CleanupIntervalDefault)
	def(&c.StatsWatchInterval, StatsWatchIntervalDefault)
	def(&c.MetricsRetention, MetricsRetentionDefault)
	def(&c.HistoryRetention, HistoryRetentionDefault)
	def(&c.PartitionRetention, PartitionRetentionDefault)
	if c.BatchSize <= 0 {
		c.BatchSize = BatchSizeDefault
	}
	if c.MaxBatches <= 0 {
		c.MaxBatches = MaxBatchesDefault
	}
	return c
}

// Services owns the background loops. Start and Stop are idempotent.
type Services struct {
	cfg       Config
	q         *db.Queries
	log       *slog.Logger
	collector *collector

	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New builds the services; nothing runs until Start.
func New(cfg Config) *Services {
	cfg = ConfigDefault(cfg)
	// Planned with their arguments at every run: a generic plan of the
	// DELETEs scans every message (handlers/planmode).
	s := &Services{cfg: cfg, q: db.New(planmode.Custom(cfg.Pool)), log: cfg.Logger}
	s.collector = newCollector(cfg, s.q)
	return s
}

// Metrics is the registry the collector reads.
func (s *Services) Metrics() *metrics.Registry { return s.cfg.Metrics }

// Start launches the loops. Calling it again, or after Stop, does nothing.
func (s *Services) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	s.loop(ctx, "metrics collector", s.cfg.SampleInterval, func(ctx context.Context, now time.Time) error {
		// How late the timer was served is the scheduler's lag, the Go
		// counterpart of the reference's event-loop lag.
		return s.collector.tickLagged(ctx, now, time.Since(now))
	})
	s.loop(ctx, "retention", s.cfg.RetentionInterval, func(ctx context.Context, now time.Time) error {
		_, err := s.RunRetention(ctx, now)
		return err
	})
	s.loop(ctx, "eviction", s.cfg.EvictionInterval, func(ctx context.Context, now time.Time) error {
		_, err := s.RunEviction(ctx, now)
		return err
	})
	s.loop(ctx, "metrics cleanup", s.cfg.CleanupInterval, func(ctx context.Context, now time.Time) error {
		_, err := s.RunCleanup(ctx, now)
		return err
	})
	s.loop(ctx, "statistics watch", s.cfg.StatsWatchInterval, func(ctx context.Context, _ time.Time) error {
		_, err := s.RunStatsWatch(ctx)
		return err
	})
}

// Stop ends the loops, waits for a running job to finish, and writes the
// collector's last counters. Safe to call more than once, and without Start.
func (s *Services) Stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	started := s.started
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if !started {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Flush(ctx, time.Now()); err != nil {
		s.log.Warn("final metrics flush failed", "err", err)
	}
}

// loop runs fn every interval until ctx ends. A failed run is logged and the
// loop goes on.
func (s *Services) loop(ctx context.Context, name string, every time.Duration, fn func(context.Context, time.Time) error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if err := fn(ctx, now); err != nil && ctx.Err() == nil {
					s.log.Warn("background job failed", "job", name, "err", err)
				}
			}
		}
	}()
}

// Tick is one collector step at now: take a sample of the gauges and, when
// now is in a later minute than the one being accumulated, write that minute.
func (s *Services) Tick(ctx context.Context, now time.Time) error {
	return s.collector.tick(ctx, now)
}

// Flush writes the counters and gauges accumulated so far in the current
// minute now (POST /api/v1/stats/refresh, shutdown, tests). Counters are
// added, so the rest of the minute is still counted by the next write.
func (s *Services) Flush(ctx context.Context, now time.Time) error {
	return s.collector.flushNow(ctx, now)
}
