package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/cmd/queen/config"
	"github.com/queenforgo/queen/handlers/jobs"
	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/handlers/migration"
)

// background owns what runs beside the HTTP server: the metrics registry the
// data plane records into, the background jobs that turn it into rows and
// delete expired messages, and the migration runner.
type background struct {
	metrics   *metrics.Registry
	jobs      *jobs.Services
	migration *migration.Runner
}

func newBackground(cfg config.Config, pool *pgxpool.Pool, logger *slog.Logger) *background {
	reg := metrics.New()
	j := cfg.Jobs
	b := &background{
		metrics: reg,
		jobs: jobs.New(jobs.Config{
			Pool: pool, Metrics: reg, Logger: logger, Port: cfg.Server.Port,
			SampleInterval: j.SampleInterval, RetentionInterval: j.RetentionInterval,
			EvictionInterval: j.EvictionInterval, MetricsRetention: j.QueueMetricsRetention,
			HistoryRetention: j.HistoryRetention, PartitionRetention: j.PartitionRetention,
		}),
		migration: migration.New(migration.Config{Source: sourceEndpoint(cfg.Postgres), Logger: logger}),
	}
	if err := b.migration.Available(); err != nil {
		logger.Info("migration routes unavailable: pg_dump or pg_restore not found on PATH")
	}
	return b
}

// flush writes the in-memory metrics now (POST /api/v1/stats/refresh).
func (b *background) flush(ctx context.Context) error { return b.jobs.Flush(ctx, time.Now()) }

func (b *background) start() { b.jobs.Start(context.Background()) }

// stop ends the jobs (writing the last metrics) and a running migration.
// Call it after the HTTP server stopped and before the pool closes.
func (b *background) stop() {
	b.jobs.Stop()
	b.migration.Stop()
}

// sourceEndpoint is this broker's database as pg_dump reaches it, with the
// same TLS demands as the broker's own connections.
func sourceEndpoint(p config.Postgres) migration.Endpoint {
	mode := "disable"
	switch {
	case !p.UseSSL:
	case p.SSLRejectUnauthorized || p.SSLRootCert != "":
		mode = "verify-full"
	default:
		mode = "require"
	}
	e := migration.Endpoint{
		Host: p.Hosts[0].Name, Port: p.Hosts[0].Port, Database: p.Database, User: p.User, Password: p.Password,
		SSLMode: mode, SSLRootCertPEM: p.SSLRootCert,
	}
	// Every host of an HA list, each with its own port: libpq tries them
	// in order, so pg_dump reads whichever answers.
	for _, h := range p.Hosts[1:] {
		e.Fallbacks = append(e.Fallbacks, migration.Server{Host: h.Name, Port: h.Port})
	}
	return e
}
