package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"golang.org/x/sync/errgroup"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/broker"
	"github.com/queenforgo/queen/sql/pgerr"
)

// The resources reads count live from the tables; nothing is cached or
// rolled up in the background. Every count is measured against the
// queue-mode cursor. A partition's total is kept on its row (last_seq less
// the vacant numbers, see migration 0008); only partitions with something
// past the cursor cost an index probe, so a listing costs one pass over the
// partitions (and their cursors) it covers, not over their messages.

// msgCounts are the counts of a set of partitions.
type msgCounts struct {
	partitions                             int
	total, pending, processing, deadLetter int64
}

func (c *msgCounts) add(o msgCounts) {
	c.partitions += o.partitions
	c.total += o.total
	c.pending += o.pending
	c.processing += o.processing
	c.deadLetter += o.deadLetter
}

// processingOf is the un-acked part of a live queue-mode lease; it can only
// cover messages that are still stored past the cursor.
func processingOf(r db.PartitionStatsListRow) int64 { return min(r.Leased, r.Pending) }

// wire renders the counts as the listings show them: pending without what is
// being processed, as the reference broker does.
func (c msgCounts) wire() api.MessageCounts {
	return api.MessageCounts{
		Total: int(c.total), Pending: int(max(c.pending-c.processing, 0)),
		Processing: int(c.processing), DeadLetter: int(c.deadLetter),
	}
}

// listQueues pages through queues, newest first, with their counts.
func (s *Server) listQueues(ctx context.Context, req api.ListQueuesRequestObject) (api.ListQueuesResponseObject, error) {
	p := req.Params
	tid := tenantID(ctx)
	filter := db.QueueListPageParams{TenantID: &tid, Namespace: deref(p.Namespace, ""), Task: deref(p.Task, ""), RowOffset: int32(deref(p.Offset, 0))}
	if p.Limit != nil {
		filter.RowLimit = ptr(int32(*p.Limit))
	}
	queues, err := s.rq().QueueListPage(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	total, err := s.rq().QueueCountFiltered(ctx, db.QueueCountFilteredParams{TenantID: tid, Namespace: filter.Namespace, Task: filter.Task})
	if err != nil {
		return nil, fmt.Errorf("count queues: %w", err)
	}
	ids := make([]uuid.UUID, len(queues))
	for i, q := range queues {
		ids[i] = q.ID
	}
	counts, err := s.queueCounts(ctx, ids)
	if err != nil {
		return nil, err
	}
	resp := api.ListQueues200JSONResponse{Queues: make([]api.QueueSummary, 0, len(queues)), Total: int(total)}
	resp.Pagination.Limit, resp.Pagination.Offset = p.Limit, int(filter.RowOffset)
	for _, q := range queues {
		c := counts[q.ID]
		resp.Queues = append(resp.Queues, api.QueueSummary{
			Id: q.ID.String(), Name: q.Name, Namespace: q.Namespace, Task: q.Task, Priority: int(q.Priority),
			CreatedAt: fmtMillis(q.CreatedAt.Time), Partitions: c.partitions, Messages: c.wire(),
		})
	}
	return resp, nil
}

// tagGroup is one namespace or task with what it holds.
type tagGroup struct {
	name   string
	queues int
	counts msgCounts
}

// groupByTag adds up every queue of the request's tenant by a tag
// (namespace or task), leaving out queues without one, ordered by the tag.
func (s *Server) groupByTag(ctx context.Context, tag func(db.QueenQueue) string) ([]tagGroup, error) {
	tid := tenantID(ctx)
	queues, err := s.rq().QueueListPage(ctx, db.QueueListPageParams{TenantID: &tid})
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	ids := make([]uuid.UUID, len(queues))
	for i, q := range queues {
		ids[i] = q.ID
	}
	counts, err := s.queueCounts(ctx, ids)
	if err != nil {
		return nil, err
	}
	groups := map[string]*tagGroup{}
	for _, q := range queues {
		t := tag(q)
		if t == "" {
			continue
		}
		if groups[t] == nil {
			groups[t] = &tagGroup{name: t}
		}
		groups[t].queues++
		groups[t].counts.add(counts[q.ID])
	}
	out := make([]tagGroup, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b tagGroup) int { return cmp.Compare(a.name, b.name) })
	return out, nil
}

