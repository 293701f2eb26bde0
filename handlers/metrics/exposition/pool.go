package exposition

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// poolCollector writes pgxpool's statistics beyond the reference's three
// pool gauges (process.go): how often and how long requests waited for a
// connection, and the pool's churn. A pool that is too small shows as
// empty acquires and their wait growing.
type poolCollector struct {
	pool *pgxpool.Pool

	conns, constructing               *prometheus.Desc
	acquires, acquireSeconds          *prometheus.Desc
	emptyAcquires, emptyWaitSeconds   *prometheus.Desc
	canceledAcquires, created, closed *prometheus.Desc
}

func newPoolCollector(pool *pgxpool.Pool) *poolCollector {
	return &poolCollector{
		pool:             pool,
		conns:            desc("queen_db_pool_connections", "Open PostgreSQL connections, idle, in use and being opened."),
		constructing:     desc("queen_db_pool_constructing_connections", "PostgreSQL connections being opened."),
		acquires:         desc("queen_db_pool_acquires_total", "Connections taken from the pool."),
		acquireSeconds:   desc("queen_db_pool_acquire_seconds_total", "Time spent taking connections from the pool, waits included."),
		emptyAcquires:    desc("queen_db_pool_empty_acquires_total", "Connections taken that had to wait: none was idle."),
		emptyWaitSeconds: desc("queen_db_pool_empty_acquire_wait_seconds_total", "Time spent waiting for a connection when none was idle."),
		canceledAcquires: desc("queen_db_pool_canceled_acquires_total", "Waits for a connection that ended with the request."),
		created:          desc("queen_db_pool_opened_connections_total", "PostgreSQL connections opened."),
		closed:           desc("queen_db_pool_closed_connections_total", "PostgreSQL connections closed by the pool, by reason.", "reason"),
	}
}

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.constructing, c.acquires, c.acquireSeconds, c.emptyAcquires,
		c.emptyWaitSeconds, c.canceledAcquires, c.created, c.closed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stat()
	m := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, labels...)
	}
	m(c.conns, prometheus.GaugeValue, float64(st.TotalConns()))
	m(c.constructing, prometheus.GaugeValue, float64(st.ConstructingConns()))
	m(c.acquires, prometheus.CounterValue, float64(st.AcquireCount()))
	m(c.acquireSeconds, prometheus.CounterValue, st.AcquireDuration().Seconds())
	m(c.emptyAcquires, prometheus.CounterValue, float64(st.EmptyAcquireCount()))
	m(c.emptyWaitSeconds, prometheus.CounterValue, st.EmptyAcquireWaitTime().Seconds())
	m(c.canceledAcquires, prometheus.CounterValue, float64(st.CanceledAcquireCount()))
	m(c.created, prometheus.CounterValue, float64(st.NewConnsCount()))
	m(c.closed, prometheus.CounterValue, float64(st.MaxLifetimeDestroyCount()), "max_lifetime")
	m(c.closed, prometheus.CounterValue, float64(st.MaxIdleDestroyCount()), "max_idle")
}
