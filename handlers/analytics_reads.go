package handlers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// getWorkerMetrics answers the data-plane counters and broker gauges over
// time, summed over brokers.
func (s *Server) getWorkerMetrics(ctx context.Context, req api.GetWorkerMetricsRequestObject) (api.GetWorkerMetricsResponseObject, error) {
	p := req.Params
	r, err := newSeriesRange(p.From, p.To, time.Hour)
	if err != nil {
		return badRequest[api.GetWorkerMetrics400JSONResponse](err.Error()), nil
	}
	var workerID *int32
	if p.WorkerId != nil {
		workerID = ptr(int32(*p.WorkerId))
	}
	rows, err := s.aq().WorkerMetricsSeries(ctx, db.WorkerMetricsSeriesParams{
		BucketSeconds: r.bucketSeconds(), FromTime: r.fromTime(), ToTime: r.toTime(),
		Hostname: deref(p.Hostname, ""), WorkerID: workerID,
	})
	if err != nil {
		return nil, fmt.Errorf("read worker metrics: %w", err)
	}
	resp := api.GetWorkerMetrics200JSONResponse{TimeRange: r.wire(), BucketMinutes: r.bucketMinutes}
	resp.TimeSeries = make([]api.WorkerMetricsPoint, 0, len(rows))
	for _, w := range rows { // newest first
		resp.TimeSeries = append(resp.TimeSeries, api.WorkerMetricsPoint{
			Timestamp:    fmtBucket(w.BucketStart.Time),
			PushMessages: int(w.PushMessages), PopMessages: int(w.PopMessages), AckMessages: int(w.AckMessages),
			PushRequests: int(w.PushRequests), PopRequests: int(w.PopRequests), AckRequests: int(w.AckRequests),
			JobsDone:      int(w.PushRequests + w.PopRequests + w.AckRequests + w.Transactions),
			PushPerSecond: r.perSecond(w.PushMessages), PopPerSecond: r.perSecond(w.PopMessages),
			AckPerSecond:      r.perSecond(w.AckMessages),
			AvgEventLoopLagMs: round2(w.AvgEventLoopLagMs), MaxEventLoopLagMs: round2(w.MaxEventLoopLagMs),
			AvgFreeSlots: round2(w.AvgFreeSlots), MinFreeSlots: w.MinFreeSlots, DbConnections: round2(w.DbConnections),
			AvgJobQueueSize: round2(w.AvgJobQueueSize), MaxJobQueueSize: w.MaxJobQueueSize,
			BackoffSize: round2(w.BackoffSize),
			AvgLagMs:    avgLag(w.LagSumMs, w.LagCount), MaxLagMs: float64(w.MaxLagMs), LagCount: int(w.LagCount),
			DbErrors: int(w.DbErrors), AckSuccess: int(w.AckSuccess), AckFailed: int(w.AckFailed), DlqCount: int(w.Dlq),
		})
	}
	resp.PointCount = len(resp.TimeSeries)
	if resp.Workers, err = s.recentWorkers(ctx, 5*time.Minute); err != nil {
		return nil, err
	}

	queueRows, err := s.aq().QueueLagMetricsSeries(ctx, db.QueueLagMetricsSeriesParams{
		BucketSeconds: r.bucketSeconds(), FromTime: r.fromTime(), ToTime: r.toTime(),
	})
	if err != nil {
		return nil, fmt.Errorf("read queue metrics: %w", err)
	}
	type lag struct{ pops, sum, count, max int64 }
	byQueue := map[string]*lag{}
	for _, q := range queueRows {
		l := byQueue[q.QueueName]
		if l == nil {
			l = &lag{}
			byQueue[q.QueueName] = l
		}
		l.pops += q.PopMessages
		l.sum += q.LagSumMs
		l.count += q.LagCount
		l.max = max(l.max, q.MaxLagMs)
	}
	for name, l := range byQueue {
		if l.pops == 0 {
			continue
		}
		resp.Queues = append(resp.Queues, struct {
			AvgLagMs  float64 `json:"avgLagMs"`
			MaxLagMs  float64 `json:"maxLagMs"`
			PopCount  int     `json:"popCount"`
			QueueName string  `json:"queueName"`
		}{AvgLagMs: avgLag(l.sum, l.count), MaxLagMs: float64(l.max), PopCount: int(l.pops), QueueName: name})
	}
	slices.SortFunc(resp.Queues, func(a, b struct {
		AvgLagMs  float64 `json:"avgLagMs"`
		MaxLagMs  float64 `json:"maxLagMs"`
		PopCount  int     `json:"popCount"`
		QueueName string  `json:"queueName"`
	}) int {
		return cmp.Or(cmp.Compare(b.PopCount, a.PopCount), cmp.Compare(a.QueueName, b.QueueName))
	})
	resp.Queues = nonNil(resp.Queues)

	sum, err := s.aq().WorkerMetricsSummaryGet(ctx)
	if err != nil {
		return nil, fmt.Errorf("read metrics totals: %w", err)
	}
	pending, err := s.pendingTotal(ctx)
	if err != nil {
		return nil, err
	}
	sm := &resp.Summary
	sm.TotalPushMessages, sm.TotalPopMessages, sm.TotalAckMessages = int(sum.PushMessages), int(sum.PopMessages), int(sum.AckMessages)
	sm.TotalPushRequests, sm.TotalPopRequests, sm.TotalAckRequests = int(sum.PushRequests), int(sum.PopRequests), int(sum.AckRequests)
	sm.TotalDbErrors, sm.TotalAckFailed, sm.TotalDlq = int(sum.DbErrors), int(sum.AckFailed), int(sum.DlqCount)
	sm.PendingMessages = int(pending)
	return resp, nil
}