// ListNamespaces counts queues, partitions and messages per namespace.
func (s *Server) ListNamespaces(ctx context.Context, _ api.ListNamespacesRequestObject) (api.ListNamespacesResponseObject, error) {
	groups, err := s.groupByTag(ctx, func(q db.QueenQueue) string { return q.Namespace })
	if err != nil {
		return nil, err
	}
	resp := api.ListNamespaces200JSONResponse{Namespaces: make([]api.NamespaceSummary, 0, len(groups))}
	for _, g := range groups {
		resp.Namespaces = append(resp.Namespaces, api.NamespaceSummary{
			Namespace: g.name, Queues: g.queues, Partitions: g.counts.partitions, Messages: g.counts.wire(),
		})
	}
	return resp, nil
}

// ListTasks counts queues, partitions and messages per task.
func (s *Server) ListTasks(ctx context.Context, _ api.ListTasksRequestObject) (api.ListTasksResponseObject, error) {
	groups, err := s.groupByTag(ctx, func(q db.QueenQueue) string { return q.Task })
	if err != nil {
		return nil, err
	}
	resp := api.ListTasks200JSONResponse{Tasks: make([]api.TaskSummary, 0, len(groups))}
	for _, g := range groups {
		resp.Tasks = append(resp.Tasks, api.TaskSummary{
			Task: g.name, Queues: g.queues, Partitions: g.counts.partitions, Messages: g.counts.wire(),
		})
	}
	return resp, nil
}

// listPartitions pages through partitions, by queue then name, with their
// counts.
func (s *Server) listPartitions(ctx context.Context, req api.ListPartitionsRequestObject) (api.ListPartitionsResponseObject, error) {
	p := req.Params
	queue := deref(p.Queue, "")
	limit, offset := deref(p.Limit, 100), deref(p.Offset, 0)
	tid := tenantID(ctx)
	var ids []uuid.UUID
	var total int64
	var err error
	if queue != "" {
		ids, total, err = s.queuePartitionPage(ctx, tid, queue, limit, offset)
		if errors.Is(err, pgerr.ErrNotFound) {
			return api.ListPartitions404JSONResponse{NotFoundJSONResponse: api.NotFoundJSONResponse{Error: "Queue not found"}}, nil
		}
	} else {
		ids, total, err = s.partitionPage(ctx, tid, limit, offset)
	}
	if err != nil {
		return nil, err
	}
	var stats []db.PartitionStatsListRow
	if len(ids) > 0 {
		if stats, err = s.aq().PartitionStatsList(ctx, ids); err != nil {
			return nil, fmt.Errorf("count partitions: %w", err)
		}
	}
	resp := api.ListPartitions200JSONResponse{
		Partitions: make([]api.PartitionSummary, 0, len(stats)), Total: int(total),
		Truncated:  int64(offset+len(ids)) < total,
		Pagination: api.Pagination{Limit: limit, Offset: offset},
	}
	for _, r := range stats {
		resp.Partitions = append(resp.Partitions, api.PartitionSummary{
			Id: r.ID.String(), Queue: r.QueueName, Partition: r.Name,
			CreatedAt: fmtMillis(r.CreatedAt.Time), LastMessageAt: fmtTimestamptz(r.LastMessageAt),
			Total: int(r.Total), Pending: int(r.Pending), Processing: int(processingOf(r)), DeadLetter: int(r.DeadLetter),
			LagSeconds: ageSeconds(r.ObservedAt.Time, r.OldestPendingAt.Time, r.OldestPendingAt.Valid),
		})
	}
	return resp, nil
}

