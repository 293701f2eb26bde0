package exposition

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/queenforgo/queen/handlers/metrics"
)

// processCollector writes this broker's own families under the reference's
// names: read live at every scrape, never from the database, so they are
// served when PostgreSQL is not.
type processCollector struct {
	reg   *metrics.Registry
	brk   Broker
	pool  *pgxpool.Pool
	descs map[string]*prometheus.Desc
	// counters are the per-process request and message counters.
	counters []processCounter
}

type processCounter struct {
	desc  *prometheus.Desc
	value func(p metrics.ProcessCounters, t metrics.QueueCounters) int64
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

func newProcessCollector(reg *metrics.Registry, brk Broker, pool *pgxpool.Pool) *processCollector {
	c := &processCollector{reg: reg, brk: brk, pool: pool, descs: map[string]*prometheus.Desc{}}
	for _, d := range []struct{ name, help string }{
		{"queen_uptime_seconds", "Seconds since this broker started."},
		{"queen_cpu_user_microseconds_total", "User CPU time of this broker."},
		{"queen_cpu_system_microseconds_total", "System CPU time of this broker."},
		{"queen_process_resident_memory_bytes", "Resident memory of this broker."},
		{"queen_process_virtual_memory_bytes", "Virtual memory of this broker."},
		{"queen_db_pool_size", "PostgreSQL pool capacity."},
		{"queen_db_pool_idle", "Idle PostgreSQL connections."},
		{"queen_db_pool_active", "PostgreSQL connections in use."},
		{"queen_file_buffer_pending", "Pushes spooled to disk waiting for the database."},
		{"queen_file_buffer_failed", "Spooled pushes that failed to replay."},
		{"queen_file_buffer_db_healthy", "1 when the spool sees the database healthy."},
		{"queen_maintenance_mode_enabled", "1 while push maintenance mode is on."},
	} {
		c.descs[d.name] = desc(d.name, d.help)
	}
	c.descs["queen_parked_long_polls"] = desc("queen_parked_long_polls", "Long-polls parked on this broker, per queue.", "queue")
	for _, p := range []struct {
		name, help string
		value      func(metrics.ProcessCounters, metrics.QueueCounters) int64
	}{
		{"queen_process_push_requests_total", "Push requests served by this broker.", func(p metrics.ProcessCounters, _ metrics.QueueCounters) int64 { return p.Of(metrics.OpPush) }},
		{"queen_process_push_messages_total", "Messages stored by this broker's pushes.", func(_ metrics.ProcessCounters, t metrics.QueueCounters) int64 { return t.PushMessages }},
		{"queen_process_pop_requests_total", "Pop requests served by this broker.", func(p metrics.ProcessCounters, _ metrics.QueueCounters) int64 { return p.Of(metrics.OpPop) }},
		{"queen_process_pop_messages_total", "Messages delivered by this broker.", func(_ metrics.ProcessCounters, t metrics.QueueCounters) int64 { return t.PopMessages }},
		{"queen_process_ack_requests_total", "Ack requests served by this broker.", func(p metrics.ProcessCounters, _ metrics.QueueCounters) int64 { return p.Of(metrics.OpAck) }},
		{"queen_process_ack_messages_total", "Acknowledgements applied by this broker.", func(_ metrics.ProcessCounters, t metrics.QueueCounters) int64 { return t.AckMessages }},
		{"queen_process_transactions_total", "Transactions committed by this broker.", func(p metrics.ProcessCounters, _ metrics.QueueCounters) int64 { return p.Of(metrics.OpTransaction) }},
		{"queen_process_db_errors_total", "Requests of this broker that failed on the database.", func(p metrics.ProcessCounters, _ metrics.QueueCounters) int64 { return p.DBErrors }},
	} {
		c.counters = append(c.counters, processCounter{desc(p.name, p.help), p.value})
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *processCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	for _, p := range c.counters {
		ch <- p.desc
	}
}

// Collect implements prometheus.Collector.
func (c *processCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, v, labels...)
	}
	counter := func(name string, v float64) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.CounterValue, v)
	}
	ps := metrics.ReadProcess()
	gauge("queen_uptime_seconds", float64(int64(time.Since(c.reg.Started()).Seconds())))
	counter("queen_cpu_user_microseconds_total", float64(ps.CPUUserMicros))
	counter("queen_cpu_system_microseconds_total", float64(ps.CPUSystemMicros))
	gauge("queen_process_resident_memory_bytes", float64(ps.RSSBytes))
	gauge("queen_process_virtual_memory_bytes", float64(ps.VirtualBytes))
	st := c.pool.Stat()
	gauge("queen_db_pool_size", float64(st.MaxConns()))
	gauge("queen_db_pool_idle", float64(st.IdleConns()))
	gauge("queen_db_pool_active", float64(st.AcquiredConns()))
	sp, _ := c.brk.SpoolStats()
	gauge("queen_file_buffer_pending", float64(sp.Pending))
	gauge("queen_file_buffer_failed", float64(sp.FailedFiles))
	gauge("queen_file_buffer_db_healthy", b2f(sp.DBHealthy))
	// The switch as this broker applies it (reconciled with the database
	// row by the broker's maintenance loop).
	push, _ := c.brk.Maintenance()
	gauge("queen_maintenance_mode_enabled", b2f(push))

	queues := c.reg.Queues()
	proc, tot := c.reg.Process(), metrics.Totals(queues)
	for _, p := range c.counters {
		ch <- prometheus.MustNewConstMetric(p.desc, prometheus.CounterValue, float64(p.value(proc, tot)))
	}
	for _, q := range queues {
		if q.Parked > 0 {
			gauge("queen_parked_long_polls", float64(q.Parked), q.Queue)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
