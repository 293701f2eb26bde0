package exposition

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/planmode"
)

// clusterWindow is how old the newest per-minute row of a queue or a broker
// may be for its gauges to be written (the reference's 5 minutes).
const clusterWindow = 5 * time.Minute

// clusterSnapshot is one read of the cluster families' rows.
type clusterSnapshot struct {
	at      time.Time
	totals  db.WorkerMetricsSummaryGetRow
	queues  []db.QueueLagMetricsLatestRow
	workers []db.QueenWorkerMetric
	dlq     []db.DeadLetterCountByQueueRow
}

// clusterCollector writes the families the reference reads from the
// database: cluster totals from the summary row every broker's collector
// adds to, per-queue gauges from each queue's newest minute, per-broker
// gauges from each broker's newest minute, and the dead-letter depth. Four
// queries over the metrics tables (one row per queue or broker and minute)
// and one count of the dead-letter rows: none of them visits partitions or
// messages, and a snapshot is reused for ClusterCacheTTL. When the
// database cannot be read the families are left out and the scrape still
// succeeds with the others.
type clusterCollector struct {
	cache *snapshotCache[clusterSnapshot]
	log   *slog.Logger

	totals                                     []clusterTotal
	ackTotal, dlqDepth, dlqByQueue             *prometheus.Desc
	queueFams                                  []queueFamily
	queuePopLag, queueAck                      *prometheus.Desc
	queueAge                                   *prometheus.Desc
	workerFams                                 []workerFamily
	workerJobsDone, workerRequests, workerMsgs *prometheus.Desc
	workerAck, workerLag, workerAge            *prometheus.Desc
}

type clusterTotal struct {
	desc  *prometheus.Desc
	value func(db.WorkerMetricsSummaryGetRow) int64
}

type queueFamily struct {
	desc  *prometheus.Desc
	value func(db.QueueLagMetricsLatestRow) float64
}

// workerFamily is a per-broker gauge with one sample per stat (avg, max,
// min) or one unlabelled sample when stats is empty.
type workerFamily struct {
	desc  *prometheus.Desc
	stats []string
	value func(r db.QueenWorkerMetric, stat string) float64
}

var workerLabels = []string{"hostname", "worker_id", "pid"}

