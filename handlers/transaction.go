package handlers

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// ExecuteTransaction applies acks and pushes in one PostgreSQL transaction
// (broker.Transact).
func (s *Server) ExecuteTransaction(ctx context.Context, req api.ExecuteTransactionRequestObject) (api.ExecuteTransactionResponseObject, error) {
	if req.Body == nil {
		return badRequest[api.ExecuteTransaction400JSONResponse]("Empty request body"), nil
	}
	type slot struct {
		push bool
		idx  int // index into pushes or acks
	}
	var pushes []broker.PushItem
	var acks []broker.AckItem
	var slots []slot
	sub := producerSub(ctx)
	for i, op := range req.Body.Operations {
		switch op.Type {
		case api.Push:
			if op.Items != nil {
				for _, it := range *op.Items {
					slots = append(slots, slot{true, len(pushes)})
					pushes = append(pushes, pushItemFrom(it.Queue, it.Partition, it.TransactionId, it.TraceId, it.Payload, sub))
				}
				continue
			}
			if op.Queue == nil {
				return badRequest[api.ExecuteTransaction400JSONResponse](fmt.Sprintf("operations/%d: a push needs items or a queue", i)), nil
			}
			slots = append(slots, slot{true, len(pushes)})
			pushes = append(pushes, pushItemFrom(*op.Queue, op.Partition, op.TransactionId, op.TraceId, op.Payload, sub))
		case api.Ack:
			if op.TransactionId == nil || *op.TransactionId == "" || op.PartitionId == nil {
				return badRequest[api.ExecuteTransaction400JSONResponse](fmt.Sprintf("operations/%d: an ack needs transactionId and partitionId", i)), nil
			}
			it, err := ackItemFrom(*op.TransactionId, *op.PartitionId, op.Status, op.ConsumerGroup, op.LeaseId, op.Error)
			if err != nil {
				return badRequest[api.ExecuteTransaction400JSONResponse](err.Error()), nil
			}
			slots = append(slots, slot{false, len(acks)})
			acks = append(acks, it)
		default:
			return badRequest[api.ExecuteTransaction400JSONResponse](fmt.Sprintf("operations/%d: unknown type %q", i, op.Type)), nil
		}
	}

	txID := uuid.NewString()
	res, err := s.b.Transact(ctx, tenant(ctx), pushes, acks)
	if msg, invalid := invalidMessage(err); invalid {
		return badRequest[api.ExecuteTransaction400JSONResponse](msg), nil
	}
	if err != nil {
		return nil, err
	}
	if res.Refused != nil {
		return api.ExecuteTransaction200JSONResponse{
			TransactionId: txID, Success: false, Error: ptr("ACK operation failed: " + refusalText(res.Refused.Refused)),
			Results: []api.TransactionResult{},
		}, nil
	}
	results := make([]api.TransactionResult, len(slots))
	for i, sl := range slots {
		if sl.push {
			it, o := pushes[sl.idx], res.Pushes[sl.idx]
			results[i] = api.TransactionResult{
				Index: i, Type: "push", Success: true, Status: ptr(string(o.Status)),
				TransactionId: ptr(it.TransactionID), MessageId: ptr(o.MessageID.String()),
				PartitionId: ptr(o.PartitionID.String()), QueueName: ptr(it.Queue),
			}
			continue
		}
		r := res.Acks[sl.idx]
		results[i] = api.TransactionResult{
			Index: i, Type: "ack", Success: true, TransactionId: ptr(r.TransactionID),
			Dlq: ptr(r.DeadLettered), QueueName: ptr(r.Queue),
		}
	}
	return api.ExecuteTransaction200JSONResponse{TransactionId: txID, Success: true, Results: results}, nil
}
