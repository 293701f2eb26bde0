package handlers

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queenforgo/queen/handlers/jobs"
	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/sql/pgtest"
)

// seededBench is a database seeded for a benchmark and a broker serving
// it over HTTP.
type seededBench struct {
	pool *pgxpool.Pool
	reg  *metrics.Registry
	url  string
}

// newSeededBench opens a pool with the broker's session settings
// (cmd/queen/config PostgresURL) on a fresh database, runs the seeding
// statements and serves a broker on it.
func newSeededBench(b *testing.B, seed []string) seededBench {
	pcfg, err := pgxpool.ParseConfig(pgtest.NewDB(b))
	if err != nil {
		b.Fatal(err)
	}
	pcfg.ConnConfig.RuntimeParams["TimeZone"] = "UTC"
	pcfg.ConnConfig.RuntimeParams["jit"] = "off"
	pool, err := pgxpool.NewWithConfig(b.Context(), pcfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	start := time.Now()
	for _, sql := range seed {
		if _, err := pool.Exec(b.Context(), sql); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("seeded in %s", time.Since(start).Round(time.Millisecond))
	reg := metrics.New()
	srv := newServer(b, testConfig{Pool: pool, Metrics: reg})
	h, err := srv.Handler()
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(h)
	b.Cleanup(hs.Close)
	return seededBench{pool: pool, reg: reg, url: hs.URL}
}

// jobs are the background jobs on the benchmark's database.
func (s seededBench) jobs() *jobs.Services {
	return jobs.New(jobs.Config{Pool: s.pool, Metrics: s.reg})
}

// getRoutes times a GET of each route, one sub-benchmark per route; each
// must answer 200.
func (s seededBench) getRoutes(b *testing.B, routes []string) {
	for _, route := range routes {
		b.Run(route, func(b *testing.B) {
			for b.Loop() {
				resp, err := http.Get(s.url + route)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d", route, resp.StatusCode)
				}
			}
		})
	}
}