// queueSeries reads the per-queue rows of a range, oldest first.
func (s *Server) queueSeries(ctx context.Context, r seriesRange, queue string) ([]db.QueueLagMetricsSeriesRow, error) {
	rows, err := s.aq().QueueLagMetricsSeries(ctx, db.QueueLagMetricsSeriesParams{
		BucketSeconds: r.bucketSeconds(), FromTime: r.fromTime(), ToTime: r.toTime(), QueueName: queue,
	})
	if err != nil {
		return nil, fmt.Errorf("read queue metrics: %w", err)
	}
	return rows, nil
}

// GetQueueLag answers pop lag per queue and bucket, newest bucket first.
func (s *Server) GetQueueLag(ctx context.Context, req api.GetQueueLagRequestObject) (api.GetQueueLagResponseObject, error) {
	p := req.Params
	r, err := newSeriesRange(p.From, p.To, time.Hour)
	if err != nil {
		return badRequest[api.GetQueueLag400JSONResponse](err.Error()), nil
	}
	rows, err := s.queueSeries(ctx, r, deref(p.Queue, ""))
	if err != nil {
		return nil, err
	}
	resp := api.GetQueueLag200JSONResponse{}
	for i := len(rows) - 1; i >= 0; i-- {
		q := rows[i]
		if q.PopMessages == 0 {
			continue
		}
		resp = append(resp, api.QueueLagPoint{
			QueueName: q.QueueName, PopCount: int(q.PopMessages), AvgLagMs: avgLag(q.LagSumMs, q.LagCount),
			MaxLagMs: float64(q.MaxLagMs), BucketTime: fmtBucket(q.BucketStart.Time),
		})
	}
	// Rows are oldest first by bucket then queue; newest first by bucket,
	// queues by name within a bucket.
	slices.SortStableFunc(resp, func(a, b api.QueueLagPoint) int {
		return cmp.Or(cmp.Compare(b.BucketTime, a.BucketTime), cmp.Compare(a.QueueName, b.QueueName))
	})
	return resp, nil
}

// getQueueOps answers per-queue operation counts per bucket, oldest first.
func (s *Server) getQueueOps(ctx context.Context, req api.GetQueueOpsRequestObject) (api.GetQueueOpsResponseObject, error) {
	p := req.Params
	r, err := newSeriesRange(p.From, p.To, time.Hour)
	if err != nil {
		return badRequest[api.GetQueueOps400JSONResponse](err.Error()), nil
	}
	queue := deref(p.Queue, "")
	rows, err := s.queueSeries(ctx, r, queue)
	if err != nil {
		return nil, err
	}
	created, err := s.aq().PartitionCreatedSeries(ctx, db.PartitionCreatedSeriesParams{
		BucketSeconds: r.bucketSeconds(), FromTime: r.fromTime(), ToTime: r.toTime(), QueueName: queue,
	})
	if err != nil {
		return nil, fmt.Errorf("count created partitions: %w", err)
	}
	type key struct {
		bucket time.Time
		queue  string
	}
	points := map[key]*api.QueueOpsPoint{}
	point := func(b time.Time, q string) *api.QueueOpsPoint {
		k := key{b.UTC(), q}
		pt := points[k]
		if pt == nil {
			pt = &api.QueueOpsPoint{Bucket: fmtBucket(b), QueueName: q}
			points[k] = pt
		}
		return pt
	}
	for _, q := range rows {
		pt := point(q.BucketStart.Time, q.QueueName)
		pt.PushRequests, pt.PushMessages = int(q.PushRequests), int(q.PushMessages)
		pt.PopMessages, pt.PopEmpty = int(q.PopMessages), int(q.PopEmpty)
		pt.AckRequests, pt.AckSuccess, pt.AckFailed = int(q.AckRequests), int(q.AckSuccess), int(q.AckFailed)
		pt.DlqCount, pt.Transactions = int(q.Dlq), int(q.Transactions)
		pt.AvgLagMs, pt.MaxLagMs = avgLag(q.LagSumMs, q.LagCount), float64(q.MaxLagMs)
		pt.PushPerSecond, pt.PopPerSecond = r.perSecond(q.PushMessages), r.perSecond(q.PopMessages)
		pt.AckPerSecond, pt.EmptyPerSecond = r.perSecond(q.AckMessages), r.perSecond(q.PopEmpty)
		pt.ParkedCount = round2(q.ParkedSum / float64(r.bucketMinutes))
		pt.PartitionsDeleted = int(q.PartitionsDeleted) // counted by triggers (migration 0009)
	}
	for _, c := range created {
		point(c.BucketStart.Time, c.QueueName).PartitionsCreated = int(c.Created)
	}
	resp := api.GetQueueOps200JSONResponse{TimeRange: r.wire(), BucketMinutes: r.bucketMinutes}
	resp.Series = make([]api.QueueOpsPoint, 0, len(points))
	names := map[string]bool{}
	for _, pt := range points {
		resp.Series = append(resp.Series, *pt)
		names[pt.QueueName] = true
	}
	slices.SortFunc(resp.Series, func(a, b api.QueueOpsPoint) int {
		return cmp.Or(cmp.Compare(a.Bucket, b.Bucket), cmp.Compare(a.QueueName, b.QueueName))
	})
	resp.Queues = make([]string, 0, len(names))
	for n := range names {
		resp.Queues = append(resp.Queues, n)
	}
	slices.Sort(resp.Queues)
	return resp, nil
}

