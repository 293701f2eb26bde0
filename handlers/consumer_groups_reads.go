package handlers

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// laggingThresholdDefault is the lagging-partitions threshold without
// minLagSeconds, as in the reference broker (and the dashboard's default).
const laggingThresholdDefault = 3600

// staleLagSeconds is the time lag above which a group is Lagging.
const staleLagSeconds = 300

// The consumer-group reads count what queen.consumer_lag (migrations 0008,
// 0010, 0021) defines: a summary row per (group, queue) the group reads and
// a row per partition where the group has something left or no cursor.
// The detail of one group reads the view; the listing, the lagging pairs
// and the overview's statistics get the same numbers from their own
// queries without a row per (group, partition) (sql/queries/consumer_lag.sql
// says how), so on a backlog of many partitions only what they return
// moves to Go.

// listConsumerGroups returns one row per (group, queue), by group then
// queue.
func (s *Server) listConsumerGroups(ctx context.Context, _ api.ListConsumerGroupsRequestObject) (api.ListConsumerGroupsResponseObject, error) {
	counts, err := s.allQueueCounts(ctx)
	if err != nil {
		return nil, err
	}
	arg := db.ConsumerLagByQueueParams{TenantID: tenantID(ctx)}
	for _, c := range counts {
		arg.PartQueueIds = append(arg.PartQueueIds, c.QueueID)
		arg.PartStored = append(arg.PartStored, c.Total)
		arg.PartNonempty = append(arg.PartNonempty, c.StoredIn)
	}
	rows, err := s.aq().ConsumerLagByQueue(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("read consumer lag: %w", err)
	}
	out := make(api.ListConsumerGroups200JSONResponse, 0, len(rows))
	for _, r := range rows {
		g := api.ConsumerGroupSummary{
			Name: r.ConsumerGroup, QueueName: r.QueueName, Topics: []string{r.QueueName},
			Members: int(r.Members), PartitionsWithLag: int(r.PartitionsWithLag), TotalLag: int(r.TotalLag),
			MaxTimeLag: ageSeconds(r.ObservedAt.Time, r.OldestUnconsumedAt.Time, r.OldestUnconsumedAt.Valid),
		}
		switch {
		case g.MaxTimeLag > staleLagSeconds:
			g.State = api.Lagging
		case r.Consumed:
			g.State = api.Stable
		default:
			g.State = api.Dead
		}
		if r.SubscriptionMode != "" {
			g.SubscriptionMode = ptr(r.SubscriptionMode)
			g.SubscriptionTimestamp = fmtTimestamptz(r.SubscriptionTimestamp)
			g.SubscriptionCreatedAt = fmtTimestamptz(r.SubscriptionCreatedAt)
		}
		out = append(out, g)
	}
	return out, nil
}

// listLaggingPartitions returns the (group, partition) pairs whose oldest
// unconsumed message is older than the threshold, worst first, the first
// limit of them when one is given.
func (s *Server) listLaggingPartitions(ctx context.Context, req api.ListLaggingPartitionsRequestObject) (api.ListLaggingPartitionsResponseObject, error) {
	threshold := deref(req.Params.MinLagSeconds, laggingThresholdDefault)
	maxRows := int64(math.MaxInt64)
	if req.Params.Limit != nil {
		maxRows = int64(*req.Params.Limit)
	}
	rows, err := s.aq().ConsumerLagOlderThan(ctx, db.ConsumerLagOlderThanParams{
		TenantID: tenantID(ctx), MinLagSeconds: int64(threshold), MaxRows: maxRows,
	})
	if err != nil {
		return nil, fmt.Errorf("read consumer lag: %w", err)
	}
	out := make(api.ListLaggingPartitions200JSONResponse, 0, len(rows))
	for _, r := range rows { // oldest first: worst first
		lag := ageSeconds(r.ObservedAt.Time, r.OldestUnconsumedAt.Time, r.OldestUnconsumedAt.Valid)
		out = append(out, api.LaggingPartition{
			ConsumerGroup: r.ConsumerGroup, QueueName: r.QueueName, PartitionName: r.PartitionName,
			PartitionId: r.PartitionID.String(), OffsetLag: int(r.OffsetLag), TimeLagSeconds: lag,
			LagHours:           math.Round(float64(lag)/36) / 100,
			OldestUnconsumedAt: fmtTimestamptz(r.OldestUnconsumedAt), LastConsumedAt: fmtTimestamptz(r.LastConsumedAt),
		})
	}
	return out, nil
}

// GetConsumerGroup returns a group's partitions keyed by queue name, each
// queue's by partition name: its cursors, with the lag of those that are
// behind, and the partitions of the queues it reads where it has no cursor
// yet. An unknown group is an empty object, as in the reference broker.
func (s *Server) GetConsumerGroup(ctx context.Context, req api.GetConsumerGroupRequestObject) (api.GetConsumerGroupResponseObject, error) {
	tid := tenantID(ctx)
	cursors, err := s.aq().PartitionConsumerListByGroup(ctx, db.PartitionConsumerListByGroupParams{ConsumerGroup: req.Group, TenantID: tid})
	if err != nil {
		return nil, fmt.Errorf("read cursors of %q: %w", req.Group, err)
	}
	lags, err := s.aq().ConsumerLagList(ctx, db.ConsumerLagListParams{TenantID: tid, ConsumerGroup: req.Group})
	if err != nil {
		return nil, fmt.Errorf("read consumer lag of %q: %w", req.Group, err)
	}
	type partition = struct {
		LastConsumedAt *string `json:"lastConsumedAt"`
		LeaseActive    bool    `json:"leaseActive"`
		OffsetLag      int     `json:"offsetLag"`
		Partition      string  `json:"partition"`
		TimeLagSeconds int     `json:"timeLagSeconds"`
		TotalConsumed  int     `json:"totalConsumed"`
		WorkerId       *string `json:"workerId"`
	}
	type row struct {
		queue string
		p     partition
	}
	rows := make([]row, 0, len(cursors)+len(lags))
	behind := make(map[uuid.UUID]db.ConsumerLagListRow, len(lags))
	for _, l := range lags {
		if l.HasCursor {
			behind[l.PartitionID] = l
			continue
		}
		rows = append(rows, row{l.QueueName, partition{
			OffsetLag: int(l.OffsetLag), Partition: l.PartitionName,
			TimeLagSeconds: ageSeconds(l.ObservedAt.Time, l.OldestUnconsumedAt.Time, l.OldestUnconsumedAt.Valid),
		}})
	}
	for _, c := range cursors {
		r := row{c.QueueName, partition{
			LastConsumedAt: fmtTimestamptz(c.LastConsumedAt), LeaseActive: c.LeaseActive,
			Partition: c.PartitionName, TotalConsumed: int(c.TotalMessagesConsumed),
		}}
		if l, ok := behind[c.PartitionID]; ok {
			r.p.OffsetLag = int(l.OffsetLag)
			r.p.TimeLagSeconds = ageSeconds(l.ObservedAt.Time, l.OldestUnconsumedAt.Time, l.OldestUnconsumedAt.Valid)
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(a.queue, b.queue), cmp.Compare(a.p.Partition, b.p.Partition))
	})
	out := api.GetConsumerGroup200JSONResponse{}
	for _, r := range rows {
		q := out[r.queue]
		q.Partitions = append(q.Partitions, r.p)
		out[r.queue] = q
	}
	return out, nil
}
