package handlers

import (
	"bytes"
	"context"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/metrics"
)

// GetMetrics answers this broker's counters since boot.
func (s *Server) GetMetrics(ctx context.Context, _ api.GetMetricsRequestObject) (api.GetMetricsResponseObject, error) {
	reg := s.metrics
	uptime := time.Since(reg.Started())
	proc := reg.Process()
	queues := reg.Queues()
	tot := metrics.Totals(queues)
	requests := proc.Of(metrics.OpPush) + proc.Of(metrics.OpPop) + proc.Of(metrics.OpAck)
	messages := tot.PushMessages + tot.PopMessages + tot.AckMessages
	rate := func(n int64) float64 {
		if uptime < time.Second {
			return 0
		}
		return float64(n) / uptime.Seconds()
	}
	var resp api.GetMetrics200JSONResponse
	resp.Uptime = int(uptime / time.Second)
	resp.Requests.Total, resp.Requests.Rate = int(requests), rate(requests)
	resp.Messages.Total, resp.Messages.Rate = int(messages), rate(messages)
	st := s.pool.Stat()
	resp.Database.PoolSize, resp.Database.IdleConnections = int(st.MaxConns()), int(st.IdleConns())
	ps := metrics.ReadProcess()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	resp.Memory.Rss, resp.Memory.HeapTotal, resp.Memory.HeapUsed = int(ps.RSSBytes), int(ms.HeapSys), int(ms.HeapAlloc)
	resp.Cpu.User, resp.Cpu.System = int(ps.CPUUserMicros), int(ps.CPUSystemMicros)
	resp.Queues = make(map[string]api.QueueCounters, len(queues))
	for _, q := range queues {
		resp.Queues[q.Queue] = api.QueueCounters{
			Pushed: int(q.PushMessages), Popped: int(q.PopMessages), Acked: int(q.AckSuccess),
			Failed: int(q.AckFail), Dlq: int(q.DeadLettered),
		}
	}
	return resp, nil
}

// prometheusResponse is the exposition with the headers the format wants.
type prometheusResponse []byte

func (r prometheusResponse) VisitGetPrometheusMetricsResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", metrics.ContentType)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(r)
	return err
}

// GetPrometheusMetrics writes the process families, then the cluster
// families read from the database; when the database part fails the scrape
// still succeeds with the process part.
func (s *Server) GetPrometheusMetrics(ctx context.Context, _ api.GetPrometheusMetricsRequestObject) (api.GetPrometheusMetricsResponseObject, error) {
	var buf bytes.Buffer
	e := metrics.NewExposition(&buf)
	s.writeProcessFamilies(e)
	writeSharedStateFamilies(e, s.sharedState())
	if err := e.Flush(); err != nil {
		return nil, err
	}
	var cluster bytes.Buffer
	ce := metrics.NewExposition(&cluster)
	err := s.writeClusterFamilies(ctx, ce)
	if err == nil {
		err = ce.Flush()
	}
	if err != nil {
		s.log.Warn("prometheus cluster metrics unavailable", "err", err)
	} else {
		buf.Write(cluster.Bytes())
	}
	return prometheusResponse(buf.Bytes()), nil
}

