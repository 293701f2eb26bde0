package handlers

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// The messages tag: deleting a message and the dashboard's message actions
// (Retry replays a dead-lettered message, Move to DLQ dead-letters a
// pending one) go through the broker here; the listing and the detail are
// read routes (messages_reads.go). "Move cursor to now" is the
// consumer-group seek.

// DeleteMessage deletes a stored message; its dead-letter and trace rows go
// with it. Deleting a message that is not there is not an error (the CLI's
// DLQ drain deletes blindly), as in the reference broker.
func (s *Server) DeleteMessage(ctx context.Context, req api.DeleteMessageRequestObject) (api.DeleteMessageResponseObject, error) {
	pid, err := uuid.Parse(req.PartitionId)
	if err != nil {
		return badRequest[api.DeleteMessage400JSONResponse]("partitionId must be a UUID"), nil
	}
	existed, err := s.b.DeleteMessage(ctx, tenant(ctx), pid, req.TransactionId)
	if err != nil {
		return nil, err
	}
	resp := api.DeleteMessage200JSONResponse{
		Success: existed, PartitionId: pid.String(), TransactionId: req.TransactionId, Message: "Message deleted successfully",
	}
	if !existed {
		resp.Message = "Message not found"
	}
	return resp, nil
}

func messageActionNotFound(pid, txID, msg string) api.MessageActionNotFound {
	return api.MessageActionNotFound{Success: false, PartitionId: pid, TransactionId: txID, Error: "Message not found", Message: msg}
}

// RetryMessage replays a message's newest dead-letter row as a new push to
// the same queue and partition (broker.RetryMessage).
func (s *Server) RetryMessage(ctx context.Context, req api.RetryMessageRequestObject) (api.RetryMessageResponseObject, error) {
	pid, err := uuid.Parse(req.PartitionId)
	if err != nil {
		return badRequest[api.RetryMessage400JSONResponse]("partitionId must be a UUID"), nil
	}
	group := ""
	if req.Body != nil {
		group = deref(req.Body.ConsumerGroup, "")
	}
	r, err := s.b.RetryMessage(ctx, tenant(ctx), pid, req.TransactionId, group)
	switch {
	case errors.Is(err, broker.ErrMaintenance):
		return api.RetryMessage503JSONResponse(maintenanceRefusal("retry again when push maintenance is off")), nil
	case errors.Is(err, broker.ErrNotFound):
		return api.RetryMessage404JSONResponse(messageActionNotFound(pid.String(), req.TransactionId,
			"no dead-letter entry for this message: only dead-lettered messages can be retried")), nil
	case err != nil:
		return nil, err
	}
	return api.RetryMessage200JSONResponse(replayResponse(r)), nil
}

// MoveMessageToDLQ dead-letters a message for one consumer group and moves
// the group's cursor over it (broker.MoveToDLQ).
func (s *Server) MoveMessageToDLQ(ctx context.Context, req api.MoveMessageToDLQRequestObject) (api.MoveMessageToDLQResponseObject, error) {
	pid, err := uuid.Parse(req.PartitionId)
	if err != nil {
		return badRequest[api.MoveMessageToDLQ400JSONResponse]("partitionId must be a UUID"), nil
	}
	var group, reason string
	if req.Body != nil {
		group, reason = deref(req.Body.ConsumerGroup, ""), deref(req.Body.ErrorMessage, "")
	}
	if group == "" {
		group = queueModeGroup
	}
	moved, err := s.b.MoveToDLQ(ctx, tenant(ctx), pid, req.TransactionId, group, reason)
	switch {
	case errors.Is(err, broker.ErrNotFound):
		return api.MoveMessageToDLQ404JSONResponse(messageActionNotFound(pid.String(), req.TransactionId, "Message not found")), nil
	case errors.Is(err, broker.ErrConflict):
		return api.MoveMessageToDLQ409JSONResponse{Error: "only the next message consumer group " + group +
			" would receive can be moved to the dead-letter queue, and not while it holds a lease on the partition"}, nil
	case err != nil:
		return nil, err
	}
	resp := api.MoveMessageToDLQ200JSONResponse{
		Success: true, Result: api.MoveToDLQResponseResultAlreadyDeadLettered, PartitionId: pid.String(), TransactionId: req.TransactionId,
		ConsumerGroup: group, Message: "Message was already in the dead-letter queue for this consumer group",
	}
	if moved {
		resp.Result, resp.Message = api.MoveToDLQResponseResultMoved, "Message moved to the dead-letter queue"
	}
	return resp, nil
}
