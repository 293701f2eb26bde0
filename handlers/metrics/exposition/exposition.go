// Package exposition is the broker's Prometheus exposition,
// /metrics/prometheus, through prometheus/client_golang.
//
// One registry holds:
//
//   - the reference broker's families, under their names and labels, so
//     that existing dashboards and alerts keep working: this broker's own
//     (uptime, CPU, memory, pool, disk spool, maintenance, per-process
//     counters, parked long-polls; process.go) and the cluster's, read from
//     the metrics tables the collectors of every broker write (cluster.go,
//     cached for a few seconds, so that scrapes never add load that grows
//     with the number of queues or partitions);
//   - the PostgreSQL pool's statistics (pgxpool.Stat; pool.go);
//   - the Go runtime and process collectors of client_golang (go_*,
//     process_*);
//   - the collectors main adds (Config.Collectors): the data plane's
//     latency and group-commit histograms (Timings, timings.go), and any
//     other family, such as the mesh's counters, which plug in there.
//
// Every family is written per scrape from live values; nothing here runs in
// the background.
package exposition

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/handlers/spool"
)

// ContentType is the media type of the exposition: the text format 0.0.4,
// as the reference broker serves it.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Defaults of Config.
const (
	// ClusterCacheTTLDefault is how long the families read from the
	// database are reused: scrapes of several Prometheus servers, or one
	// scraping often, cost the database one read per period.
	ClusterCacheTTLDefault = 5 * time.Second
	// ClusterTimeoutDefault bounds that read; past it the scrape is served
	// without the cluster families.
	ClusterTimeoutDefault = 5 * time.Second
)

// Broker is what the exposition reads of the data plane (handlers/broker
// implements it).
type Broker interface {
	// SpoolStats is the disk spool's state; configured is false without
	// FILE_BUFFER_DIR.
	SpoolStats() (st spool.Stats, configured bool)
	// Maintenance is the push and pop switches as this broker applies them.
	Maintenance() (push, pop bool)
}

// Config is what New needs. Zero durations take their defaults.
type Config struct {
	Metrics *metrics.Registry // this broker's counters since boot
	Broker  Broker
	Pool    *pgxpool.Pool // its statistics, and the cluster families' reads
	Logger  *slog.Logger

	ClusterCacheTTL time.Duration
	ClusterTimeout  time.Duration
	// now is the cache's clock; tests of this package set it.
	now func() time.Time

	// Collectors are registered beside the built-in ones: the data plane's
	// Timings, and any family another part of the broker exposes (the
	// mesh's counters: prometheus.NewCounterFunc, or a Collector of its
	// own). A name that clashes with another family fails New.
	Collectors []prometheus.Collector
}

// Exposition gathers every family for a scrape.
type Exposition struct {
	reg *prometheus.Registry
}

// New registers the families. It does no I/O.
func New(cfg Config) (*Exposition, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ClusterCacheTTL <= 0 {
		cfg.ClusterCacheTTL = ClusterCacheTTLDefault
	}
	if cfg.ClusterTimeout <= 0 {
		cfg.ClusterTimeout = ClusterTimeoutDefault
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	reg := prometheus.NewRegistry()
	builtin := []prometheus.Collector{
		newProcessCollector(cfg.Metrics, cfg.Broker, cfg.Pool),
		newPoolCollector(cfg.Pool),
		newClusterCollector(cfg),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	for _, c := range append(builtin, cfg.Collectors...) {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register prometheus collector: %w", err)
		}
	}
	return &Exposition{reg: reg}, nil
}

// Gatherer is the registry, for tests and other encoders.
func (e *Exposition) Gatherer() prometheus.Gatherer { return e.reg }

// Write gathers every family and writes them in the text format. A family
// that failed to collect is left out and the error returned after the
// rest is written, as promhttp's ContinueOnError does.
func (e *Exposition) Write(w io.Writer) error {
	fams, gatherErr := e.reg.Gather()
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return fmt.Errorf("encode %s: %w", f.GetName(), err)
		}
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return err
	}
	return gatherErr
}
