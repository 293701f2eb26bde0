package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/queenforgo/queen/gen/api"
)

// errRollback carries the reason a transaction was rolled back on purpose.
type errRollback struct{ reason string }

func (e errRollback) Error() string { return e.reason }

// ExecuteTransaction applies acks and pushes in one PostgreSQL transaction.
func (s *Server) ExecuteTransaction(ctx context.Context, req api.ExecuteTransactionRequestObject) (api.ExecuteTransactionResponseObject, error) {
	if req.Body == nil {
		return nil, badRequest("Empty request body")
	}
	type slot struct {
		push bool
		idx  int // index into pushes or acks
	}
	var pushes []pushItem
	var acks []ackItem
	var slots []slot
	sub := producerSub(ctx)
	for i, op := range req.Body.Operations {
		switch op.Type {
		case api.Push:
			if op.Items != nil {
				for _, it := range *op.Items {
					p := pushItemFrom(it.Queue, it.Partition, it.TransactionId, it.TraceId, it.Payload)
					p.ProducerSub = sub
					slots = append(slots, slot{true, len(pushes)})
					pushes = append(pushes, p)
				}
				continue
			}
			if op.Queue == nil {
				return nil, badRequest(fmt.Sprintf("operations/%d: a push needs items or a queue", i))
			}
			p := pushItemFrom(*op.Queue, op.Partition, op.TransactionId, op.TraceId, op.Payload)
			p.ProducerSub = sub
			slots = append(slots, slot{true, len(pushes)})
			pushes = append(pushes, p)
		case api.Ack:
			if op.TransactionId == nil || *op.TransactionId == "" || op.PartitionId == nil {
				return nil, badRequest(fmt.Sprintf("operations/%d: an ack needs transactionId and partitionId", i))
			}
			it, err := ackItemFrom(*op.TransactionId, *op.PartitionId, op.Status, op.ConsumerGroup, op.LeaseId, op.Error)
			if err != nil {
				return nil, err
			}
			slots = append(slots, slot{false, len(acks)})
			acks = append(acks, it)
		default:
			return nil, badRequest(fmt.Sprintf("operations/%d: unknown type %q", i, op.Type))
		}
	}
	if len(slots) > 1000 {
		return nil, badRequest("a transaction holds at most 1000 items")
	}

	txID := uuid.NewString()
	queues, err := s.ensureQueues(ctx, distinctQueues(pushes))
	if err != nil {
		return nil, err
	}
	var pushOut []pushOutcome
	var ackOut []api.AckResult
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if len(acks) > 0 {
			ackOut, err = s.applyAcks(ctx, tx, acks, ackTransactional)
			if err != nil {
				return err
			}
			for _, r := range ackOut {
				if !r.Success {
					return errRollback{"ACK operation failed: " + deref(r.Error, "unknown error")}
				}
			}
		}
		if len(pushes) > 0 {
			pushOut, err = s.storeMessages(ctx, tx, queues, pushes)
		}
		return err
	})
	var rb errRollback
	if errors.As(err, &rb) {
		return api.ExecuteTransaction200JSONResponse{
			TransactionId: txID, Success: false, Error: ptr(rb.reason), Results: []api.TransactionResult{},
		}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("transaction: %w", err)
	}
	s.notifyQueues(ctx, distinctQueues(pushes))
	s.notifyReleased(ctx, ackOut)
	s.recordTransaction(pushes, pushOut, acks, ackOut) // metrics_record.go

	results := make([]api.TransactionResult, len(slots))
	for i, sl := range slots {
		if sl.push {
			it, o := pushes[sl.idx], pushOut[sl.idx]
			results[i] = api.TransactionResult{
				Index: i, Type: "push", Success: true, Status: ptr(o.Status),
				TransactionId: ptr(it.TransactionID), MessageId: ptr(o.MessageID.String()),
				PartitionId: ptr(o.PartitionID.String()), QueueName: ptr(it.Queue),
			}
			continue
		}
		r := ackOut[sl.idx]
		results[i] = api.TransactionResult{
			Index: i, Type: "ack", Success: true, TransactionId: ptr(r.TransactionId),
			Error: nil, Dlq: ptr(r.Dlq), QueueName: r.QueueName,
		}
	}
	return api.ExecuteTransaction200JSONResponse{TransactionId: txID, Success: true, Results: results}, nil
}