func (s *Server) writeProcessFamilies(e *metrics.Exposition) {
	reg := s.metrics
	ps := metrics.ReadProcess()
	gauge := func(name, help string, v float64) {
		e.Family(name, "gauge", help)
		e.Sample(name, v)
	}
	counter := func(name, help string, v float64) {
		e.Family(name, "counter", help)
		e.Sample(name, v)
	}
	gauge("queen_uptime_seconds", "Seconds since this broker started.", float64(int64(time.Since(reg.Started()).Seconds())))
	counter("queen_cpu_user_microseconds_total", "User CPU time of this broker.", float64(ps.CPUUserMicros))
	counter("queen_cpu_system_microseconds_total", "System CPU time of this broker.", float64(ps.CPUSystemMicros))
	gauge("queen_process_resident_memory_bytes", "Resident memory of this broker.", float64(ps.RSSBytes))
	gauge("queen_process_virtual_memory_bytes", "Virtual memory of this broker.", float64(ps.VirtualBytes))
	st := s.pool.Stat()
	gauge("queen_db_pool_size", "PostgreSQL pool capacity.", float64(st.MaxConns()))
	gauge("queen_db_pool_idle", "Idle PostgreSQL connections.", float64(st.IdleConns()))
	gauge("queen_db_pool_active", "PostgreSQL connections in use.", float64(st.AcquiredConns()))
	buf, _ := s.b.SpoolStats()
	gauge("queen_file_buffer_pending", "Pushes spooled to disk waiting for the database.", float64(buf.Pending))
	gauge("queen_file_buffer_failed", "Spooled pushes that failed to replay.", float64(buf.FailedFiles))
	gauge("queen_file_buffer_db_healthy", "1 when the spool sees the database healthy.", b2f(buf.DBHealthy))
	pushMaintenance, _ := s.b.Maintenance()
	// The switch as this broker applies it (reconciled with the database
	// row by the maintenance code).
	gauge("queen_maintenance_mode_enabled", "1 while push maintenance mode is on.", b2f(pushMaintenance))

	proc := reg.Process()
	tot := metrics.Totals(reg.Queues())
	for _, c := range []struct {
		name, help string
		v          int64
	}{
		{"queen_process_push_requests_total", "Push requests served by this broker.", proc.Of(metrics.OpPush)},
		{"queen_process_push_messages_total", "Messages stored by this broker's pushes.", tot.PushMessages},
		{"queen_process_pop_requests_total", "Pop requests served by this broker.", proc.Of(metrics.OpPop)},
		{"queen_process_pop_messages_total", "Messages delivered by this broker.", tot.PopMessages},
		{"queen_process_ack_requests_total", "Ack requests served by this broker.", proc.Of(metrics.OpAck)},
		{"queen_process_ack_messages_total", "Acknowledgements applied by this broker.", tot.AckMessages},
		{"queen_process_transactions_total", "Transactions committed by this broker.", proc.Of(metrics.OpTransaction)},
		{"queen_process_db_errors_total", "Requests of this broker that failed on the database.", proc.DBErrors},
	} {
		counter(c.name, c.help, float64(c.v))
	}
	e.Family("queen_parked_long_polls", "gauge", "Long-polls parked on this broker, per queue.")
	for _, q := range reg.Queues() {
		if q.Parked > 0 {
			e.Sample("queen_parked_long_polls", float64(q.Parked), "queue", q.Queue)
		}
	}
}

// prometheusWindow is how old the newest per-minute row of a queue or a
// broker may be for its gauges to be reported.
const prometheusWindow = 5 * time.Minute

func (s *Server) writeClusterFamilies(ctx context.Context, e *metrics.Exposition) error {
	sum, err := s.aq().WorkerMetricsSummaryGet(ctx)
	if err != nil {
		return err
	}
	cluster := func(name, help string, v int64) {
		e.Family(name, "counter", help)
		e.Sample(name, float64(v), "scope", "cluster")
	}
	cluster("queen_cluster_push_requests_total", "Push requests, every broker, as last written by their collectors.", sum.PushRequests)
	cluster("queen_cluster_pop_requests_total", "Pop requests, every broker.", sum.PopRequests)
	cluster("queen_cluster_ack_requests_total", "Ack requests, every broker.", sum.AckRequests)
	cluster("queen_cluster_transactions_total", "Transactions, every broker.", sum.Transactions)
	cluster("queen_cluster_push_messages_total", "Messages stored, every broker.", sum.PushMessages)
	cluster("queen_cluster_pop_messages_total", "Messages delivered, every broker.", sum.PopMessages)
	cluster("queen_cluster_ack_messages_total", "Acknowledgements applied, every broker.", sum.AckMessages)
	e.Family("queen_cluster_ack_total", "counter", "Acknowledgements by outcome, every broker.")
	e.Sample("queen_cluster_ack_total", float64(sum.AckSuccess), "scope", "cluster", "result", "success")
	e.Sample("queen_cluster_ack_total", float64(sum.AckFailed), "scope", "cluster", "result", "failed")
	cluster("queen_cluster_db_errors_total", "Requests failed on the database, every broker.", sum.DbErrors)
	cluster("queen_cluster_dlq_total", "Messages dead-lettered, every broker.", sum.DlqCount)

	now := time.Now()
	since := pgtype.Timestamptz{Time: now.Add(-prometheusWindow), Valid: true}
	latest, err := s.aq().QueueLagMetricsLatest(ctx, since)
	if err != nil {
		return err
	}
	if len(latest) > 0 {
		writeQueueFamilies(e, latest, now)
	}
	workers, err := s.aq().WorkerMetricsRecent(ctx, since)
	if err != nil {
		return err
	}
	if len(workers) > 0 {
		writeWorkerFamilies(e, workers, now)
	}

	dlq, err := s.aq().DeadLetterCountByQueue(ctx)
	if err != nil {
		return err
	}
	var depth int64
	for _, d := range dlq {
		depth += d.Count
	}
	e.Family("queen_dlq_depth", "gauge", "Dead-letter rows stored now.")
	e.Sample("queen_dlq_depth", float64(depth), "scope", "cluster")
	e.Family("queen_dlq_depth_by_queue", "gauge", "Dead-letter rows stored now, per queue.")
	for _, d := range dlq {
		e.Sample("queen_dlq_depth_by_queue", float64(d.Count), "queue", d.QueueName)
	}
	return nil
}