func newClusterCollector(cfg Config) *clusterCollector {
	q := db.New(planmode.Custom(cfg.Pool))
	read := func(ctx context.Context) (clusterSnapshot, error) {
		var s clusterSnapshot
		var err error
		if s.totals, err = q.WorkerMetricsSummaryGet(ctx); err != nil {
			return s, err
		}
		s.at = s.totals.ObservedAt.Time
		since := pgtype.Timestamptz{Time: s.at.Add(-clusterWindow), Valid: true}
		if s.queues, err = q.QueueLagMetricsLatest(ctx, since); err != nil {
			return s, err
		}
		if s.workers, err = q.WorkerMetricsRecent(ctx, since); err != nil {
			return s, err
		}
		s.dlq, err = q.DeadLetterCountByQueue(ctx)
		return s, err
	}
	c := &clusterCollector{
		cache: newSnapshotCache(read, cfg.ClusterCacheTTL, cfg.ClusterTimeout, cfg.now),
		log:   cfg.Logger,
	}
	total := func(name, help string, v func(db.WorkerMetricsSummaryGetRow) int64) {
		c.totals = append(c.totals, clusterTotal{prometheus.NewDesc(name, help, []string{"scope"}, nil), v})
	}
	total("queen_cluster_push_requests_total", "Push requests, every broker, as last written by their collectors.", func(r db.WorkerMetricsSummaryGetRow) int64 { return r.PushRequests })
	total("queen_cluster_pop_requests_total", "Pop requests, every broker.", func(r db.WorkerMetricsSummaryGetRow) int64 { return r.PopRequests })
	total("queen_cluster_ack_requests_total", "Ack requests, every broker.", func(r db.WorkerMetricsSummaryGetRow) int64 { return r.AckRequests })
	total("queen_cluster_transactions_total", "Transactions, every broker.", func(r db.WorkerMetricsSummaryGetRow) int64 { return r.Transactions })
	total("queen_cluster_push_messages_total", "Messages stored, every broker.", func(r db.WorkerMetricsSummaryGetRow) int64 { return r.PushMessages })
	total("queen_cluster_pop_messages_total", "Messages delivered, every broker.", func(r db.WorkerMetricsSummaryGetRow) int64 { return r.PopMessages })
	total("queen_cluster_ack_messages_total", "Acknowledgements applied, every broker.", func(r db.WorkerMetricsSummaryGetRow) int64 { return r.AckMessages })
	total("queen_cluster_db_errors_total", "Requests failed on the database, every broker.", func(r db.WorkerMetricsSummaryGetRow) int64 { return r.DbErrors })
	total("queen_cluster_dlq_total", "Messages dead-lettered, every broker.", func(r db.WorkerMetricsSummaryGetRow) int64 { return r.DlqCount })
	c.ackTotal = desc("queen_cluster_ack_total", "Acknowledgements by outcome, every broker.", "scope", "result")
	c.dlqDepth = desc("queen_dlq_depth", "Dead-letter rows stored now.", "scope")
	c.dlqByQueue = desc("queen_dlq_depth_by_queue", "Dead-letter rows stored now, per queue.", "queue")

	perQueue := func(name, help string, v func(db.QueueLagMetricsLatestRow) float64) {
		c.queueFams = append(c.queueFams, queueFamily{desc(name, help, "queue"), v})
	}
	perQueue("queen_queue_pop_messages_per_minute", "Messages popped in the queue's last minute.", func(r db.QueueLagMetricsLatestRow) float64 { return float64(r.PopMessages) })
	perQueue("queen_queue_push_requests_per_minute", "Push requests in the queue's last minute.", func(r db.QueueLagMetricsLatestRow) float64 { return float64(r.PushRequests) })
	perQueue("queen_queue_push_messages_per_minute", "Messages stored in the queue's last minute.", func(r db.QueueLagMetricsLatestRow) float64 { return float64(r.PushMessages) })
	perQueue("queen_queue_pop_empty_per_minute", "Pops that found nothing in the queue's last minute.", func(r db.QueueLagMetricsLatestRow) float64 { return float64(r.PopEmpty) })
	perQueue("queen_queue_transactions_per_minute", "Transactions in the queue's last minute.", func(r db.QueueLagMetricsLatestRow) float64 { return float64(r.Transactions) })
	perQueue("queen_queue_conflated_per_minute", "Always 0: this broker does not conflate pushes.", func(db.QueueLagMetricsLatestRow) float64 { return 0 })
	perQueue("queen_queue_parked_consumers", "Long-polls parked on the queue, the minute's average over every broker.", func(r db.QueueLagMetricsLatestRow) float64 { return r.Parked })
	c.queuePopLag = desc("queen_queue_pop_lag_milliseconds", "Age of messages when popped, in the queue's last minute.", "queue", "stat")
	c.queueAck = desc("queen_queue_ack_per_minute", "Acknowledgements by outcome in the queue's last minute.", "queue", "result")
	c.queueAge = desc("queen_queue_metrics_age_seconds", "Age of the queue's newest per-minute row.", "queue")

	perWorker := func(name, help string, stats []string, v func(db.QueenWorkerMetric, string) float64) {
		labels := workerLabels
		if len(stats) > 0 {
			labels = append(append([]string{}, workerLabels...), "stat")
		}
		c.workerFams = append(c.workerFams, workerFamily{desc(name, help, labels...), stats, v})
	}
	perWorker("queen_worker_event_loop_lag_milliseconds", "How late the broker's timers ran (Go scheduler lag).", []string{"avg", "max"}, func(r db.QueenWorkerMetric, s string) float64 {
		return pick(s, "avg", r.AvgEventLoopLagMs, r.MaxEventLoopLagMs)
	})
	perWorker("queen_worker_free_slots", "Free PostgreSQL pool slots.", []string{"avg", "min"}, func(r db.QueenWorkerMetric, s string) float64 {
		return pick(s, "avg", r.AvgFreeSlots, r.MinFreeSlots)
	})
	perWorker("queen_worker_db_connections", "Open PostgreSQL connections.", nil, func(r db.QueenWorkerMetric, _ string) float64 { return r.DbConnections })
	perWorker("queen_worker_job_queue_size", "Work waiting inside the broker.", []string{"avg", "max"}, func(r db.QueenWorkerMetric, s string) float64 {
		return pick(s, "avg", r.AvgJobQueueSize, r.MaxJobQueueSize)
	})
	perWorker("queen_worker_backoff_size", "Parked long-polls.", nil, func(r db.QueenWorkerMetric, _ string) float64 { return r.BackoffSize })
	perWorker("queen_worker_db_errors_per_minute", "Requests failed on the database in the last minute.", nil, func(r db.QueenWorkerMetric, _ string) float64 { return float64(r.DbErrorCount) })
	perWorker("queen_worker_dlq_per_minute", "Messages dead-lettered in the last minute.", nil, func(r db.QueenWorkerMetric, _ string) float64 { return float64(r.DlqCount) })
	c.workerJobsDone = desc("queen_worker_jobs_done_per_minute", "Requests served in the last minute.", workerLabels...)
	c.workerRequests = desc("queen_worker_requests_per_minute", "Requests per operation in the last minute.", append(append([]string{}, workerLabels...), "op")...)
	c.workerMsgs = desc("queen_worker_messages_per_minute", "Messages per operation in the last minute.", append(append([]string{}, workerLabels...), "op")...)
	c.workerAck = desc("queen_worker_ack_per_minute", "Acknowledgements by outcome in the last minute.", append(append([]string{}, workerLabels...), "result")...)
	c.workerLag = desc("queen_worker_lag_milliseconds", "Age of messages when popped in the last minute.", append(append([]string{}, workerLabels...), "stat")...)
	c.workerAge = desc("queen_worker_metrics_age_seconds", "Age of the broker's newest per-minute row.", workerLabels...)
	return c
}