// partitionPage is one page of a tenant's partition ids, by queue then
// name, and how many partitions the tenant has.
func (s *Server) partitionPage(ctx context.Context, tid uuid.UUID, limit, offset int) ([]uuid.UUID, int64, error) {
	ids, err := s.rq().PartitionListPage(ctx, db.PartitionListPageParams{
		TenantID: tid, RowLimit: int32(limit), RowOffset: int32(offset),
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list partitions: %w", err)
	}
	total, err := s.rq().PartitionCountFiltered(ctx, db.PartitionCountFilteredParams{TenantID: &tid})
	if err != nil {
		return nil, 0, fmt.Errorf("count partitions: %w", err)
	}
	return ids, total, nil
}

// queuePartitionPage is one page of a queue's partition ids, by name (a
// range of the (queue_id, name) index: joined with the queues and sorted by
// both names, the planner read and sorted every partition of the queue),
// and how many it has, from the queue's counts (oneQueueCounts: the queue
// page asks for them in its detail request at the same time).
// pgerr.ErrNotFound when the tenant has no such queue.
func (s *Server) queuePartitionPage(ctx context.Context, tid uuid.UUID, queue string, limit, offset int) ([]uuid.UUID, int64, error) {
	q, err := s.rq().QueueGetByName(ctx, db.QueueGetByNameParams{TenantID: tid, Name: queue})
	if err != nil {
		if err = pgerr.Translate(err); errors.Is(err, pgerr.ErrNotFound) {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("read queue %q: %w", queue, err)
	}
	ids, err := s.rq().PartitionIDsByQueue(ctx, db.PartitionIDsByQueueParams{QueueID: q.ID, RowLimit: int32(limit), RowOffset: int32(offset)})
	if err != nil {
		return nil, 0, fmt.Errorf("list partitions: %w", err)
	}
	counts, err := s.oneQueueCounts(ctx, q.ID)
	if err != nil {
		return nil, 0, err
	}
	var total int64
	for _, c := range counts {
		if c.QueueID == q.ID {
			total = c.Partitions
		}
	}
	return ids, total, nil
}

// getOverview sums the whole broker: queues, partitions, tags, live message
// counts, consumer lag, and from the metrics rows the ack failures and the
// recent ack rate.
//
// The message counts are those of the resource listings
// (PartitionCountsByQueue over the tenant's queues). The lag statistics
// cover every (group, partition) pair of the queues a group reads, as
// queen.consumer_lag has them, read as a histogram
// (ConsumerLagHistogram), so a backlog of many partitions moves a row per
// distinct lag to Go rather than one per pair.
func (s *Server) getOverview(ctx context.Context, _ api.GetOverviewRequestObject) (api.GetOverviewResponseObject, error) {
	tid := tenantID(ctx)
	queues, err := s.rq().QueueListPage(ctx, db.QueueListPageParams{TenantID: &tid})
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	ids := make([]uuid.UUID, len(queues))
	for i, q := range queues {
		ids[i] = q.ID
	}
	const window = 5 * time.Minute
	now := time.Now()
	// The three reads that pass over many rows run at once, each on a
	// connection of its own: the counts and the lag histogram each pass
	// over every partition, the recent count over the messages stored in
	// the window; one after the other, the first request on a large
	// database waited for their sum.
	var (
		counts map[uuid.UUID]msgCounts
		hist   []db.ConsumerLagHistogramRow
		recent int64
		reads  errgroup.Group
	)
	reads.Go(func() (err error) {
		counts, err = s.queueCounts(ctx, ids)
		return err
	})
	reads.Go(func() (err error) {
		if hist, err = s.aq().ConsumerLagHistogram(ctx, tid); err != nil {
			return fmt.Errorf("read consumer lag: %w", err)
		}
		return nil
	})
	reads.Go(func() (err error) {
		count := db.MessageCountCreatedSinceParams{Since: pgtype.Timestamptz{Time: now.Add(-window), Valid: true}}
		if s.cfg.Tenancy {
			count.TenantID = &tid // without tenancy every queue is the default tenant's
		}
		if recent, err = s.aq().MessageCountCreatedSince(ctx, count); err != nil {
			return fmt.Errorf("count recent messages: %w", err)
		}
		return nil
	})
	if err := reads.Wait(); err != nil {
		return nil, err
	}
	sum, err := s.aq().WorkerMetricsSummaryGet(ctx)
	if err != nil {
		return nil, fmt.Errorf("read metrics totals: %w", err)
	}
	// The per-minute rows of the last five minutes; the current minute is
	// written when it ends (or on POST /api/v1/stats/refresh).
	processed, err := s.aq().WorkerMetricsProcessedSince(ctx, pgtype.Timestamptz{Time: now.Add(-window).Truncate(time.Minute), Valid: true})
	if err != nil {
		return nil, fmt.Errorf("read acked messages: %w", err)
	}

	namespaces, tasks := map[string]bool{}, map[string]bool{}
	for _, q := range queues {
		if q.Namespace != "" {
			namespaces[q.Namespace] = true
		}
		if q.Task != "" {
			tasks[q.Task] = true
		}
	}
	var c msgCounts
	for _, qc := range counts {
		c.add(qc)
	}
	var timeLags, offsetLags []lagCount
	for _, h := range hist {
		if h.Kind == "time" {
			timeLags = append(timeLags, lagCount{lag: h.Lag, pairs: h.Pairs})
		} else {
			offsetLags = append(offsetLags, lagCount{lag: h.Lag, pairs: h.Pairs})
		}
	}

	resp := api.GetOverview200JSONResponse{
		Queues: len(queues), Partitions: c.partitions, Namespaces: len(namespaces), Tasks: len(tasks),
		Timestamp: fmtMillis(now), StatsAge: statsAge(sum),
	}
	m := &resp.Messages
	m.Total, m.Processing, m.DeadLetter = int(c.total), int(c.processing), int(c.deadLetter)
	m.Pending = int(max(c.pending-c.processing, 0))
	m.Completed = int(max(c.total-c.pending-c.deadLetter, 0))
	m.Failed = int(sum.AckFailed)
	resp.Lag.Time, resp.Lag.Offset = lagStats(timeLags), lagStats(offsetLags)
	resp.Throughput.IngestedPerSecond = float64(recent) / window.Seconds()
	var acked int64
	for _, p := range processed {
		acked += p.MessagesProcessed
	}
	resp.Throughput.ProcessedPerSecond = float64(acked) / window.Seconds()
	return resp, nil
}

// lagCount is one bar of a lag histogram: how many (group, partition) pairs
// lag by lag.
type lagCount struct{ lag, pairs int64 }

// lagStats summarises a histogram of lags (in any order, bars of no pairs
// ignored); all zero when there are no pairs.
func lagStats(h []lagCount) api.LagStats {
	h = slices.DeleteFunc(slices.Clone(h), func(b lagCount) bool { return b.pairs <= 0 })
	slices.SortFunc(h, func(a, b lagCount) int { return cmp.Compare(a.lag, b.lag) })
	var n int64
	var sum float64
	for _, b := range h {
		n += b.pairs
		sum += float64(b.lag) * float64(b.pairs)
	}
	if n == 0 {
		return api.LagStats{}
	}
	// The i-th smallest lag (0-based) of the whole set.
	at := func(i int64) float64 {
		for _, b := range h {
			if i < b.pairs {
				return float64(b.lag)
			}
			i -= b.pairs
		}
		return float64(h[len(h)-1].lag)
	}
	median := at(n / 2)
	if n%2 == 0 {
		median = (at(n/2-1) + at(n/2)) / 2
	}
	return api.LagStats{Avg: sum / float64(n), Median: median, Min: float64(h[0].lag), Max: float64(h[len(h)-1].lag)}
}

// ageSeconds is how many whole seconds before now t was; 0 when t is unset
// or in the future.
func ageSeconds(now, t time.Time, valid bool) int {
	if !valid || !t.Before(now) {
		return 0
	}
	return int(now.Sub(t) / time.Second)
}

// getQueue returns one queue with its options, one page of its partitions
// (queenctl's `queue describe` shows them) and the totals of all of them.
// The totals come from the partitions' counters, as the listings' do; only
// the page's partitions are read one by one.
func (s *Server) getQueue(ctx context.Context, req api.GetQueueRequestObject) (api.GetQueueResponseObject, error) {
	limit, offset := deref(req.Params.Limit, 1000), deref(req.Params.Offset, 0)
	q, err := s.rq().QueueGetByName(ctx, db.QueueGetByNameParams{TenantID: tenantID(ctx), Name: req.Queue})
	if errors.Is(pgerr.Translate(err), pgerr.ErrNotFound) {
		return api.GetQueue404JSONResponse{NotFoundJSONResponse: api.NotFoundJSONResponse{Error: "Queue not found"}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read queue %q: %w", req.Queue, err)
	}
	counts, err := s.queueCounts(ctx, []uuid.UUID{q.ID})
	if err != nil {
		return nil, err
	}
	var ids []uuid.UUID
	if limit > 0 {
		ids, err = s.aq().PartitionIDsByQueue(ctx, db.PartitionIDsByQueueParams{QueueID: q.ID, RowLimit: int32(limit), RowOffset: int32(offset)})
		if err != nil {
			return nil, fmt.Errorf("list partitions: %w", err)
		}
	}
	page, bounds, err := s.partitionDetails(ctx, ids)
	if err != nil {
		return nil, err
	}
	resp := api.GetQueue200JSONResponse{
		Id: q.ID.String(), Name: q.Name, Namespace: q.Namespace, Task: q.Task,
		CreatedAt: fmtMillis(q.CreatedAt.Time), Options: resolvedOptions(broker.QueueFromRow(q).Options),
		Partitions: make([]api.QueueDetailPartition, 0, len(page)),
	}
	tot := counts[q.ID]
	c := statusCounts(tot.total, tot.pending, tot.processing, tot.deadLetter)
	t := &resp.Totals
	t.Partitions, t.Total, t.Pending, t.Processing = tot.partitions, c.Total, c.Pending, c.Processing
	t.Completed, t.Failed, t.DeadLetter = c.Completed, 0, c.DeadLetter
	resp.Pagination.Limit, resp.Pagination.Offset = limit, offset
	resp.Pagination.Truncated = offset+len(ids) < tot.partitions
	for _, st := range page {
		pc := statusCounts(st.Total, st.Pending, processingOf(st), st.DeadLetter)
		qp := api.QueueDetailPartition{
			Id: st.ID.String(), Name: st.Name, CreatedAt: fmtMillis(st.CreatedAt.Time),
			OldestMessage: fmtTimestamptz(bounds[st.ID].OldestAt), NewestMessage: fmtTimestamptz(bounds[st.ID].NewestAt),
		}
		qp.Stats.Total, qp.Stats.Pending, qp.Stats.Processing = pc.Total, pc.Pending, pc.Processing
		qp.Stats.Completed, qp.Stats.Failed, qp.Stats.DeadLetter = pc.Completed, 0, pc.DeadLetter
		resp.Partitions = append(resp.Partitions, qp)
	}
	return resp, nil
}

// partitionDetails reads the counts of the given partitions (ordered by
// queue, then name) and when their oldest and newest stored messages were
// stored.
func (s *Server) partitionDetails(ctx context.Context, ids []uuid.UUID) ([]db.PartitionStatsListRow, map[uuid.UUID]db.PartitionMessageBoundsRow, error) {
	if len(ids) == 0 {
		return nil, nil, nil
	}
	page, err := s.aq().PartitionStatsList(ctx, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("count partitions: %w", err)
	}
	rows, err := s.aq().PartitionMessageBounds(ctx, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("read message bounds: %w", err)
	}
	bounds := make(map[uuid.UUID]db.PartitionMessageBoundsRow, len(rows))
	for _, r := range rows {
		bounds[r.ID] = r
	}
	return page, bounds, nil
}
