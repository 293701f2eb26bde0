package handlers

import (
	"context"
	"errors"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// The consumer-groups tag: cursor deletions and seeks go through the
// broker here; the listings are read routes (consumer_groups_reads.go).

// DeleteConsumerGroup removes a group's cursors on every queue and, unless
// asked not to, its subscription start points.
func (s *Server) DeleteConsumerGroup(ctx context.Context, req api.DeleteConsumerGroupRequestObject) (api.DeleteConsumerGroupResponseObject, error) {
	withMeta := deref(req.Params.DeleteMetadata, true)
	n, err := s.b.DeleteConsumerGroup(ctx, tenant(ctx), req.Group, "", withMeta)
	if err != nil {
		return nil, err
	}
	return api.DeleteConsumerGroup200JSONResponse{
		Success: true, ConsumerGroup: req.Group, DeletedPartitions: int(n), MetadataDeleted: withMeta,
	}, nil
}

// DeleteConsumerGroupForQueue removes a group's cursors on one queue.
func (s *Server) DeleteConsumerGroupForQueue(ctx context.Context, req api.DeleteConsumerGroupForQueueRequestObject) (api.DeleteConsumerGroupForQueueResponseObject, error) {
	withMeta := deref(req.Params.DeleteMetadata, true)
	n, err := s.b.DeleteConsumerGroup(ctx, tenant(ctx), req.Group, req.Queue, withMeta)
	if err != nil {
		return nil, err
	}
	return api.DeleteConsumerGroupForQueue200JSONResponse{
		Success: true, ConsumerGroup: req.Group, QueueName: ptr(req.Queue), DeletedPartitions: int(n), MetadataDeleted: withMeta,
	}, nil
}

// UpdateConsumerGroupSubscription moves the stored start points of a group.
func (s *Server) UpdateConsumerGroupSubscription(ctx context.Context, req api.UpdateConsumerGroupSubscriptionRequestObject) (api.UpdateConsumerGroupSubscriptionResponseObject, error) {
	const missing = "Missing subscriptionTimestamp in request body"
	if req.Body == nil {
		return badRequest[api.UpdateConsumerGroupSubscription400JSONResponse](missing), nil
	}
	ts, err := parseTimestampParam("subscriptionTimestamp", &req.Body.SubscriptionTimestamp)
	if err != nil {
		return badRequest[api.UpdateConsumerGroupSubscription400JSONResponse](err.Error()), nil
	}
	if ts == nil {
		return badRequest[api.UpdateConsumerGroupSubscription400JSONResponse](missing), nil
	}
	n, err := s.b.SetSubscriptionStart(ctx, tenant(ctx), req.Group, *ts)
	if err != nil {
		return nil, err
	}
	return api.UpdateConsumerGroupSubscription200JSONResponse{
		Success: true, ConsumerGroup: req.Group, NewTimestamp: fmtMillis(*ts), RowsUpdated: int(n),
	}, nil
}

// SeekConsumerGroup moves a group's cursor on every partition of a queue.
func (s *Server) SeekConsumerGroup(ctx context.Context, req api.SeekConsumerGroupRequestObject) (api.SeekConsumerGroupResponseObject, error) {
	if req.Body == nil || (!deref(req.Body.ToEnd, false) && deref(req.Body.Timestamp, "") == "") {
		return badRequest[api.SeekConsumerGroup400JSONResponse]("Must specify either 'toEnd': true or 'timestamp'"), nil
	}
	at, err := parseTimestampParam("timestamp", req.Body.Timestamp)
	if err != nil {
		return badRequest[api.SeekConsumerGroup400JSONResponse](err.Error()), nil
	}
	toEnd := deref(req.Body.ToEnd, false)
	var target *string
	if toEnd {
		at = nil
	} else {
		target = ptr(fmtMillis(*at))
	}
	n, err := s.b.SeekQueue(ctx, tenant(ctx), req.Group, req.Queue, at)
	if errors.Is(err, broker.ErrNotFound) {
		return notFound[api.SeekConsumerGroup404JSONResponse]("Queue not found"), nil
	}
	if err != nil {
		return nil, err
	}
	return api.SeekConsumerGroup200JSONResponse{
		Success: true, ConsumerGroup: req.Group, QueueName: req.Queue, SeekToEnd: toEnd,
		TargetTimestamp: target, PartitionsUpdated: int(n),
	}, nil
}

// SeekConsumerGroupPartition moves a group's cursor on one partition past
// every stored message.
func (s *Server) SeekConsumerGroupPartition(ctx context.Context, req api.SeekConsumerGroupPartitionRequestObject) (api.SeekConsumerGroupPartitionResponseObject, error) {
	res, err := s.b.SeekPartitionToEnd(ctx, tenant(ctx), req.Group, req.Queue, req.Partition)
	if errors.Is(err, broker.ErrNotFound) {
		return notFound[api.SeekConsumerGroupPartition404JSONResponse]("Partition not found"), nil
	}
	if err != nil {
		return nil, err
	}
	return api.SeekConsumerGroupPartition200JSONResponse{
		Success: true, ConsumerGroup: req.Group, QueueName: req.Queue, PartitionName: req.Partition,
		Updated: res.Updated, CursorMovedTo: fmtMillisPtr(res.MovedTo),
	}, nil
}
