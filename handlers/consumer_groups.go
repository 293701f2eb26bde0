package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// DeleteConsumerGroup removes a group's cursors on every queue and, unless
// asked not to, its subscription start points.
func (s *Server) DeleteConsumerGroup(ctx context.Context, req api.DeleteConsumerGroupRequestObject) (api.DeleteConsumerGroupResponseObject, error) {
	withMeta := deref(req.Params.DeleteMetadata, true)
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		qtx := s.q.WithTx(tx)
		var err error
		if n, err = qtx.PartitionConsumerDeleteByGroup(ctx, req.Group); err != nil {
			return err
		}
		if withMeta {
			_, err = qtx.SubscriptionDeleteByGroup(ctx, req.Group)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete consumer group %q: %w", req.Group, err)
	}
	if err := s.q.ConsumerWatermarkResetGroup(ctx, req.Group); err != nil {
		return nil, fmt.Errorf("reset watermarks of %q: %w", req.Group, err)
	}
	return api.DeleteConsumerGroup200JSONResponse{
		Success: true, ConsumerGroup: req.Group, DeletedPartitions: int(n), MetadataDeleted: withMeta,
	}, nil
}

// DeleteConsumerGroupForQueue removes a group's cursors on one queue.
func (s *Server) DeleteConsumerGroupForQueue(ctx context.Context, req api.DeleteConsumerGroupForQueueRequestObject) (api.DeleteConsumerGroupForQueueResponseObject, error) {
	withMeta := deref(req.Params.DeleteMetadata, true)
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		qtx := s.q.WithTx(tx)
		var err error
		key := db.PartitionConsumerDeleteByGroupAndQueueParams{ConsumerGroup: req.Group, QueueName: req.Queue}
		if n, err = qtx.PartitionConsumerDeleteByGroupAndQueue(ctx, key); err != nil {
			return err
		}
		if withMeta {
			_, err = qtx.SubscriptionDeleteByGroupAndQueue(ctx, db.SubscriptionDeleteByGroupAndQueueParams{ConsumerGroup: req.Group, QueueName: req.Queue})
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete consumer group %q on %q: %w", req.Group, req.Queue, err)
	}
	if err := s.resetWatermark(ctx, req.Group, req.Queue); err != nil {
		return nil, err
	}
	return api.DeleteConsumerGroupForQueue200JSONResponse{
		Success: true, ConsumerGroup: req.Group, QueueName: ptr(req.Queue), DeletedPartitions: int(n), MetadataDeleted: withMeta,
	}, nil
}

// UpdateConsumerGroupSubscription moves the stored start points of a group.
func (s *Server) UpdateConsumerGroupSubscription(ctx context.Context, req api.UpdateConsumerGroupSubscriptionRequestObject) (api.UpdateConsumerGroupSubscriptionResponseObject, error) {
	if req.Body == nil {
		return nil, badRequest("Missing subscriptionTimestamp in request body")
	}
	ts, err := parseTimestampParam("subscriptionTimestamp", &req.Body.SubscriptionTimestamp)
	if err != nil {
		return nil, err
	}
	if ts == nil {
		return nil, badRequest("Missing subscriptionTimestamp in request body")
	}
	n, err := s.q.SubscriptionUpdateTimestamp(ctx, db.SubscriptionUpdateTimestampParams{SubscriptionTimestamp: pgtype.Timestamptz{Time: *ts, Valid: true}, ConsumerGroup: req.Group})
	if err != nil {
		return nil, fmt.Errorf("update subscription of %q: %w", req.Group, err)
	}
	if err := s.q.ConsumerWatermarkResetGroup(ctx, req.Group); err != nil {
		return nil, fmt.Errorf("reset watermarks of %q: %w", req.Group, err)
	}
	return api.UpdateConsumerGroupSubscription200JSONResponse{
		Success: true, ConsumerGroup: req.Group, NewTimestamp: fmtMillis(*ts), RowsUpdated: int(n),
	}, nil
}

