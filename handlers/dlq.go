package handlers

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// The dlq tag: replay and purge go through the broker here; the listing is
// a read route (dlq_reads.go).

// ReplayDeadLetter replays one dead-letter row, by its id, to its own queue
// and partition or to the ones the body names (broker.ReplayDeadLetter).
func (s *Server) ReplayDeadLetter(ctx context.Context, req api.ReplayDeadLetterRequestObject) (api.ReplayDeadLetterResponseObject, error) {
	id, err := uuid.Parse(req.Id)
	if err != nil {
		return badRequest[api.ReplayDeadLetter400JSONResponse]("id must be a UUID"), nil
	}
	var queue, partition string
	if req.Body != nil {
		queue, partition = deref(req.Body.Queue, ""), deref(req.Body.Partition, "")
	}
	r, err := s.b.ReplayDeadLetter(ctx, tenant(ctx), id, queue, partition)
	switch {
	case errors.Is(err, broker.ErrMaintenance):
		return api.ReplayDeadLetter503JSONResponse(maintenanceRefusal("replay again when push maintenance is off")), nil
	case errors.Is(err, broker.ErrNotFound):
		return api.ReplayDeadLetter404JSONResponse{Error: "Dead-letter entry not found"}, nil
	case err != nil:
		return nil, err
	}
	return api.ReplayDeadLetter200JSONResponse(replayResponse(r)), nil
}

// maintenanceRefusal is the 503 of a DLQ retry or replay while push
// maintenance is on, in the newer reference's shape.
func maintenanceRefusal(msg string) api.DeadLetterReplayUnavailable {
	return api.DeadLetterReplayUnavailable{
		Success: ptr(false), Result: ptr(api.DeadLetterReplayUnavailableResult("maintenance")), Error: "push maintenance is on",
		DlqRowRemoved: ptr(false), Message: ptr(msg),
	}
}

// replayResponse is the answer to a dead-letter replay.
func replayResponse(r broker.Replayed) api.RetryResponse {
	resp := api.RetryResponse{
		Success: true, Result: api.RetryResponseResultMoved, Queue: r.Item.Queue, Partition: r.Item.Partition,
		ConsumerGroup: r.Group, DlqId: r.DeadLetterID.String(), OriginalTransactionId: r.OriginalTransactionID,
		DlqRowRemoved: true,
	}
	if r.Result.Status != broker.Queued {
		resp.Result = api.RetryResponseResultDuplicate
	}
	ra := &resp.ReplayedAs
	ra.Index, ra.MessageId, ra.TransactionId, ra.QueueName = 0, r.Result.MessageID.String(), r.Item.TransactionID, r.Item.Queue
	ra.PartitionId, ra.Status = ptr(r.Result.PartitionID.String()), api.RetryResponseReplayedAsStatus(r.Result.Status)
	return resp
}

// PurgeDeadLetters deletes the dead-letter rows of a queue, or of one group
// in it. The messages stay: every cursor concerned is already past them.
func (s *Server) PurgeDeadLetters(ctx context.Context, req api.PurgeDeadLettersRequestObject) (api.PurgeDeadLettersResponseObject, error) {
	p := req.Params
	n, err := s.b.PurgeDeadLetters(ctx, tenant(ctx), p.Queue, deref(p.ConsumerGroup, ""))
	if err != nil {
		return nil, err
	}
	return api.PurgeDeadLetters200JSONResponse{Success: true, Deleted: int(n), Queue: p.Queue, ConsumerGroup: p.ConsumerGroup}, nil
}
