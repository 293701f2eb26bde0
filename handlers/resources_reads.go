package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// The resources reads count live from the tables; nothing is cached or
// rolled up in the background. Every count is measured against the
// queue-mode cursor, by index range scans per partition, so a listing costs
// in proportion to the messages stored in the queues it shows.

// msgCounts adds up the per-partition counts of PartitionStatsList.
type msgCounts struct {
	total, pending, processing, deadLetter int64
}

func (c *msgCounts) add(r db.PartitionStatsListRow) {
	c.total += r.Total
	c.pending += r.Pending
	c.processing += processingOf(r)
	c.deadLetter += r.DeadLetter
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

// partitionStats reads the counts of the given queues' partitions; nil reads
// every partition.
func (s *Server) partitionStats(ctx context.Context, queueIDs []uuid.UUID) ([]db.PartitionStatsListRow, error) {
	if queueIDs != nil && len(queueIDs) == 0 {
		return nil, nil
	}
	rows, err := s.q.PartitionStatsList(ctx, db.PartitionStatsListParams{QueueIds: queueIDs})
	if err != nil {
		return nil, fmt.Errorf("count partitions: %w", err)
	}
	return rows, nil
}

// ListQueues pages through queues, newest first, with their counts.
func (s *Server) ListQueues(ctx context.Context, req api.ListQueuesRequestObject) (api.ListQueuesResponseObject, error) {
	p := req.Params
	filter := db.QueueListPageParams{Namespace: deref(p.Namespace, ""), Task: deref(p.Task, ""), RowOffset: int32(deref(p.Offset, 0))}
	if p.Limit != nil {
		filter.RowLimit = ptr(int32(*p.Limit))
	}
	queues, err := s.q.QueueListPage(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	total, err := s.q.QueueCountFiltered(ctx, db.QueueCountFilteredParams{Namespace: filter.Namespace, Task: filter.Task})
	if err != nil {
		return nil, fmt.Errorf("count queues: %w", err)
	}
	ids := make([]uuid.UUID, len(queues))
	for i, q := range queues {
		ids[i] = q.ID
	}
	stats, err := s.partitionStats(ctx, ids)
	if err != nil {
		return nil, err
	}
	counts := make(map[uuid.UUID]*msgCounts, len(queues))
	partitions := make(map[uuid.UUID]int, len(queues))
	for _, r := range stats {
		if counts[r.QueueID] == nil {
			counts[r.QueueID] = &msgCounts{}
		}
		counts[r.QueueID].add(r)
		partitions[r.QueueID]++
	}
	resp := api.ListQueues200JSONResponse{Queues: make([]api.QueueSummary, 0, len(queues)), Total: int(total)}
	resp.Pagination.Limit, resp.Pagination.Offset = p.Limit, int(filter.RowOffset)
	for _, q := range queues {
		c := msgCounts{}
		if counts[q.ID] != nil {
			c = *counts[q.ID]
		}
		resp.Queues = append(resp.Queues, api.QueueSummary{
			Id: q.ID.String(), Name: q.Name, Namespace: q.Namespace, Task: q.Task, Priority: int(q.Priority),
			CreatedAt: fmtMillis(q.CreatedAt.Time), Partitions: partitions[q.ID], Messages: c.wire(),
		})
	}
	return resp, nil
}

// tagGroup is one namespace or task with what it holds.
type tagGroup struct {
	name       string
	queues     int
	partitions int
	counts     msgCounts
}

// groupByTag adds up every queue by a tag (namespace or task), leaving out
// queues without one, ordered by the tag.
func (s *Server) groupByTag(ctx context.Context, tag func(db.QueenQueue) string) ([]tagGroup, error) {
	queues, err := s.q.QueueListPage(ctx, db.QueueListPageParams{})
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	stats, err := s.partitionStats(ctx, nil)
	if err != nil {
		return nil, err
	}
	byQueue := make(map[uuid.UUID]string, len(queues))
	groups := map[string]*tagGroup{}
	for _, q := range queues {
		t := tag(q)
		if t == "" {
			continue
		}
		byQueue[q.ID] = t
		if groups[t] == nil {
			groups[t] = &tagGroup{name: t}
		}
		groups[t].queues++
	}
	for _, r := range stats {
		if g := groups[byQueue[r.QueueID]]; g != nil {
			g.partitions++
			g.counts.add(r)
		}
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
			Namespace: g.name, Queues: g.queues, Partitions: g.partitions, Messages: g.counts.wire(),
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
			Task: g.name, Queues: g.queues, Partitions: g.partitions, Messages: g.counts.wire(),
		})
	}
	return resp, nil
}

