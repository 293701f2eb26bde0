package handlers

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// laggingThresholdDefault is the lagging-partitions threshold without
// minLagSeconds, as in the reference broker (and the dashboard's default).
const laggingThresholdDefault = 3600

// staleLagSeconds is the time lag above which a group is Lagging.
const staleLagSeconds = 300

// The consumer-group reads share one query, PartitionConsumerLagList: one
// row per (group, partition) of every queue the group reads, with the lag
// measured from its cursor. The routes aggregate or filter those rows.

func timeLagOf(r db.PartitionConsumerLagListRow) int {
	return ageSeconds(r.ObservedAt.Time, r.OldestUnconsumedAt.Time, r.OldestUnconsumedAt.Valid)
}

// ListConsumerGroups returns one row per (group, queue), by group then
// queue.
func (s *Server) ListConsumerGroups(ctx context.Context, _ api.ListConsumerGroupsRequestObject) (api.ListConsumerGroupsResponseObject, error) {
	rows, err := s.q.PartitionConsumerLagList(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("read consumer lag: %w", err)
	}
	out := api.ListConsumerGroups200JSONResponse{}
	var cur *api.ConsumerGroupSummary
	consumed := false
	finish := func() {
		if cur == nil {
			return
		}
		switch {
		case cur.MaxTimeLag > staleLagSeconds:
			cur.State = api.Lagging
		case consumed:
			cur.State = api.Stable
		default:
			cur.State = api.Dead
		}
		out = append(out, *cur)
	}
	for _, r := range rows { // ordered by group, queue, partition
		if cur == nil || cur.Name != r.ConsumerGroup || cur.QueueName != r.QueueName {
			finish()
			cur = &api.ConsumerGroupSummary{Name: r.ConsumerGroup, QueueName: r.QueueName, Topics: []string{r.QueueName}}
			consumed = false
		}
		if r.HasCursor {
			cur.Members++
		}
		if r.OldestUnconsumedAt.Valid {
			cur.PartitionsWithLag++
		}
		cur.TotalLag += int(r.OffsetLag)
		cur.MaxTimeLag = max(cur.MaxTimeLag, timeLagOf(r))
		consumed = consumed || r.TotalConsumed > 0
		if cur.SubscriptionMode == nil && r.SubscriptionMode != "" {
			cur.SubscriptionMode = ptr(r.SubscriptionMode)
			cur.SubscriptionTimestamp = fmtTimestamptz(r.SubscriptionTimestamp)
			cur.SubscriptionCreatedAt = fmtTimestamptz(r.SubscriptionCreatedAt)
		}
	}
	finish()
	return out, nil
}

// ListLaggingPartitions returns the (group, partition) pairs whose oldest
// unconsumed message is older than the threshold, worst first.
func (s *Server) ListLaggingPartitions(ctx context.Context, req api.ListLaggingPartitionsRequestObject) (api.ListLaggingPartitionsResponseObject, error) {
	threshold := deref(req.Params.MinLagSeconds, laggingThresholdDefault)
	rows, err := s.q.PartitionConsumerLagList(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("read consumer lag: %w", err)
	}
	out := api.ListLaggingPartitions200JSONResponse{}
	for _, r := range rows {
		lag := timeLagOf(r)
		if !r.OldestUnconsumedAt.Valid || lag <= threshold {
			continue
		}
		out = append(out, api.LaggingPartition{
			ConsumerGroup: r.ConsumerGroup, QueueName: r.QueueName, PartitionName: r.PartitionName,
			PartitionId: r.PartitionID.String(), OffsetLag: int(r.OffsetLag), TimeLagSeconds: lag,
			LagHours:           math.Round(float64(lag)/36) / 100,
			OldestUnconsumedAt: fmtTimestamptz(r.OldestUnconsumedAt), LastConsumedAt: fmtTimestamptz(r.LastConsumedAt),
		})
	}
	slices.SortStableFunc(out, func(a, b api.LaggingPartition) int { return cmp.Compare(b.TimeLagSeconds, a.TimeLagSeconds) })
	return out, nil
}

// GetConsumerGroup returns a group's partitions keyed by queue name; an
// unknown group is an empty object, as in the reference broker.
func (s *Server) GetConsumerGroup(ctx context.Context, req api.GetConsumerGroupRequestObject) (api.GetConsumerGroupResponseObject, error) {
	rows, err := s.q.PartitionConsumerLagList(ctx, req.Group)
	if err != nil {
		return nil, fmt.Errorf("read consumer lag of %q: %w", req.Group, err)
	}
	out := api.GetConsumerGroup200JSONResponse{}
	for _, r := range rows {
		q := out[r.QueueName]
		q.Partitions = append(q.Partitions, struct {
			LastConsumedAt *string `json:"lastConsumedAt"`
			LeaseActive    bool    `json:"leaseActive"`
			OffsetLag      int     `json:"offsetLag"`
			Partition      string  `json:"partition"`
			TimeLagSeconds int     `json:"timeLagSeconds"`
			TotalConsumed  int     `json:"totalConsumed"`
			WorkerId       *string `json:"workerId"`
		}{
			LastConsumedAt: fmtTimestamptz(r.LastConsumedAt), LeaseActive: r.LeaseActive,
			OffsetLag: int(r.OffsetLag), Partition: r.PartitionName, TimeLagSeconds: timeLagOf(r),
			TotalConsumed: int(r.TotalConsumed),
		})
		out[r.QueueName] = q
	}
	return out, nil
}