func pick(stat, first string, a, b float64) float64 {
	if stat == first {
		return a
	}
	return b
}

// Describe implements prometheus.Collector.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, t := range c.totals {
		ch <- t.desc
	}
	for _, f := range c.queueFams {
		ch <- f.desc
	}
	for _, f := range c.workerFams {
		ch <- f.desc
	}
	for _, d := range []*prometheus.Desc{c.ackTotal, c.dlqDepth, c.dlqByQueue, c.queuePopLag, c.queueAck, c.queueAge,
		c.workerJobsDone, c.workerRequests, c.workerMsgs, c.workerAck, c.workerLag, c.workerAge} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	s, err := c.cache.get()
	if err != nil {
		c.log.Warn("prometheus cluster metrics unavailable", "err", err)
		return
	}
	m := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, labels...)
	}
	for _, t := range c.totals {
		m(t.desc, prometheus.CounterValue, float64(t.value(s.totals)), "cluster")
	}
	m(c.ackTotal, prometheus.CounterValue, float64(s.totals.AckSuccess), "cluster", "success")
	m(c.ackTotal, prometheus.CounterValue, float64(s.totals.AckFailed), "cluster", "failed")

	for _, r := range s.queues {
		for _, f := range c.queueFams {
			m(f.desc, prometheus.GaugeValue, f.value(r), r.QueueName)
		}
		avg := 0.0
		if r.LagCount > 0 {
			avg = float64(r.LagSumMs) / float64(r.LagCount)
		}
		m(c.queuePopLag, prometheus.GaugeValue, avg, r.QueueName, "avg")
		m(c.queuePopLag, prometheus.GaugeValue, float64(r.MaxLagMs), r.QueueName, "max")
		m(c.queueAck, prometheus.GaugeValue, float64(r.AckSuccess), r.QueueName, "success")
		m(c.queueAck, prometheus.GaugeValue, float64(r.AckFailed), r.QueueName, "failed")
		m(c.queueAge, prometheus.GaugeValue, ageSeconds(s.at, r.Bucket), r.QueueName)
	}

	for _, r := range s.workers {
		w := []string{r.Hostname, strconv.Itoa(int(r.WorkerID)), strconv.Itoa(int(r.Pid))}
		with := func(extra string) []string { return append(append([]string{}, w...), extra) }
		for _, f := range c.workerFams {
			if len(f.stats) == 0 {
				m(f.desc, prometheus.GaugeValue, f.value(r, ""), w...)
				continue
			}
			for _, st := range f.stats {
				m(f.desc, prometheus.GaugeValue, f.value(r, st), with(st)...)
			}
		}
		m(c.workerJobsDone, prometheus.GaugeValue, float64(r.PushRequestCount+r.PopRequestCount+r.AckRequestCount+r.TransactionCount), w...)
		for _, op := range []struct {
			name     string
			requests int64
		}{{"push", r.PushRequestCount}, {"pop", r.PopRequestCount}, {"ack", r.AckRequestCount}, {"transaction", r.TransactionCount}} {
			m(c.workerRequests, prometheus.GaugeValue, float64(op.requests), with(op.name)...)
		}
		m(c.workerMsgs, prometheus.GaugeValue, float64(r.PushMessageCount), with("push")...)
		m(c.workerMsgs, prometheus.GaugeValue, float64(r.PopMessageCount), with("pop")...)
		m(c.workerMsgs, prometheus.GaugeValue, float64(r.AckMessageCount), with("ack")...)
		m(c.workerAck, prometheus.GaugeValue, float64(r.AckSuccessCount), with("success")...)
		m(c.workerAck, prometheus.GaugeValue, float64(r.AckFailedCount), with("failed")...)
		avg := 0.0
		if r.LagCount > 0 {
			avg = float64(r.LagSumMs) / float64(r.LagCount)
		}
		m(c.workerLag, prometheus.GaugeValue, avg, with("avg")...)
		m(c.workerLag, prometheus.GaugeValue, float64(r.MaxLagMs), with("max")...)
		m(c.workerAge, prometheus.GaugeValue, ageSeconds(s.at, r.Bucket), w...)
	}

	var depth int64
	for _, d := range s.dlq {
		depth += d.Count
		m(c.dlqByQueue, prometheus.GaugeValue, float64(d.Count), d.QueueName)
	}
	m(c.dlqDepth, prometheus.GaugeValue, float64(depth), "cluster")
}

// ageSeconds is the whole seconds from a row's minute to the read.
func ageSeconds(at time.Time, bucket pgtype.Timestamptz) float64 {
	return float64(int64(max(at.Sub(bucket.Time), 0).Seconds()))
}

// snapshotCache reuses one read of T for ttl. Concurrent scrapes of an
// expired snapshot wait for one read and share it; a failed read is not
// kept, so the next scrape tries again.
type snapshotCache[T any] struct {
	read    func(context.Context) (T, error)
	ttl     time.Duration
	timeout time.Duration
	now     func() time.Time

	mu     sync.Mutex
	val    T
	readAt time.Time // zero: nothing cached
}

func newSnapshotCache[T any](read func(context.Context) (T, error), ttl, timeout time.Duration, now func() time.Time) *snapshotCache[T] {
	return &snapshotCache[T]{read: read, ttl: ttl, timeout: timeout, now: now}
}

func (c *snapshotCache[T]) get() (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.readAt.IsZero() && c.now().Sub(c.readAt) < c.ttl {
		return c.val, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	v, err := c.read(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	c.val, c.readAt = v, c.now()
	return v, nil
}
