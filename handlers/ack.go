package handlers

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/api"
)

// AckMessage acknowledges one message in its own transaction.
func (s *Server) AckMessage(ctx context.Context, req api.AckMessageRequestObject) (api.AckMessageResponseObject, error) {
	if req.Body == nil {
		return nil, badRequest("Empty request body")
	}
	b := req.Body
	it, err := ackItemFrom(b.TransactionId, b.PartitionId, b.Status, b.ConsumerGroup, b.LeaseId, b.Error)
	if err != nil {
		return nil, err
	}
	res, err := s.ack(ctx, []ackItem{it})
	if err != nil {
		return nil, err
	}
	return api.AckMessage200JSONResponse(res), nil
}

// AckBatch acknowledges many messages in one transaction.
func (s *Server) AckBatch(ctx context.Context, req api.AckBatchRequestObject) (api.AckBatchResponseObject, error) {
	if req.Body == nil {
		return nil, badRequest("Empty request body")
	}
	items := make([]ackItem, len(req.Body.Acknowledgments))
	for i, a := range req.Body.Acknowledgments {
		it, err := ackItemFrom(a.TransactionId, a.PartitionId, a.Status, req.Body.ConsumerGroup, a.LeaseId, a.Error)
		if err != nil {
			return nil, err
		}
		items[i] = it
	}
	if len(items) == 0 {
		return api.AckBatch200JSONResponse{}, nil
	}
	res, err := s.ack(ctx, items)
	if err != nil {
		return nil, err
	}
	return api.AckBatch200JSONResponse(res), nil
}

// ack applies items, committed together with concurrent acks (see
// coalescer), and wakes the consumers of partitions whose lease it released.
func (s *Server) ack(ctx context.Context, items []ackItem) ([]api.AckResult, error) {
	res, err := s.acker.submit(ctx, items)
	if err != nil {
		return nil, err
	}
	for i := range res {
		res[i].Index = i // indexes are per request, not per flush
	}
	s.recordAcks(items, res) // metrics_record.go
	return res, nil
}

// ackDirect applies items in one transaction.
func (s *Server) ackDirect(ctx context.Context, items []ackItem) ([]api.AckResult, error) {
	var res []api.AckResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = s.applyAcks(ctx, tx, items, ackNormal)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ack: %w", err)
	}
	s.notifyReleased(ctx, res)
	return res, nil
}

// notifyReleased wakes long-polls on queues where an ack released a lease:
// the partition may be claimable again (a retry, or the rest of a batch).
func (s *Server) notifyReleased(ctx context.Context, res []api.AckResult) {
	var names []string
	seen := map[string]bool{}
	for _, r := range res {
		if r.LeaseReleased && r.QueueName != nil && !seen[*r.QueueName] {
			seen[*r.QueueName] = true
			names = append(names, *r.QueueName)
		}
	}
	s.notifyQueues(ctx, names)
}