// writeQueueFamilies writes the per-queue gauges from each queue's newest
// minute; every sample is labelled queue (plus stat or result).
func writeQueueFamilies(e *metrics.Exposition, rows []db.QueueLagMetricsLatestRow, now time.Time) {
	per := func(name, help string, v func(db.QueueLagMetricsLatestRow) float64) {
		e.Family(name, "gauge", help)
		for _, r := range rows {
			e.Sample(name, v(r), "queue", r.QueueName)
		}
	}
	per("queen_queue_pop_messages_per_minute", "Messages popped in the queue's last minute.", func(r db.QueueLagMetricsLatestRow) float64 { return float64(r.PopMessages) })
	e.Family("queen_queue_pop_lag_milliseconds", "gauge", "Age of messages when popped, in the queue's last minute.")
	for _, r := range rows {
		avg := 0.0
		if r.LagCount > 0 {
			avg = float64(r.LagSumMs) / float64(r.LagCount)
		}
		e.Sample("queen_queue_pop_lag_milliseconds", avg, "queue", r.QueueName, "stat", "avg")
		e.Sample("queen_queue_pop_lag_milliseconds", float64(r.MaxLagMs), "queue", r.QueueName, "stat", "max")
	}
	per("queen_queue_push_requests_per_minute", "Push requests in the queue's last minute.", func(r db.QueueLagMetricsLatestRow) float64 { return float64(r.PushRequests) })
	per("queen_queue_push_messages_per_minute", "Messages stored in the queue's last minute.", func(r db.QueueLagMetricsLatestRow) float64 { return float64(r.PushMessages) })
	per("queen_queue_pop_empty_per_minute", "Pops that found nothing in the queue's last minute.", func(r db.QueueLagMetricsLatestRow) float64 { return float64(r.PopEmpty) })
	e.Family("queen_queue_ack_per_minute", "gauge", "Acknowledgements by outcome in the queue's last minute.")
	for _, r := range rows {
		e.Sample("queen_queue_ack_per_minute", float64(r.AckSuccess), "queue", r.QueueName, "result", "success")
		e.Sample("queen_queue_ack_per_minute", float64(r.AckFailed), "queue", r.QueueName, "result", "failed")
	}
	per("queen_queue_transactions_per_minute", "Transactions in the queue's last minute.", func(r db.QueueLagMetricsLatestRow) float64 { return float64(r.Transactions) })
	per("queen_queue_conflated_per_minute", "Always 0: this broker does not conflate pushes.", func(db.QueueLagMetricsLatestRow) float64 { return 0 })
	per("queen_queue_parked_consumers", "Long-polls parked on the queue, the minute's average over every broker.", func(r db.QueueLagMetricsLatestRow) float64 { return r.Parked })
	per("queen_queue_metrics_age_seconds", "Age of the queue's newest per-minute row.", func(r db.QueueLagMetricsLatestRow) float64 {
		return float64(int64(max(now.Sub(r.Bucket.Time), 0).Seconds()))
	})
}