// SeekConsumerGroup moves a group's cursor on every partition of a queue.
func (s *Server) SeekConsumerGroup(ctx context.Context, req api.SeekConsumerGroupRequestObject) (api.SeekConsumerGroupResponseObject, error) {
	if req.Body == nil || (!deref(req.Body.ToEnd, false) && deref(req.Body.Timestamp, "") == "") {
		return nil, badRequest("Must specify either 'toEnd': true or 'timestamp'")
	}
	at, err := parseTimestampParam("timestamp", req.Body.Timestamp)
	if err != nil {
		return nil, err
	}
	if _, ok, err := s.lookupQueue(ctx, req.Queue); err != nil || !ok {
		if err != nil {
			return nil, err
		}
		return api.SeekConsumerGroup404JSONResponse{NotFoundJSONResponse: api.NotFoundJSONResponse{Error: "Queue not found"}}, nil
	}
	toEnd := deref(req.Body.ToEnd, false)
	params := db.PartitionConsumerSeekQueueParams{ConsumerGroup: req.Group, ToEnd: toEnd, QueueName: req.Queue}
	var target *string
	if !toEnd {
		params.TargetTime = pgtype.Timestamptz{Time: *at, Valid: true}
		target = ptr(fmtMillis(*at))
	}
	n, err := s.q.PartitionConsumerSeekQueue(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("seek %q on %q: %w", req.Group, req.Queue, err)
	}
	if err := s.resetWatermark(ctx, req.Group, req.Queue); err != nil {
		return nil, err
	}
	s.notifyQueues(ctx, []string{req.Queue})
	return api.SeekConsumerGroup200JSONResponse{
		Success: true, ConsumerGroup: req.Group, QueueName: req.Queue, SeekToEnd: toEnd,
		TargetTimestamp: target, PartitionsUpdated: int(n),
	}, nil
}

// SeekConsumerGroupPartition moves a group's cursor on one partition past
// every stored message.
func (s *Server) SeekConsumerGroupPartition(ctx context.Context, req api.SeekConsumerGroupPartitionRequestObject) (api.SeekConsumerGroupPartitionResponseObject, error) {
	notFound := api.SeekConsumerGroupPartition404JSONResponse{NotFoundJSONResponse: api.NotFoundJSONResponse{Error: "Partition not found"}}
	q, ok, err := s.lookupQueue(ctx, req.Queue)
	if err != nil {
		return nil, err
	}
	if !ok {
		return notFound, nil
	}
	part, err := s.q.PartitionGetByQueueAndName(ctx, db.PartitionGetByQueueAndNameParams{QueueID: q.ID, Name: req.Partition})
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read partition %q of %q: %w", req.Partition, req.Queue, err)
	}
	n, err := s.q.PartitionConsumerSeekQueue(ctx, db.PartitionConsumerSeekQueueParams{
		ConsumerGroup: req.Group, ToEnd: true, QueueName: req.Queue, PartitionName: req.Partition,
	})
	if err != nil {
		return nil, fmt.Errorf("seek %q on %q/%q: %w", req.Group, req.Queue, req.Partition, err)
	}
	return api.SeekConsumerGroupPartition200JSONResponse{
		Success: true, ConsumerGroup: req.Group, QueueName: req.Queue, PartitionName: req.Partition,
		Updated: n > 0 && part.LastSeq > 0, CursorMovedTo: fmtTimestamptz(part.LastMessageAt),
	}, nil
}

// resetWatermark makes the group's next wildcard pop on the queue scan every
// partition again. It runs after the change that may have made old
// partitions pending (a seek back, deleted cursors) has committed, so that a
// scan still seeing the old state cannot advance the watermark past them.
func (s *Server) resetWatermark(ctx context.Context, group, queue string) error {
	err := s.q.ConsumerWatermarkResetQueue(ctx, db.ConsumerWatermarkResetQueueParams{ConsumerGroup: group, QueueName: queue})
	if err != nil {
		return fmt.Errorf("reset watermark of %q on %q: %w", group, queue, err)
	}
	return nil
}