// ListPartitions pages through partitions, by queue then name, with their
// counts.
func (s *Server) ListPartitions(ctx context.Context, req api.ListPartitionsRequestObject) (api.ListPartitionsResponseObject, error) {
	p := req.Params
	queue := deref(p.Queue, "")
	limit, offset := deref(p.Limit, 100), deref(p.Offset, 0)
	if queue != "" {
		if _, err := s.q.QueueGetByName(ctx, queue); errors.Is(err, pgx.ErrNoRows) {
			return api.ListPartitions404JSONResponse{NotFoundJSONResponse: api.NotFoundJSONResponse{Error: "Queue not found"}}, nil
		} else if err != nil {
			return nil, fmt.Errorf("read queue %q: %w", queue, err)
		}
	}
	ids, err := s.q.PartitionListPage(ctx, db.PartitionListPageParams{QueueName: queue, RowLimit: int32(limit), RowOffset: int32(offset)})
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	total, err := s.q.PartitionCountFiltered(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("count partitions: %w", err)
	}
	var stats []db.PartitionStatsListRow
	if len(ids) > 0 {
		if stats, err = s.q.PartitionStatsList(ctx, db.PartitionStatsListParams{PartitionIds: ids}); err != nil {
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

// GetOverview sums the whole broker: queues, partitions, tags, message
// counts, consumer lag and the recent ingest rate.
func (s *Server) GetOverview(ctx context.Context, _ api.GetOverviewRequestObject) (api.GetOverviewResponseObject, error) {
	queues, err := s.q.QueueListPage(ctx, db.QueueListPageParams{})
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	stats, err := s.partitionStats(ctx, nil)
	if err != nil {
		return nil, err
	}
	lags, err := s.q.PartitionConsumerLagList(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("read consumer lag: %w", err)
	}
	const window = 5 * time.Minute
	now := time.Now()
	recent, err := s.q.MessageCountCreatedSince(ctx, pgtype.Timestamptz{Time: now.Add(-window), Valid: true})
	if err != nil {
		return nil, fmt.Errorf("count recent messages: %w", err)
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
	for _, r := range stats {
		c.add(r)
	}
	resp := api.GetOverview200JSONResponse{
		Queues: len(queues), Partitions: len(stats), Namespaces: len(namespaces), Tasks: len(tasks),
		Timestamp: fmtMillis(now),
	}
	m := &resp.Messages
	m.Total, m.Processing, m.DeadLetter = int(c.total), int(c.processing), int(c.deadLetter)
	m.Pending = int(max(c.pending-c.processing, 0))
	m.Completed = int(max(c.total-c.pending-c.deadLetter, 0))
	timeLags := make([]float64, len(lags))
	offsetLags := make([]float64, len(lags))
	for i, l := range lags {
		timeLags[i] = float64(ageSeconds(l.ObservedAt.Time, l.OldestUnconsumedAt.Time, l.OldestUnconsumedAt.Valid))
		offsetLags[i] = float64(l.OffsetLag)
	}
	resp.Lag.Time, resp.Lag.Offset = lagStats(timeLags), lagStats(offsetLags)
	resp.Throughput.IngestedPerSecond = float64(recent) / window.Seconds()
	return resp, nil
}

// lagStats summarises lags; all zero when there are none.
func lagStats(v []float64) api.LagStats {
	if len(v) == 0 {
		return api.LagStats{}
	}
	slices.Sort(v)
	var sum float64
	for _, x := range v {
		sum += x
	}
	median := v[len(v)/2]
	if len(v)%2 == 0 {
		median = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return api.LagStats{Avg: sum / float64(len(v)), Median: median, Min: v[0], Max: v[len(v)-1]}
}

// ageSeconds is how many whole seconds before now t was; 0 when t is unset
// or in the future.
func ageSeconds(now, t time.Time, valid bool) int {
	if !valid || !t.Before(now) {
		return 0
	}
	return int(now.Sub(t) / time.Second)
}
