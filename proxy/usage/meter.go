// Package usage meters what each cluster does through the proxy: per UTC
// minute and class of operation, the messages, requests and bytes in and
// out. Counters live in memory and are added to pxdb (usage_minutes) every
// flush interval, each flush one batch with an id of its own.
//
// Nothing counted is lost or counted twice: a batch pxdb does not confirm
// is written to the spool directory (QUEEN_PROXY_SPOOL_DIR) and replayed,
// oldest first, before anything newer, until pxdb confirms it; pxdb
// remembers batch ids, so a batch whose first commit did happen (the
// confirmation was what got lost) is not added again. If the spool cannot
// be written either, the batch goes back into memory for the next flush.
//
// After each flush the monthly quotas of the clusters metered are checked
// (the SQL function check_monthly_quotas: outbox events, push_blocked), and
// every rollup interval the closed days are rolled up and old minutes
// pruned.
package usage

import (
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/gen/routes"
)

// The classes of operation (usage_minutes.op_class).
const (
	ClassPush      = "push"
	ClassDelivery  = "delivery"
	ClassTxn       = "txn"
	ClassConfigure = "configure"
	ClassRead      = "read"
)

// ClassOf is the class a route of proxy class c is metered under: pushes,
// transactions, deliveries (pops, acks, leases), queue administration, and
// reads. Gated families: reads are reads, everything else (streams cycles,
// traces) counts as a transaction.
func ClassOf(c routes.ProxyClass, operationID string) string {
	switch c {
	case routes.ProxyProduce:
		if operationID == "executeTransaction" {
			return ClassTxn
		}
		return ClassPush
	case routes.ProxyConsume:
		return ClassDelivery
	case routes.ProxyQueueAdmin:
		return ClassConfigure
	case routes.ProxyGatedGrow, routes.ProxyGatedOpen, routes.ProxyGatedMixed:
		return ClassTxn
	}
	return ClassRead
}

// Counts are what one request, or one minute, adds up to.
type Counts struct {
	Msgs, Reqs, BytesIn, BytesOut int64
}

func (c *Counts) add(o Counts) {
	c.Msgs += o.Msgs
	c.Reqs += o.Reqs
	c.BytesIn += o.BytesIn
	c.BytesOut += o.BytesOut
}

// Defaults (PROXY.md §1.4).
const (
	FlushIntervalDefault  = 15 * time.Second
	RollupIntervalDefault = time.Hour
	KeepDaysDefault       = 90
	WarnPercentDefault    = 80
	SpoolDirDefault       = "./queen-proxy-spool"
)

// Config is what New needs.
type Config struct {
	Pool           *pgxpool.Pool
	SpoolDir       string        // QUEEN_PROXY_SPOOL_DIR
	FlushInterval  time.Duration // QUEEN_PROXY_METER_FLUSH_MS
	RollupInterval time.Duration // QUEEN_PROXY_ROLLUP_MS
	KeepDays       int           // QUEEN_PROXY_USAGE_KEEP_DAYS
	WarnPercent    int           // QUEEN_PROXY_QUOTA_WARN_PERCENT
	Timeout        time.Duration // PXDB_TIMEOUT_MS: bounds each write
	DrainTimeout   time.Duration // QUEEN_PROXY_SHUTDOWN_DRAIN_MS: the final flush at Stop
	Logger         *slog.Logger
	NowFunc        func() time.Time
}

// key is one row of usage_minutes.
type key struct {
	cluster uuid.UUID
	minute  int64 // Unix seconds of the UTC minute
	class   string
}

// Meter counts and flushes. Add is safe for concurrent use.
type Meter struct {
	cfg Config
	q   *pxdb.Queries

	mu     sync.Mutex
	counts map[key]*Counts

	flushMu sync.Mutex // one flush at a time: the spool is replayed in order

	startOnce, stopOnce sync.Once
	stop                chan struct{}
	done                chan struct{}
}

// New returns a Meter; it creates the spool directory.
func New(cfg Config) (*Meter, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = FlushIntervalDefault
	}
	if cfg.RollupInterval <= 0 {
		cfg.RollupInterval = RollupIntervalDefault
	}
	if cfg.KeepDays <= 0 {
		cfg.KeepDays = KeepDaysDefault
	}
	if cfg.WarnPercent <= 0 {
		cfg.WarnPercent = WarnPercentDefault
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = SpoolDirDefault
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 5 * time.Second
	}
	if err := prepareSpool(cfg.SpoolDir); err != nil {
		return nil, err
	}
	return &Meter{cfg: cfg, q: pxdb.New(cfg.Pool), counts: map[key]*Counts{},
		stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// Add counts c for cluster under class, in the current minute.
func (m *Meter) Add(cluster uuid.UUID, class string, c Counts) {
	k := key{cluster: cluster, minute: m.cfg.NowFunc().UTC().Truncate(time.Minute).Unix(), class: class}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.counts[k]; cur != nil {
		cur.add(c)
		return
	}
	m.counts[k] = &c
}

// take empties the counters into a new batch.
func (m *Meter) take() batch {
	m.mu.Lock()
	counts := m.counts
	m.counts = map[key]*Counts{}
	m.mu.Unlock()
	b := batch{ID: uuid.Must(uuid.NewV7())}
	for k, c := range counts {
		b.Rows = append(b.Rows, row{Cluster: k.cluster, Minute: time.Unix(k.minute, 0).UTC(), Class: k.class, Counts: *c})
	}
	return b
}

// putBack returns a batch that could be neither written nor spooled to the
// counters, for the next flush.
func (m *Meter) putBack(b batch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range b.Rows {
		k := key{cluster: r.Cluster, minute: r.Minute.Unix(), class: r.Class}
		if cur := m.counts[k]; cur != nil {
			cur.add(r.Counts)
		} else {
			c := r.Counts
			m.counts[k] = &c
		}
	}
}

// Pending is the number of rows counted and not flushed yet, for tests and
// the shutdown log.
func (m *Meter) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.counts)
}