// GetQueueParkedReplicas answers parked long-polls per queue, bucket and
// broker.
func (s *Server) GetQueueParkedReplicas(ctx context.Context, req api.GetQueueParkedReplicasRequestObject) (api.GetQueueParkedReplicasResponseObject, error) {
	p := req.Params
	r, err := newSeriesRange(p.From, p.To, time.Hour)
	if err != nil {
		return badRequest[api.GetQueueParkedReplicas400JSONResponse](err.Error()), nil
	}
	rows, err := s.aq().QueueLagMetricsParkedSeries(ctx, db.QueueLagMetricsParkedSeriesParams{
		BucketSeconds: r.bucketSeconds(), FromTime: r.fromTime(), ToTime: r.toTime(), QueueName: deref(p.Queue, ""),
	})
	if err != nil {
		return nil, fmt.Errorf("read parked long-polls: %w", err)
	}
	resp := api.GetQueueParkedReplicas200JSONResponse{TimeRange: r.wire(), BucketMinutes: r.bucketMinutes}
	resp.Series = slices.Grow(resp.Series, len(rows))[:len(rows)]
	seen := map[api.BrokerRef]bool{}
	resp.Replicas = []api.BrokerRef{}
	for i, row := range rows {
		pt := &resp.Series[i]
		pt.Bucket, pt.QueueName, pt.Hostname = fmtBucket(row.BucketStart.Time), row.QueueName, row.Hostname
		pt.Port, pt.Pid, pt.ParkedCount = int(row.Port), int(row.Pid), round2(row.ParkedSum/float64(r.bucketMinutes))
		ref := api.BrokerRef{Hostname: row.Hostname, Port: int(row.Port), Pid: int(row.Pid)}
		if !seen[ref] {
			seen[ref] = true
			resp.Replicas = append(resp.Replicas, ref)
		}
	}
	resp.Series = nonNil(resp.Series)
	slices.SortFunc(resp.Replicas, func(a, b api.BrokerRef) int {
		return cmp.Or(cmp.Compare(a.Hostname, b.Hostname), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Pid, b.Pid))
	})
	return resp, nil
}

// GetRetentionAnalytics answers messages deleted by retention and eviction
// per bucket, oldest first.
func (s *Server) GetRetentionAnalytics(ctx context.Context, req api.GetRetentionAnalyticsRequestObject) (api.GetRetentionAnalyticsResponseObject, error) {
	p := req.Params
	r, err := newSeriesRange(p.From, p.To, time.Hour)
	if err != nil {
		return badRequest[api.GetRetentionAnalytics400JSONResponse](err.Error()), nil
	}
	rows, err := s.aq().RetentionHistorySeries(ctx, db.RetentionHistorySeriesParams{
		BucketSeconds: r.bucketSeconds(), FromTime: r.fromTime(), ToTime: r.toTime(), QueueName: deref(p.Queue, ""),
	})
	if err != nil {
		return nil, fmt.Errorf("read retention history: %w", err)
	}
	resp := api.GetRetentionAnalytics200JSONResponse{TimeRange: r.wire(), BucketMinutes: r.bucketMinutes}
	resp.Series = []api.RetentionPoint{}
	index := map[time.Time]int{}
	for _, row := range rows {
		b := row.BucketStart.Time.UTC()
		i, ok := index[b]
		if !ok {
			i = len(resp.Series)
			index[b] = i
			resp.Series = append(resp.Series, api.RetentionPoint{Bucket: fmtBucket(b)})
		}
		pt, n := &resp.Series[i], int(row.Deleted)
		switch row.RetentionType {
		case "retention":
			pt.RetentionMsgs += n
			resp.Totals.RetentionMsgs += n
		case "completed_retention":
			pt.CompletedRetentionMsgs += n
			resp.Totals.CompletedRetentionMsgs += n
		case "max_wait_time_eviction":
			pt.EvictionMsgs += n
			resp.Totals.EvictionMsgs += n
		}
		pt.TotalMsgs += n
		pt.EventCount += int(row.Events)
		resp.Totals.TotalMsgs += n
		resp.Totals.EventCount += int(row.Events)
	}
	return resp, nil
}
