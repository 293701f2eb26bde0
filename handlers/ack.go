package handlers

import (
	"context"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// AckMessage acknowledges one message (broker.Ack, group commit).
func (s *Server) AckMessage(ctx context.Context, req api.AckMessageRequestObject) (api.AckMessageResponseObject, error) {
	if req.Body == nil {
		return badRequest[api.AckMessage400JSONResponse]("Empty request body"), nil
	}
	b := req.Body
	it, err := ackItemFrom(b.TransactionId, b.PartitionId, b.Status, b.ConsumerGroup, b.LeaseId, b.Error)
	if err != nil {
		return badRequest[api.AckMessage400JSONResponse](err.Error()), nil
	}
	res, err := s.b.Ack(ctx, tenant(ctx), []broker.AckItem{it})
	if msg, invalid := invalidMessage(err); invalid {
		return badRequest[api.AckMessage400JSONResponse](msg), nil
	}
	if err != nil {
		return nil, err
	}
	return api.AckMessage200JSONResponse(ackResults(res)), nil
}

// AckBatch acknowledges many messages in one transaction.
func (s *Server) AckBatch(ctx context.Context, req api.AckBatchRequestObject) (api.AckBatchResponseObject, error) {
	if req.Body == nil {
		return badRequest[api.AckBatch400JSONResponse]("Empty request body"), nil
	}
	if err := s.validator.checkAckBatch(req.Body); err != nil {
		return badRequest[api.AckBatch400JSONResponse](err.Error()), nil
	}
	items := make([]broker.AckItem, len(req.Body.Acknowledgments))
	for i, a := range req.Body.Acknowledgments {
		it, err := ackItemFrom(a.TransactionId, a.PartitionId, a.Status, req.Body.ConsumerGroup, a.LeaseId, a.Error)
		if err != nil {
			return badRequest[api.AckBatch400JSONResponse](err.Error()), nil
		}
		items[i] = it
	}
	res, err := s.b.Ack(ctx, tenant(ctx), items)
	if msg, invalid := invalidMessage(err); invalid {
		return badRequest[api.AckBatch400JSONResponse](msg), nil
	}
	if err != nil {
		return nil, err
	}
	return ackAnswer{res}, nil
}

// ackItemFrom maps the wire fields of an acknowledgement to an AckItem.
func ackItemFrom(txID string, partitionID string, status *api.AckStatus, group *string, leaseID, errMsg *string) (broker.AckItem, error) {
	pid, err := uuid.Parse(partitionID)
	if err != nil {
		return broker.AckItem{}, invalidf("partitionId must be a UUID")
	}
	return broker.AckItem{
		TransactionID: txID,
		PartitionID:   pid,
		Status:        broker.AckStatus(deref(status, api.AckStatusCompleted)),
		Group:         deref(group, ""),
		LeaseID:       deref(leaseID, ""),
		Error:         deref(errMsg, ""),
	}, nil
}

// ackResults renders ack results; indexes are per request.
func ackResults(res []broker.AckResult) []api.AckResult {
	out := make([]api.AckResult, len(res))
	for i, r := range res {
		out[i] = api.AckResult{
			Index: i, TransactionId: r.TransactionID, Success: r.Applied(),
			LeaseReleased: r.LeaseReleased, Dlq: r.DeadLettered,
		}
		if r.Refused != nil {
			out[i].Error = ptr(refusalText(r.Refused))
		}
		if r.Queue != "" {
			out[i].QueueName, out[i].PartitionName = ptr(r.Queue), ptr(r.Partition)
		}
	}
	return out
}
