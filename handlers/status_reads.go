package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/sql/pgerr"
)

// getStatus answers the dashboard's main time series and totals.
func (s *Server) getStatus(ctx context.Context, req api.GetStatusRequestObject) (api.GetStatusResponseObject, error) {
	p := req.Params
	r, err := newSeriesRange(p.From, p.To, time.Hour)
	if err != nil {
		return badRequest[api.GetStatus400JSONResponse](err.Error()), nil
	}
	queue, ns, task := deref(p.Queue, ""), deref(p.Namespace, ""), deref(p.Task, "")
	resp := api.GetStatus200JSONResponse{TimeRange: r.wire(), BucketMinutes: r.bucketMinutes}

	workers, err := s.aq().WorkerMetricsSeries(ctx, db.WorkerMetricsSeriesParams{
		BucketSeconds: r.bucketSeconds(), FromTime: r.fromTime(), ToTime: r.toTime(),
	})
	if err != nil {
		return nil, fmt.Errorf("read worker metrics: %w", err)
	}
	sysRows, err := s.systemRows(ctx, r, "", nil)
	if err != nil {
		return nil, err
	}
	system, err := systemByBucket(r, sysRows)
	if err != nil {
		return nil, err
	}
	points := map[time.Time]*api.StatusThroughputPoint{}
	point := func(b time.Time) *api.StatusThroughputPoint {
		b = b.UTC()
		pt := points[b]
		if pt == nil {
			pt = &api.StatusThroughputPoint{Timestamp: fmtBucket(b)}
			points[b] = pt
		}
		return pt
	}
	for _, w := range workers {
		pt := point(w.BucketStart.Time)
		pt.AvgEventLoopLagMs, pt.MaxEventLoopLagMs = round2(w.AvgEventLoopLagMs), round2(w.MaxEventLoopLagMs)
		pt.MinFreeSlots, pt.DbErrors = w.MinFreeSlots, int(w.DbErrors)
	}
	if queue == "" && ns == "" && task == "" {
		for _, w := range workers {
			pt := point(w.BucketStart.Time)
			pt.Ingested, pt.Processed, pt.PopMessages = int(w.PushMessages), int(w.AckMessages), int(w.PopMessages)
			pt.AvgLagMs, pt.MaxLagMs = avgLag(w.LagSumMs, w.LagCount), float64(w.MaxLagMs)
			pt.AckFailed, pt.DlqCount = int(w.AckFailed), int(w.Dlq)
		}
	} else {
		names, err := s.queueNamesFor(ctx, queue, ns, task)
		if err != nil {
			return nil, err
		}
		rows, err := s.aq().QueueLagMetricsSeries(ctx, db.QueueLagMetricsSeriesParams{
			BucketSeconds: r.bucketSeconds(), FromTime: r.fromTime(), ToTime: r.toTime(), QueueNames: names,
		})
		if err != nil {
			return nil, fmt.Errorf("read queue metrics: %w", err)
		}
		type lagSum struct{ sum, count int64 }
		lags := map[time.Time]*lagSum{}
		for _, q := range rows {
			b := q.BucketStart.Time.UTC()
			pt := point(b)
			pt.Ingested += int(q.PushMessages)
			pt.Processed += int(q.AckMessages)
			pt.PopMessages += int(q.PopMessages)
			pt.MaxLagMs = max(pt.MaxLagMs, float64(q.MaxLagMs))
			pt.AckFailed += int(q.AckFailed)
			pt.DlqCount += int(q.Dlq)
			if lags[b] == nil {
				lags[b] = &lagSum{}
			}
			lags[b].sum += q.LagSumMs
			lags[b].count += q.LagCount
		}
		for b, l := range lags {
			points[b].AvgLagMs = avgLag(l.sum, l.count)
		}
	}
	for b, t := range system {
		pt := point(b)
		if g := t.leaf("cpu", "user_us"); g != nil {
			pt.QueenCpuUserPct = ptr(round2(g.avg / 100))
		}
		if g := t.leaf("cpu", "system_us"); g != nil {
			pt.QueenCpuSysPct = ptr(round2(g.avg / 100))
		}
		if g := t.leaf("memory", "rss_bytes"); g != nil {
			pt.QueenRssMb = ptr(float64(int64(g.avg/(1<<20)*10+0.5)) / 10)
		}
		for _, f := range []struct {
			dst  **float64
			name string
		}{{&pt.DbPoolActive, "pool_active"}, {&pt.DbPoolIdle, "pool_idle"}, {&pt.DbPoolSize, "pool_size"}} {
			if g := t.leaf("database", f.name); g != nil {
				*f.dst = ptr(float64(int64(g.avg*10+0.5)) / 10)
			}
		}
	}
	buckets := make([]time.Time, 0, len(points))
	for b := range points {
		buckets = append(buckets, b)
	}
	slices.SortFunc(buckets, func(a, b time.Time) int { return b.Compare(a) }) // newest first
	resp.Throughput = make([]api.StatusThroughputPoint, 0, len(buckets))
	for _, b := range buckets {
		pt := points[b]
		pt.IngestedPerSecond = r.perSecond(int64(pt.Ingested))
		pt.ProcessedPerSecond = r.perSecond(int64(pt.Processed))
		pt.PopPerSecond = r.perSecond(int64(pt.PopMessages))
		resp.Throughput = append(resp.Throughput, *pt)
	}
	resp.PointCount = len(resp.Throughput)

	// Every queue's partition counts: the pending total below, and which
	// queues ever took a message (the only ones listed).
	byQueue, pending, err := s.allQueueCountsByID(ctx)
	if err != nil {
		return nil, err
	}
	queues, err := s.aq().QueueConsumptionList(ctx, db.QueueConsumptionListParams{QueueName: queue, Namespace: ns, Task: task})
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	queues = slices.DeleteFunc(queues, func(q db.QueueConsumptionListRow) bool { return byQueue[q.ID].Pushed == 0 })
	resp.Queues = slices.Grow(resp.Queues, len(queues))[:len(queues)]
	for i, q := range queues {
		rq := &resp.Queues[i]
		rq.Id, rq.Name, rq.Namespace, rq.Task = q.ID.String(), q.Name, q.Namespace, q.Task
		rq.Partitions, rq.TotalConsumed = int(byQueue[q.ID].Partitions), int(q.Consumed)
	}
	resp.Queues = nonNil(resp.Queues)

	sum, err := s.aq().WorkerMetricsSummaryGet(ctx)
	if err != nil {
		return nil, fmt.Errorf("read metrics totals: %w", err)
	}
	m := &resp.Messages
	m.Total, m.Pending = int(sum.PushMessages), int(pending)
	m.Completed, m.Failed, m.DeadLetter = int(sum.AckSuccess), int(sum.AckFailed), int(sum.DlqCount)
	m.Requests = api.OpCounts{Push: float64(sum.PushRequests), Pop: float64(sum.PopRequests), Ack: float64(sum.AckRequests)}
	ratio := func(msgs, reqs int64) float64 {
		if reqs == 0 {
			return 0
		}
		return round2(float64(msgs) / float64(reqs))
	}
	m.BatchEfficiency = api.OpCounts{
		Push: ratio(sum.PushMessages, sum.PushRequests), Pop: ratio(sum.PopMessages, sum.PopRequests),
		Ack: ratio(sum.AckMessages, sum.AckRequests),
	}
	resp.StatsAge = statsAge(sum)

	leases, err := s.aq().PartitionConsumerLeaseSummary(ctx)
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	resp.Leases.Active, resp.Leases.PartitionsWithLeases = int(leases.Active), int(leases.Partitions)
	resp.Leases.TotalBatchSize, resp.Leases.TotalAcked = int(leases.BatchSize), int(leases.Acked)
	m.Processing = int(max(leases.BatchSize-leases.Acked, 0))

	dlq, err := s.aq().DeadLetterSummary(ctx)
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	top, err := s.aq().DeadLetterTopErrors(ctx, 5)
	if err != nil {
		return nil, fmt.Errorf("read dead-letter errors: %w", err)
	}
	d := &resp.DeadLetterQueue
	d.TotalMessages, d.Current, d.AffectedPartitions = int(sum.DlqCount), int(dlq.Total), int(dlq.Partitions)
	d.TopErrors = slices.Grow(d.TopErrors, len(top))[:len(top)]
	for i, e := range top {
		d.TopErrors[i].Error, d.TopErrors[i].Count = e.Error, int(e.Count)
	}
	d.TopErrors = nonNil(d.TopErrors)
	resp.Errors.DbErrors, resp.Errors.AckFailed, resp.Errors.DlqMessages = int(sum.DbErrors), int(sum.AckFailed), int(sum.DlqCount)

	resp.Workers, err = s.recentWorkers(ctx, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// statsAge is how many seconds ago a broker last wrote metrics; -1 when
// none ever did.
func statsAge(sum db.WorkerMetricsSummaryGetRow) int {
	if !sum.LastUpdatedAt.Valid {
		return -1
	}
	return ageSeconds(sum.ObservedAt.Time, sum.LastUpdatedAt.Time, true)
}

// queueNamesFor lists the queues a queue/namespace/task filter selects.
func (s *Server) queueNamesFor(ctx context.Context, queue, ns, task string) ([]string, error) {
	names, err := s.aq().QueueNamesFiltered(ctx, db.QueueNamesFilteredParams{Namespace: ns, Task: task})
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	if queue != "" {
		names = slices.DeleteFunc(names, func(n string) bool { return n != queue })
	}
	return nonNil(names), nil
}

// recentWorkers lists the brokers that wrote metrics within window, with
// their newest minute's gauges.
func (s *Server) recentWorkers(ctx context.Context, window time.Duration) ([]api.WorkerSummary, error) {
	since := pgtype.Timestamptz{Time: time.Now().Add(-window), Valid: true}
	rows, err := s.aq().WorkerMetricsRecent(ctx, since)
	if err != nil {
		return nil, fmt.Errorf("read workers: %w", err)
	}
	processed, err := s.aq().WorkerMetricsProcessedSince(ctx, since)
	if err != nil {
		return nil, fmt.Errorf("read workers: %w", err)
	}
	type key struct {
		host             string
		port, pid, wrkID int32
	}
	done := map[key]int64{}
	for _, p := range processed {
		done[key{p.Hostname, p.Port, p.Pid, p.WorkerID}] = p.MessagesProcessed
	}
	out := make([]api.WorkerSummary, 0, len(rows))
	for _, w := range rows {
		out = append(out, api.WorkerSummary{
			Hostname: w.Hostname, Port: int(w.Port), Pid: int(w.Pid), WorkerId: int(w.WorkerID),
			AvgEventLoopLagMs: round2(w.AvgEventLoopLagMs), MaxEventLoopLagMs: round2(w.MaxEventLoopLagMs),
			FreeSlots: round2(w.AvgFreeSlots), DbConnections: round2(w.DbConnections),
			JobQueueSize: round2(w.AvgJobQueueSize), BackoffSize: ptr(round2(w.BackoffSize)),
			MessagesProcessed: int(done[key{w.Hostname, w.Port, w.Pid, w.WorkerID}]),
			LastSeen:          ptr(fmtBucket(w.Bucket.Time)),
		})
	}
	return out, nil
}

// statusCounts are a partition's (or a sum of partitions') counts as the
// status routes show them: pending includes what is being processed.
func statusCounts(total, pending, processing, deadLetter int64) api.StatusMessageCounts {
	return api.StatusMessageCounts{
		Total: int(total), Pending: int(pending), Processing: int(processing), DeadLetter: int(deadLetter),
		Completed: int(max(total-pending-deadLetter, 0)), Failed: ptr(0),
	}
}

// ListStatusQueues pages through queues with their live counts.
func (s *Server) ListStatusQueues(ctx context.Context, req api.ListStatusQueuesRequestObject) (api.ListStatusQueuesResponseObject, error) {
	p := req.Params
	limit, offset := deref(p.Limit, 100), deref(p.Offset, 0)
	ns, task, queue := deref(p.Namespace, ""), deref(p.Task, ""), deref(p.Queue, "")
	tid := tenantID(ctx)
	var queues []db.QueenQueue
	var total int64
	if queue != "" {
		q, err := s.aq().QueueGetByName(ctx, db.QueueGetByNameParams{TenantID: tid, Name: queue})
		if err != nil && !errors.Is(pgerr.Translate(err), pgerr.ErrNotFound) {
			return nil, fmt.Errorf("read queue %q: %w", queue, err)
		}
		if err == nil && (ns == "" || q.Namespace == ns) && (task == "" || q.Task == task) {
			total = 1
			if offset == 0 {
				queues = []db.QueenQueue{q}
			}
		}
	} else {
		var err error
		queues, err = s.aq().QueueListPage(ctx, db.QueueListPageParams{
			TenantID: &tid, Namespace: ns, Task: task, RowLimit: ptr(int32(limit)), RowOffset: int32(offset),
		})
		if err != nil {
			return nil, fmt.Errorf("list queues: %w", err)
		}
		if total, err = s.aq().QueueCountFiltered(ctx, db.QueueCountFilteredParams{TenantID: tid, Namespace: ns, Task: task}); err != nil {
			return nil, fmt.Errorf("count queues: %w", err)
		}
	}
	ids := make([]uuid.UUID, len(queues))
	for i, q := range queues {
		ids[i] = q.ID
	}
	counts, err := s.queueCounts(ctx, ids)
	if err != nil {
		return nil, err
	}
	resp := api.ListStatusQueues200JSONResponse{Total: int(total), Pagination: api.Pagination{Limit: limit, Offset: offset}}
	resp.Queues = slices.Grow(resp.Queues, len(queues))[:len(queues)]
	for i, q := range queues {
		c := counts[q.ID]
		rq := &resp.Queues[i]
		rq.Id, rq.Name, rq.Namespace, rq.Task = q.ID.String(), q.Name, q.Namespace, q.Task
		rq.CreatedAt, rq.Partitions = fmtMillis(q.CreatedAt.Time), c.partitions
		rq.Messages = statusCounts(c.total, c.pending, c.processing, c.deadLetter)
	}
	resp.Queues = nonNil(resp.Queues)
	return resp, nil
}

// GetStatusQueue answers one queue with its configuration, a page of its
// partitions and the totals over all of them.
func (s *Server) GetStatusQueue(ctx context.Context, req api.GetStatusQueueRequestObject) (api.GetStatusQueueResponseObject, error) {
	p := req.Params
	limit, offset := deref(p.Limit, 1000), deref(p.Offset, 0)
	tid := tenantID(ctx)
	q, err := s.aq().QueueGetByName(ctx, db.QueueGetByNameParams{TenantID: tid, Name: req.Queue})
	if errors.Is(pgerr.Translate(err), pgerr.ErrNotFound) {
		return api.GetStatusQueue404JSONResponse{NotFoundJSONResponse: api.NotFoundJSONResponse{Error: "Queue not found"}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read queue %q: %w", req.Queue, err)
	}
	counts, err := s.queueCounts(ctx, []uuid.UUID{q.ID})
	if err != nil {
		return nil, err
	}
	ids, err := s.aq().PartitionIDsByQueue(ctx, db.PartitionIDsByQueueParams{QueueID: q.ID, RowLimit: int32(limit), RowOffset: int32(offset)})
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	var page []db.PartitionStatsListRow
	if len(ids) > 0 {
		if page, err = s.aq().PartitionStatsList(ctx, ids); err != nil {
			return nil, fmt.Errorf("count partitions: %w", err)
		}
	}
	var resp api.GetStatusQueue200JSONResponse
	rq := &resp.Queue
	rq.Id, rq.Name, rq.Namespace, rq.Task = q.ID.String(), q.Name, q.Namespace, q.Task
	rq.Priority, rq.CreatedAt = int(q.Priority), fmtMillis(q.CreatedAt.Time)
	c := &rq.Config
	c.LeaseTime, c.RetryLimit, c.RetryDelay, c.Ttl = int(q.LeaseTime), int(q.RetryLimit), int(q.RetryDelay), int(q.Ttl)
	c.MaxQueueSize, c.DeadLetterQueue = int(q.MaxQueueSize), q.DeadLetterQueue
	c.RetentionSeconds, c.CompletedRetentionSeconds = ptr(int(q.RetentionSeconds)), ptr(int(q.CompletedRetentionSeconds))
	c.RetentionEnabled, c.MaxWaitTimeSeconds = ptr(q.RetentionEnabled), ptr(int(q.MaxWaitTimeSeconds))

	tot := counts[q.ID]
	t := &resp.Totals
	t.Messages = statusCounts(tot.total, tot.pending, tot.processing, tot.deadLetter)
	t.Partitions, t.Total, t.Pending, t.Processing = tot.partitions, t.Messages.Total, t.Messages.Pending, t.Messages.Processing
	t.Completed, t.DeadLetter = t.Messages.Completed, t.Messages.DeadLetter

	resp.Pagination.Limit, resp.Pagination.Offset = limit, offset
	resp.Pagination.Truncated = offset+len(page) < tot.partitions

	cursors, err := s.aq().PartitionConsumerCursorTotals(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read cursors: %w", err)
	}
	bounds, err := s.aq().PartitionMessageBounds(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read message bounds: %w", err)
	}
	byCursor := make(map[uuid.UUID]db.PartitionConsumerCursorTotalsRow, len(cursors))
	for _, c := range cursors {
		byCursor[c.PartitionID] = c
	}
	byBounds := make(map[uuid.UUID]db.PartitionMessageBoundsRow, len(bounds))
	for _, b := range bounds {
		byBounds[b.ID] = b
	}
	resp.Partitions = make([]api.StatusPartition, 0, len(page))
	for _, st := range page {
		pc := statusCounts(st.Total, st.Pending, processingOf(st), st.DeadLetter)
		sp := api.StatusPartition{
			Id: st.ID.String(), Name: st.Name, CreatedAt: fmtMillis(st.CreatedAt.Time),
			Messages: pc, Stats: pc,
			OldestMessage: fmtTimestamptz(byBounds[st.ID].OldestAt), NewestMessage: fmtTimestamptz(byBounds[st.ID].NewestAt),
		}
		cur := byCursor[st.ID]
		sp.Cursor.TotalConsumed, sp.Cursor.BatchesConsumed = int(cur.Consumed), int(cur.Batches)
		sp.LastActivity = fmtTimestamptz(cur.LastConsumedAt)
		resp.Partitions = append(resp.Partitions, sp)
	}
	return resp, nil
}

// ListStatusQueueMessages pages through a queue's messages, newest first.
func (s *Server) ListStatusQueueMessages(ctx context.Context, req api.ListStatusQueueMessagesRequestObject) (api.ListStatusQueueMessagesResponseObject, error) {
	p := req.Params
	tid := tenantID(ctx)
	if _, err := s.aq().QueueGetByName(ctx, db.QueueGetByNameParams{TenantID: tid, Name: req.Queue}); errors.Is(pgerr.Translate(err), pgerr.ErrNotFound) {
		return api.ListStatusQueueMessages404JSONResponse{NotFoundJSONResponse: api.NotFoundJSONResponse{Error: "Queue not found"}}, nil
	} else if err != nil {
		return nil, fmt.Errorf("read queue %q: %w", req.Queue, err)
	}
	rows, err := s.aq().MessageListPage(ctx, db.MessageListPageParams{
		TenantID: tid, QueueName: req.Queue, RowLimit: int32(deref(p.Limit, 50)), RowOffset: int32(deref(p.Offset, 0)),
	})
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	resp := make(api.ListStatusQueueMessages200JSONResponse, 0, len(rows))
	for _, m := range rows {
		resp = append(resp, api.StatusQueueMessage{
			Id: m.ID.String(), TransactionId: m.TransactionID, PartitionId: m.PartitionID.String(),
			QueuePath: m.QueueName + "/" + m.PartitionName, Queue: m.QueueName, Partition: m.PartitionName,
			Status: api.MessageStatus(m.Status), CreatedAt: fmtMillis(m.CreatedAt.Time),
		})
	}
	return resp, nil
}

// maxAnalyticsPoints bounds /api/v1/status/analytics.
const maxAnalyticsPoints = 10000

// GetStatusAnalytics answers messages stored per interval, every interval
// of the window included.
func (s *Server) GetStatusAnalytics(ctx context.Context, req api.GetStatusAnalyticsRequestObject) (api.GetStatusAnalyticsResponseObject, error) {
	p := req.Params
	interval := "hour"
	if p.Interval != nil {
		interval = string(*p.Interval)
	}
	r, err := newSeriesRange(p.From, p.To, 24*time.Hour)
	if err != nil {
		return badRequest[api.GetStatusAnalytics400JSONResponse](err.Error()), nil
	}
	step := map[string]func(time.Time) time.Time{
		"minute": func(t time.Time) time.Time { return t.Add(time.Minute) },
		"hour":   func(t time.Time) time.Time { return t.Add(time.Hour) },
		"day":    func(t time.Time) time.Time { return t.AddDate(0, 0, 1) },
		"week":   func(t time.Time) time.Time { return t.AddDate(0, 0, 7) },
		"month":  func(t time.Time) time.Time { return t.AddDate(0, 1, 0) },
	}[interval]
	first := truncateTo(r.from, interval)
	var starts []time.Time
	for t := first; !t.After(r.to); t = step(t) {
		if len(starts) == maxAnalyticsPoints {
			return badRequest[api.GetStatusAnalytics400JSONResponse](fmt.Sprintf("more than %d intervals: choose a larger interval or a shorter window", maxAnalyticsPoints)), nil
		}
		starts = append(starts, t)
	}
	var names []string
	if deref(p.Queue, "") != "" || deref(p.Namespace, "") != "" || deref(p.Task, "") != "" {
		if names, err = s.queueNamesFor(ctx, deref(p.Queue, ""), deref(p.Namespace, ""), deref(p.Task, "")); err != nil {
			return nil, err
		}
	}
	rows, err := s.aq().QueueLagMetricsPushedSeries(ctx, db.QueueLagMetricsPushedSeriesParams{
		Unit: interval, FromTime: pgtype.Timestamptz{Time: first, Valid: true}, ToTime: r.toTime(), QueueNames: names,
	})
	if err != nil {
		return nil, fmt.Errorf("read pushed messages: %w", err)
	}
	counts := make(map[time.Time]int64, len(rows))
	for _, row := range rows {
		counts[row.BucketStart.Time.UTC()] = row.Messages
	}
	resp := api.GetStatusAnalytics200JSONResponse{Interval: interval, From: fmtMillis(r.from), To: fmtMillis(r.to)}
	resp.DataPoints = slices.Grow(resp.DataPoints, len(starts))[:len(starts)]
	for i, t := range starts {
		resp.DataPoints[i].Timestamp, resp.DataPoints[i].Messages = fmtBucket(t), int(counts[t])
	}
	resp.DataPoints = nonNil(resp.DataPoints)
	return resp, nil
}

// truncateTo is PostgreSQL's date_trunc in UTC (weeks start on Monday).
func truncateTo(t time.Time, unit string) time.Time {
	t = t.UTC()
	switch unit {
	case "minute":
		return t.Truncate(time.Minute)
	case "hour":
		return t.Truncate(time.Hour)
	case "day":
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	case "week":
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	case "month":
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return t
}