// writeWorkerFamilies writes each broker's newest minute.
func writeWorkerFamilies(e *metrics.Exposition, rows []db.QueenWorkerMetric, now time.Time) {
	labels := func(r db.QueenWorkerMetric, extra ...string) []string {
		return append([]string{"hostname", r.Hostname, "worker_id", strconv.Itoa(int(r.WorkerID)), "pid", strconv.Itoa(int(r.Pid))}, extra...)
	}
	fam := func(name, help string, samples func(r db.QueenWorkerMetric, add func(v float64, extra ...string))) {
		e.Family(name, "gauge", help)
		for _, r := range rows {
			samples(r, func(v float64, extra ...string) { e.Sample(name, v, labels(r, extra...)...) })
		}
	}
	fam("queen_worker_event_loop_lag_milliseconds", "How late the broker's timers ran (Go scheduler lag).", func(r db.QueenWorkerMetric, add func(float64, ...string)) {
		add(r.AvgEventLoopLagMs, "stat", "avg")
		add(r.MaxEventLoopLagMs, "stat", "max")
	})
	fam("queen_worker_free_slots", "Free PostgreSQL pool slots.", func(r db.QueenWorkerMetric, add func(float64, ...string)) {
		add(r.AvgFreeSlots, "stat", "avg")
		add(r.MinFreeSlots, "stat", "min")
	})
	fam("queen_worker_db_connections", "Open PostgreSQL connections.", func(r db.QueenWorkerMetric, add func(float64, ...string)) { add(r.DbConnections) })
	fam("queen_worker_job_queue_size", "Work waiting inside the broker.", func(r db.QueenWorkerMetric, add func(float64, ...string)) {
		add(r.AvgJobQueueSize, "stat", "avg")
		add(r.MaxJobQueueSize, "stat", "max")
	})
	fam("queen_worker_backoff_size", "Parked long-polls.", func(r db.QueenWorkerMetric, add func(float64, ...string)) { add(r.BackoffSize) })
	fam("queen_worker_jobs_done_per_minute", "Requests served in the last minute.", func(r db.QueenWorkerMetric, add func(float64, ...string)) {
		add(float64(r.PushRequestCount + r.PopRequestCount + r.AckRequestCount + r.TransactionCount))
	})
	fam("queen_worker_requests_per_minute", "Requests per operation in the last minute.", func(r db.QueenWorkerMetric, add func(float64, ...string)) {
		add(float64(r.PushRequestCount), "op", "push")
		add(float64(r.PopRequestCount), "op", "pop")
		add(float64(r.AckRequestCount), "op", "ack")
		add(float64(r.TransactionCount), "op", "transaction")
	})
	fam("queen_worker_messages_per_minute", "Messages per operation in the last minute.", func(r db.QueenWorkerMetric, add func(float64, ...string)) {
		add(float64(r.PushMessageCount), "op", "push")
		add(float64(r.PopMessageCount), "op", "pop")
		add(float64(r.AckMessageCount), "op", "ack")
	})
	fam("queen_worker_ack_per_minute", "Acknowledgements by outcome in the last minute.", func(r db.QueenWorkerMetric, add func(float64, ...string)) {
		add(float64(r.AckSuccessCount), "result", "success")
		add(float64(r.AckFailedCount), "result", "failed")
	})
	fam("queen_worker_lag_milliseconds", "Age of messages when popped in the last minute.", func(r db.QueenWorkerMetric, add func(float64, ...string)) {
		avg := 0.0
		if r.LagCount > 0 {
			avg = float64(r.LagSumMs) / float64(r.LagCount)
		}
		add(avg, "stat", "avg")
		add(float64(r.MaxLagMs), "stat", "max")
	})
	fam("queen_worker_db_errors_per_minute", "Requests failed on the database in the last minute.", func(r db.QueenWorkerMetric, add func(float64, ...string)) { add(float64(r.DbErrorCount)) })
	fam("queen_worker_dlq_per_minute", "Messages dead-lettered in the last minute.", func(r db.QueenWorkerMetric, add func(float64, ...string)) { add(float64(r.DlqCount)) })
	fam("queen_worker_metrics_age_seconds", "Age of the broker's newest per-minute row.", func(r db.QueenWorkerMetric, add func(float64, ...string)) {
		add(float64(int64(max(now.Sub(r.Bucket.Time), 0).Seconds())))
	})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
